//! Property tests of session persistence (`cswitch_balance::persist`): cookie parsing on
//! any bytes, the cookie modes' round trips, and the stick table against a model.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cswitch_balance::persist::{
    add_prefix, cookie_pairs, find_cookie, parse_set_cookie, rename_code, rewrite_cookie_header,
    split_prefix, CookieEdit, InsertMode, InsertOptions, LearnMode, PrefixMode, RenameMode, SetCookie,
    StickTable, CODE_COUNT, DEFAULT_KEYWORD,
};
use proptest::prelude::*;

/// RFC 6265 `token` bytes: what a cookie name is made of.
const NAME_CHARS: &str = "[!#$%&'*+.^_`|~0-9A-Za-z-]";

/// RFC 6265 `cookie-octet`s.
const VALUE_CHARS: &str = "[!#$%&'()*+./0-9:<=>?@A-Z\\[\\]^_`a-z{|}~-]";

fn name(min: usize, max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("{NAME_CHARS}{{{min},{max}}}")).expect("valid regex")
}

fn value() -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("{VALUE_CHARS}{{0,12}}")).expect("valid regex")
}

/// Bytes that look like cookie headers often enough to reach every branch.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(prop::sample::select(b"ab=; \t\"~|,CS0PHPSESSID".to_vec()), 0..64),
    ]
}

fn join(pairs: &[(String, String)]) -> Vec<u8> {
    pairs.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join("; ").into_bytes()
}

