use super::*;
use proxy::view::LatencyView;

/// The first bounds of the switch's buckets (`quantile_us` reads those).
const BOUNDS: [u64; 3] = [50, 100, 200];

fn server(name: &str, requests: u64, latency: [u64; 4]) -> ServerView {
    ServerView {
        group: "web".into(),
        name: name.into(),
        addr: "127.0.0.1:1".into(),
        state: "ready",
        health: "up",
        last_check: String::new(),
        passive_out: false,
        weight: 1,
        effective_weight: 1,
        capacity: None,
        agent_age_ms: None,
        sticky_ok: true,
        active: 0,
        queued: 0,
        maxconn: 0,
        maxconn_here: 0,
        requests,
        responses: BTreeMap::new(),
        failures: 0,
        check_failures: 0,
        bytes_in: 0,
        bytes_out: 0,
        latency: LatencyView { bounds_us: &BOUNDS, counts: latency.to_vec(), sum_us: 0 },
        p50_us: None,
        p90_us: None,
        p99_us: None,
    }
}

fn points(h: &History, name: &str) -> Vec<Point> {
    h.servers[&("web".to_string(), name.to_string())].points.iter().copied().collect()
}

#[test]
fn a_point_a_sample_with_the_rate_and_the_windowed_p90() {
    let mut h = History::default();
    h.record(1.0, &[server("s1", 0, [0, 0, 0, 0])]);
    h.record(2.0, &[server("s1", 10, [0, 10, 0, 0])]);
    h.record(4.0, &[server("s1", 30, [0, 10, 20, 0])]);
    let p = points(&h, "s1");
    assert_eq!(p.len(), 3);
    assert_eq!((p[0].0, p[0].1, p[0].2), (1.0, None, None), "no rate without a previous sample");
    assert_eq!(p[1].1, Some(10.0));
    assert!(p[1].2.is_some_and(|us| (50..=100).contains(&us)), "{:?}", p[1]);
    assert_eq!(p[2].1, Some(10.0), "20 requests in 2 s");
    assert!(p[2].2.is_some_and(|us| (100..=200).contains(&us)), "{:?}", p[2]);
    // Twenty seconds without requests: the window is empty, so no p90.
    h.record(24.0, &[server("s1", 30, [0, 10, 20, 0])]);
    assert_eq!(points(&h, "s1")[3].2, None);
}

#[test]
fn the_ring_is_bounded_and_gone_servers_are_forgotten() {
    let mut h = History::default();
    for t in 0..(POINTS + 50) {
        h.record(t as f64, &[server("s1", t as u64, [0; 4]), server("s2", 0, [0; 4])]);
    }
    assert_eq!(points(&h, "s1").len(), POINTS);
    assert_eq!(points(&h, "s1")[0].0, 50.0, "the oldest points went first");
    assert!(h.servers.values().all(|t| t.recent.len() <= WINDOW_SECS as usize + 2));
    h.record(1000.0, &[server("s2", 0, [0; 4])]);
    assert_eq!(h.view().servers.len(), 1);
    assert_eq!(h.view().servers[0].server, "s2");
}

#[test]
fn a_counter_going_backwards_restarts_the_rate() {
    let mut h = History::default();
    h.record(1.0, &[server("s1", 100, [0; 4])]);
    h.record(2.0, &[server("s1", 5, [0; 4])]);
    assert_eq!(points(&h, "s1")[1].1, None);
}