proptest! {
    #[test]
    fn cookie_parsing_never_panics(h in header_bytes(), n in prop::collection::vec(any::<u8>(), 0..10)) {
        for (name, value) in cookie_pairs(&h) {
            prop_assert!(name.len() + value.len() <= h.len());
        }
        let _ = find_cookie(&h, &n);
        let mut out = Vec::new();
        let _ = rewrite_cookie_header(&h, &mut out, |name, value| match name.len() % 3 {
            0 => CookieEdit::Keep,
            1 => CookieEdit::Remove,
            _ => CookieEdit::Replace { name: value, value: name },
        });
        if let Some(c) = parse_set_cookie(&h) {
            let mut out = Vec::new();
            c.write_to(&mut out);
            prop_assert_eq!(parse_set_cookie(&out), Some(c));
        }
        let now = 1_700_000_000;
        let mut opts = InsertOptions::new("SRV");
        opts.max_idle = Some(Duration::from_secs(60));
        let _ = InsertMode::new(&opts).on_request(&h, now);
        let prefix = PrefixMode::new("ab");
        let _ = (prefix.request_tag(&h), prefix.strip(&h, &mut Vec::new()), prefix.on_set_cookie(&h, "s", &mut out));
        let rename = RenameMode::new("PHPSESSID", DEFAULT_KEYWORD).unwrap();
        let mut edited = h.clone();
        let _ = rename.find(&h, None);
        rename.restore_all(&mut edited);
        rename.rewrite_set_cookie(&mut edited, *b"000", *b"001");
        prop_assert_eq!(edited.len(), h.len());
    }

    #[test]
    fn cookie_header_round_trips(pairs in prop::collection::vec((name(1, 10), value()), 0..6), drop in any::<u64>()) {
        let header = join(&pairs);
        let parsed: Vec<(String, String)> = cookie_pairs(&header)
            .map(|(n, v)| (String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap()))
            .collect();
        prop_assert_eq!(&parsed, &pairs);

        let mut out = Vec::new();
        prop_assert!(!rewrite_cookie_header(&header, &mut out, |_, _| CookieEdit::Keep));
        let same = rewrite_cookie_header(&header, &mut out, |name, value| CookieEdit::Replace { name, value });
        prop_assert!(!same);

        // Removing any subset leaves exactly the others, in order.
        let mut i = 0;
        out.clear();
        let changed = rewrite_cookie_header(&header, &mut out, |_, _| {
            i += 1;
            if drop >> (i % 64) & 1 == 1 { CookieEdit::Remove } else { CookieEdit::Keep }
        });
        let kept: Vec<_> = pairs.iter().enumerate().filter(|(i, _)| drop >> ((i + 1) % 64) & 1 == 0).map(|(_, p)| p.clone()).collect();
        prop_assert_eq!(changed, kept.len() != pairs.len());
        if changed {
            prop_assert_eq!(out, join(&kept));
        }
    }

    #[test]
    fn set_cookie_round_trips(n in name(1, 10), v in value(), attrs in "(; [A-Za-z=/]{0,8}){0,3}") {
        let mut out = Vec::new();
        SetCookie::write(n.as_bytes(), v.as_bytes(), attrs.as_bytes(), &mut out);
        let c = parse_set_cookie(&out).unwrap();
        prop_assert_eq!((c.name, c.value, c.attrs), (n.as_bytes(), v.as_bytes(), attrs.as_bytes()));
    }

    #[test]
    fn rename_keeps_length_and_decodes_what_it_encoded(
        n in name(8, 20),
        class in 0..CODE_COUNT,
        server in 0..CODE_COUNT,
        v in value(),
        before in prop::collection::vec((name(1, 10), value()), 0..3),
    ) {
        let mode = RenameMode::new(&n, DEFAULT_KEYWORD).unwrap();
        let (class, server) = (rename_code(class).unwrap(), rename_code(server).unwrap());
        let mut renamed = Vec::new();
        prop_assert!(mode.encode_name(class, server, &mut renamed));
        prop_assume!(renamed != n.as_bytes());
        // Foreign cookies that happen to decode would be found first: keep them out.
        prop_assume!(before.iter().all(|(b, _)| mode.decode_name(b.as_bytes()).is_none()));

        let original = format!("{n}={v}; Path=/").into_bytes();
        let mut set = original.clone();
        prop_assert!(mode.rewrite_set_cookie(&mut set, class, server));
        prop_assert_eq!(set.len(), original.len());
        prop_assert_eq!(&set[..renamed.len()], &renamed[..]);

        let mut pairs = before.clone();
        pairs.push((String::from_utf8(renamed.clone()).unwrap(), v.clone()));
        let mut header = join(&pairs);
        let hit = mode.find(&header, Some(class)).unwrap();
        prop_assert_eq!((hit.class, hit.server), (class, server));
        let len = header.len();
        prop_assert!(mode.restore(&mut header, &hit));
        prop_assert_eq!(header.len(), len);
        pairs.last_mut().unwrap().0 = n.clone();
        prop_assert_eq!(header, join(&pairs));
    }

    #[test]
    fn prefix_strip_undoes_add(n in name(1, 10), tag in "[a-z0-9]{1,6}", v in value(), other in value()) {
        let mut added = Vec::new();
        add_prefix(tag.as_bytes(), v.as_bytes(), &mut added);
        prop_assert_eq!(split_prefix(&added), Some((tag.as_bytes(), v.as_bytes())));

        let mode = PrefixMode::new(&n);
        let mut set = Vec::new();
        let from_server = format!("{n}={v}; Path=/");
        prop_assert!(mode.on_set_cookie(from_server.as_bytes(), &tag, &mut set));
        let sent = parse_set_cookie(&set).unwrap();
        // A cookie whose name only starts like ours comes first: it must be left alone.
        let header = [n.as_bytes(), b"_=", other.as_bytes(), b"; ", n.as_bytes(), b"=", sent.value].concat();
        prop_assert_eq!(mode.request_tag(&header), Some(tag.as_bytes()));
        let mut out = Vec::new();
        prop_assert!(mode.strip(&header, &mut out));
        prop_assert_eq!(find_cookie(&out, n.as_bytes()), Some(v.as_bytes()));
        prop_assert_eq!(find_cookie(&out, format!("{n}_").as_bytes()), Some(other.as_bytes()));
    }

    #[test]
    fn insert_dates_expire_exactly(
        max_idle in prop::option::of(1u64..10_000),
        max_life in prop::option::of(1u64..100_000),
        first in 0u64..1_000_000,
        idle_for in 0u64..20_000,
        lived_before in 0u64..200_000,
    ) {
        prop_assume!(max_idle.is_some() || max_life.is_some());
        let mut opts = InsertOptions::new("SRV");
        opts.max_idle = max_idle.map(Duration::from_secs);
        opts.max_life = max_life.map(Duration::from_secs);
        let mode = InsertMode::new(&opts);
        let last = first + lived_before;
        let now = last + idle_for;
        let mut set = Vec::new();
        mode.set_cookie("s1", first, last, &mut set);
        let value = parse_set_cookie(&set).unwrap().value;
        let hit = mode.check_value(value, now);
        let valid = idle_for <= max_idle.unwrap_or(u64::MAX) && now - first <= max_life.unwrap_or(u64::MAX);
        prop_assert_eq!(hit.is_some(), valid);
        if let Some(hit) = hit {
            prop_assert_eq!((hit.tag, hit.first_seen, hit.last_seen), (&b"s1"[..], first, last));
            let due = max_idle.is_some_and(|m| idle_for >= (m / 16).max(1));
            prop_assert_eq!(hit.refresh, due);
            prop_assert_eq!(mode.plan(Some(&hit), "s1", now), due.then_some(first));
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u64),
    Get(u8),
    Remove(u8),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        (0u8..12, 0u64..4).prop_map(|(k, s)| Op::Put(k, s)),
        (0u8..12).prop_map(Op::Get),
        (0u8..12).prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 0..80)
}

proptest! {
    #[test]
    fn stick_table_is_an_lru_at_capacity(capacity in 1usize..8, ops in ops()) {
        let table = StickTable::with_shards(capacity, Duration::MAX, None, 1);
        let now = Instant::now();
        // Most recently used first.
        let mut model: Vec<(u8, u64)> = Vec::new();
        for op in ops {
            match op {
                Op::Put(k, s) => {
                    table.put(k, s, now);
                    model.retain(|&(mk, _)| mk != k);
                    model.truncate(capacity - 1);
                    model.insert(0, (k, s));
                }
                Op::Get(k) => {
                    let expected = model.iter().position(|&(mk, _)| mk == k).map(|i| model.remove(i));
                    prop_assert_eq!(table.get(&k, now), expected.map(|(_, s)| s));
                    if let Some(entry) = expected {
                        model.insert(0, entry);
                    }
                }
                Op::Remove(k) => {
                    table.remove(&k);
                    model.retain(|&(mk, _)| mk != k);
                }
            }
            prop_assert_eq!(table.len(), model.len());
        }
        let listed: Vec<(u8, u64)> = table.entries(now, usize::MAX).into_iter().map(|(k, s, _)| (k, s)).collect();
        prop_assert_eq!(listed, model);
    }

    #[test]
    fn stick_table_expires_by_idle_and_life(
        steps in prop::collection::vec((0u8..8, 0u64..3, 0u64..40, any::<bool>()), 0..60),
        max_life in prop::option::of(10u64..100),
    ) {
        let idle = Duration::from_secs(30);
        let max_life = max_life.map(Duration::from_secs);
        let table = StickTable::new(1000, idle, max_life);
        let t0 = Instant::now();
        let mut now = t0;
        // key → (server, created, last used), dead ones included until touched.
        let mut model: HashMap<u8, (u64, Instant, Instant)> = HashMap::new();
        let dead = |&(_, created, used): &(u64, Instant, Instant), now: Instant| {
            now - used >= idle || max_life.is_some_and(|l| now - created >= l)
        };
        for (k, s, advance, put) in steps {
            now += Duration::from_secs(advance);
            let live = model.get(&k).copied().filter(|e| !dead(e, now));
            if put {
                table.put(k, s, now);
                let created = live.filter(|e| e.0 == s).map_or(now, |e| e.1);
                model.insert(k, (s, created, now));
            } else {
                prop_assert_eq!(table.get(&k, now), live.map(|e| e.0));
                match live {
                    Some(e) => model.insert(k, (e.0, e.1, now)),
                    None => model.remove(&k),
                };
            }
        }
    }

    #[test]
    fn retain_servers_drops_exactly_the_refused(entries in prop::collection::vec((any::<u16>(), 0u64..6), 0..100)) {
        let table = StickTable::new(1000, Duration::MAX, None);
        let now = Instant::now();
        let mut model = HashMap::new();
        for (k, s) in entries {
            table.put(k, s, now);
            model.insert(k, s);
        }
        table.retain_servers(|s| s % 2 == 0);
        model.retain(|_, s| *s % 2 == 0);
        prop_assert_eq!(table.len(), model.len());
        for (k, s) in &model {
            prop_assert_eq!(table.get(k, now), Some(*s));
        }
    }
}

#[test]
fn concurrent_puts_below_capacity_are_all_kept() {
    let table = Arc::new(StickTable::<u64>::new(100_000, Duration::MAX, None));
    let now = Instant::now();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let table = Arc::clone(&table);
            std::thread::spawn(move || {
                for i in 0..5_000u64 {
                    let key = t * 1_000_000 + i;
                    table.put(key, t, now);
                    assert_eq!(table.get(&key, now), Some(t));
                    if i % 7 == 0 {
                        table.remove(&key);
                        table.put(key, t, now);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(table.len(), 20_000);
    for t in 0..4u64 {
        for i in 0..5_000u64 {
            assert_eq!(table.get(&(t * 1_000_000 + i), now), Some(t));
        }
    }
}

#[test]
fn learned_cookies_route_back_until_idle() {
    let mode = LearnMode::new("PHPSESSID", 10, Duration::from_secs(5), None);
    let t0 = Instant::now();
    assert!(mode.learn(b"PHPSESSID=abc; Path=/", 2, t0));
    assert_eq!(mode.lookup(b"x=1; PHPSESSID=abc", t0 + Duration::from_secs(4)), Some(2));
    assert_eq!(mode.lookup(b"PHPSESSID=abc", t0 + Duration::from_secs(9)), None);
    assert!(mode.table().is_empty());
}
