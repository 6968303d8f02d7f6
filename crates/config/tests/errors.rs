//! Every refusal, with the exact line:col it points at, its key path and its hint.
#![allow(clippy::unwrap_used)] // in tests a panic is the failure report

use cswitch_config::{load, parse, Diagnostic, Diagnostics};
use std::path::Path;

/// A valid listener and group (8 lines); tests put the text under test before it, so that
/// text starts on line 1.
const BASE: &str = r#"[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "web"

[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]
"#;

fn errors(text: &str) -> Vec<Diagnostic> {
    match parse(text, Path::new("/etc/cswitch/cswitch.toml")) {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(Diagnostics(diags)) => diags,
    }
}

/// The only diagnostic for `text`.
fn one(text: &str) -> Diagnostic {
    let mut diags = errors(text);
    assert_eq!(diags.len(), 1, "{}", Diagnostics(diags.clone()));
    diags.remove(0)
}

/// The only diagnostic for `snippet` followed by the valid base.
fn before_base(snippet: &str) -> Diagnostic {
    one(&format!("{snippet}\n{BASE}"))
}

#[track_caller]
fn assert_at(d: &Diagnostic, line: usize, col: usize, key: &str) {
    assert_eq!((d.line, d.col, d.key.as_str()), (line, col, key), "{d:?}");
}

fn hint(d: &Diagnostic) -> &str {
    d.hint.as_deref().unwrap_or("")
}

#[test]
fn syntax_error_points_at_the_fault() {
    let d = before_base("[global\nworkers = 1");
    assert_at(&d, 1, 8, "");
    assert!(d.message.starts_with("TOML syntax:"), "{}", d.message);
    assert_eq!(d.source_line, "[global");
}

/// An array left open is noticed by the parser only at the next section or the end of the
/// file; the error points at its opening bracket instead.
#[test]
fn unclosed_array_points_at_its_opening_bracket() {
    let open = BASE.replace(
        "servers = [{ name = \"s1\", addr = \"127.0.0.1:9001\" }]",
        "servers = [{ name = \"s1\", addr = \"127.0.0.1:9001\" },",
    );
    for text in [open.clone(), format!("{open}\n[global]\nworkers = 1\n")] {
        let d = one(&text);
        assert_at(&d, 8, 11, "");
        assert_eq!(d.message, "TOML syntax: this `[` is never closed");
        assert_eq!(d.source_line, "servers = [{ name = \"s1\", addr = \"127.0.0.1:9001\" },");
        assert!(hint(&d).starts_with("close it with `]`"), "{}", hint(&d));
    }
    let d = before_base("[limits]\nx = { a = 1\n");
    assert_at(&d, 2, 5, "");
    assert!(hint(&d).starts_with("close it with `}`"), "{}", hint(&d));
}

#[test]
fn unknown_top_level_section_suggests_the_right_one() {
    let d = before_base("[globl]\nworkers = 1");
    assert_at(&d, 1, 2, "globl");
    assert_eq!(d.message, "unknown section `globl`");
    assert_eq!(hint(&d), "did you mean `global`?");
}

#[test]
fn unknown_key_in_a_section_suggests_the_right_one() {
    let d = before_base("[limits]\nmax_header = 10");
    assert_at(&d, 2, 1, "limits.max_header");
    assert_eq!(d.message, "unknown key `max_header` in `limits`");
    assert_eq!(hint(&d), "did you mean `max_headers`?");
}

#[test]
fn unknown_key_of_another_section_says_where_it_belongs() {
    let d = before_base("[global]\nretries = 3");
    assert_at(&d, 2, 1, "global.retries");
    assert_eq!(hint(&d), "`retries` belongs in [limits]");
}

#[test]
fn unknown_key_in_a_server_points_into_the_inline_table() {
    let text = BASE.replace("addr = \"127.0.0.1:9001\"", "addr = \"127.0.0.1:9001\", weigth = 2");
    let d = one(&text);
    assert_at(&d, 8, 52, "group[0].servers[0].weigth");
    assert_eq!(hint(&d), "did you mean `weight`?");
}

#[test]
fn unknown_key_in_a_group_table() {
    let text = BASE.replace("name = \"web\"\nservers", "name = \"web\"\nschedular = \"rr\"\nservers");
    let d = one(&text);
    assert_at(&d, 8, 1, "group[0].schedular");
    assert_eq!(hint(&d), "did you mean `scheduler`?");
}

#[test]
fn quoted_integer_is_a_wrong_type_with_the_fix() {
    let text = BASE.replace("addr = \"127.0.0.1:9001\"", "addr = \"127.0.0.1:9001\", weight = \"2\"");
    let d = one(&text);
    assert_at(&d, 8, 61, "group[0].servers[0].weight");
    assert_eq!(d.message, "`weight` must be an integer, found a string");
    assert_eq!(hint(&d), "remove the quotes: `weight = 2`");
}

#[test]
fn wrong_types_for_booleans_strings_and_sections() {
    let d = one(&BASE.replace("default_group", "x_forwarded_for = \"true\"\ndefault_group"));
    assert_at(&d, 4, 19, "listener[0].x_forwarded_for");
    assert_eq!(hint(&d), "remove the quotes: `x_forwarded_for = true`");
    let d = one(&BASE.replace("name = \"web\"\nbind", "name = 7\nbind"));
    assert_at(&d, 2, 8, "listener[0].name");
    assert_eq!(hint(&d), "add quotes: `name = \"7\"`");
    let d = before_base("limits = 5");
    assert_at(&d, 1, 10, "limits");
    assert_eq!(d.message, "`limits` must be a table, found an integer");
}

#[test]
fn server_protocol_is_http11_or_h2() {
    let d = one(&BASE.replace("servers =", "server_protocol = \"h2c\"\nservers ="));
    assert_at(&d, 8, 19, "group[0].server_protocol");
    assert_eq!(d.message, "unknown server_protocol `h2c`; valid: http/1.1, h2");
    assert_eq!(hint(&d), "did you mean `h2`?");
    let d = one(&BASE.replace("servers =", "server_protocol = \"grpc\"\nservers ="));
    assert_eq!(
        hint(&d),
        "write `server_protocol = \"h2\"` (HTTP/2 to the servers) or leave it out (HTTP/1.1)"
    );
    let d = one(&BASE.replace("servers =", "server_protocol = 2\nservers ="));
    assert_at(&d, 8, 19, "group[0].server_protocol");
    let ok = parse(&BASE.replace("servers =", "server_protocol = \"h2\"\nservers ="), Path::new("c.toml"))
        .unwrap();
    assert_eq!(ok.groups[0].server_protocol, cswitch_config::ServerProtocol::H2);
}

#[test]
fn unknown_scheduler_lists_the_valid_names() {
    let d = one(&BASE.replace("servers =", "scheduler = \"wcl\"\nservers ="));
    assert_at(&d, 8, 13, "group[0].scheduler");
    let valid = balance::SchedulerKind::NAMES.join(", ");
    assert_eq!(d.message, format!("unknown scheduler `wcl`; valid: {valid}"));
    assert!(valid.contains("consistent") && valid.contains("sieve"), "{valid}");
    assert_eq!(hint(&d), "did you mean `wlc`?");
    let d = one(&BASE.replace("servers =", "scheduler = \"round-robin\"\nservers ="));
    assert_eq!(d.hint, None);
}

#[test]
fn unknown_protocols_are_refused_and_http_keys_stay_on_http_listeners() {
    let d = one(&BASE.replace("default_group", "protocol = \"ftp\"\ndefault_group"));
    assert_at(&d, 4, 12, "listener[0].protocol");
    assert_eq!(d.message, "protocol `ftp` is not supported; supported: http, tls, smtp, pop3, imap");
    let d = one(&BASE.replace("default_group", "protocol = \"tsl\"\ndefault_group"));
    assert_eq!(d.hint.as_deref(), Some("did you mean `tls`?"));
    let d = one(&BASE.replace("default_group", "protocol = \"tls\"\nx_forwarded_for = true\ndefault_group"));
    assert_at(&d, 5, 19, "listener[0].x_forwarded_for");
    assert_eq!(d.message, "`x_forwarded_for` applies only to protocol = \"http\", not \"tls\"");
    let d = one(&BASE
        .replace("default_group", "protocol = \"tls\"\ntls = { cert = \"a\", key = \"b\" }\ndefault_group"));
    assert!(d.message.contains("passes TLS through"), "{}", d.message);
}

#[test]
fn hostnames_are_refused_with_the_ip_form_suggested() {
    let d = one(&BASE.replace("127.0.0.1:8080", "localhost:8080"));
    assert_at(&d, 3, 8, "listener[0].bind");
    assert!(d.message.contains("hostnames are not supported"), "{}", d.message);
    assert_eq!(hint(&d), "write \"127.0.0.1:8080\"");
}

#[test]
fn server_address_needs_a_port_other_than_0() {
    let d = one(&BASE.replace("127.0.0.1:9001", "127.0.0.1"));
    assert_at(&d, 8, 34, "group[0].servers[0].addr");
    assert_eq!(d.message, "`127.0.0.1` has no port");
    let d = one(&BASE.replace("127.0.0.1:9001", "127.0.0.1:0"));
    assert_at(&d, 8, 34, "group[0].servers[0].addr");
}

#[test]
fn missing_required_keys_point_at_the_table() {
    let text = "[[listener]]\nname = \"web\"\n\n[[group]]\nname = \"web\"\n";
    let diags = errors(text);
    let got: Vec<(usize, usize, &str)> = diags.iter().map(|d| (d.line, d.col, d.key.as_str())).collect();
    let want = [(1, 1, "listener[0].bind"), (1, 1, "listener[0].default_group"), (4, 1, "group[0].servers")];
    assert_eq!(got, want, "{}", Diagnostics(diags.clone()));
    assert_eq!(hint(&diags[0]), "add bind = \"127.0.0.1:8080\"");
}

#[test]
fn duplicate_names_point_at_the_repeat() {
    let second = "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8081\"\ndefault_group = \"web\"\n";
    let d = one(&format!("{BASE}{second}"));
    assert_at(&d, 10, 8, "listener[1].name");
    assert_eq!(d.message, "duplicate listener name `web`");
    assert_eq!(hint(&d), "`web` is already used on line 2; names must be unique");

    let group = "[[group]]\nname = \"web\"\nservers = [{ name = \"s1\", addr = \"127.0.0.1:9002\" }]\n";
    let d = one(&format!("{BASE}{group}"));
    assert_at(&d, 10, 8, "group[1].name");
    assert_eq!(d.message, "duplicate group name `web`");

    let servers = r#"{ name = "s1", addr = "127.0.0.1:9001" }, { name = "s1", addr = "127.0.0.1:9002" }"#;
    let d = one(&BASE.replace(r#"{ name = "s1", addr = "127.0.0.1:9001" }"#, servers));
    assert_at(&d, 8, 63, "group[0].servers[1].name");
    assert_eq!(d.message, "duplicate server name `s1` in group `web`");
}

#[test]
fn duplicate_and_overlapping_binds() {
    let second = "[[listener]]\nname = \"api\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\n";
    let d = one(&format!("{BASE}{second}"));
    assert_at(&d, 11, 8, "listener[1].bind");
    assert_eq!(d.message, "duplicate bind address 127.0.0.1:8080");
    assert_eq!(hint(&d), "127.0.0.1:8080 is already bound on line 3; use another port");

    let d = one(&format!("{BASE}{}", second.replace("127.0.0.1", "0.0.0.0")));
    assert_eq!(d.message, "bind address 0.0.0.0:8080 overlaps 127.0.0.1:8080");

    // Port 0 means "any free port": two such listeners do not collide.
    let zero = BASE.replace("8080", "0");
    let text = format!("{zero}{}", second.replace("8080", "0"));
    assert!(parse(&text, Path::new("c.toml")).is_ok());
}

#[test]
fn default_group_must_name_a_group() {
    let d = one(&BASE.replace("default_group = \"web\"", "default_group = \"wbe\""));
    assert_at(&d, 4, 17, "listener[0].default_group");
    assert_eq!(d.message, "default_group `wbe` names no [[group]]");
    assert_eq!(hint(&d), "did you mean `web`?");
    let d = one(&BASE.replace("default_group = \"web\"", "default_group = \"images\""));
    assert_eq!(hint(&d), "groups defined: web");
}

#[test]
fn group_needs_servers() {
    let d = one(&BASE.replace(r#"[{ name = "s1", addr = "127.0.0.1:9001" }]"#, "[]"));
    assert_at(&d, 8, 11, "group[0].servers");
    assert_eq!(d.message, "group `web` has no servers; a group needs at least one");
}

#[test]
fn config_needs_a_listener_and_a_group() {
    let only_group = &BASE[BASE.find("[[group]]").unwrap()..];
    let d = one(only_group);
    assert_at(&d, 1, 1, "listener");
    assert_eq!(d.message, "no [[listener]]: at least one is needed");
    // Without groups the listener's default_group dangles too; both are reported.
    let only_listener = &BASE[..BASE.find("[[group]]").unwrap()];
    let diags = errors(only_listener);
    assert_eq!(diags.len(), 2);
    assert_at(&diags[0], 1, 1, "group");
    assert_eq!(diags[0].message, "no [[group]]: at least one is needed");
    assert_at(&diags[1], 4, 17, "listener[0].default_group");
    assert_eq!(hint(&diags[1]), "add a [[group]] named `web`");
    let d = one(&format!("listener = []\n{}", only_group));
    assert_at(&d, 1, 12, "listener");
}

#[test]
fn numeric_limits_are_range_checked() {
    let cases = [
        (
            "[limits]\nmax_head_bytes = 512",
            "limits.max_head_bytes",
            18,
            "between 1024 and 1048576, found 512",
        ),
        ("[limits]\nmax_head_bytes = 2097152", "limits.max_head_bytes", 18, "found 2097152"),
        ("[limits]\nbuffer_bytes = 100", "limits.buffer_bytes", 16, "between 1024 and 16777216"),
        ("[limits]\nmax_headers = 0", "limits.max_headers", 15, "between 1 and 1000, found 0"),
        ("[limits]\nmax_headers = 1001", "limits.max_headers", 15, "found 1001"),
        ("[limits]\nmax_body_bytes = -1", "limits.max_body_bytes", 18, "at least 0, found -1"),
        ("[global]\nworkers = 300", "global.workers", 11, "between 0 and 256, found 300"),
    ];
    for (snippet, key, col, message) in cases {
        let d = before_base(snippet);
        assert_at(&d, 2, col, key);
        assert!(d.message.contains(message), "{snippet}: {}", d.message);
        assert!(hint(&d).starts_with("the default is"), "{snippet}");
    }
}

#[test]
fn access_log_format_is_text_or_json() {
    let d = before_base("[access_log]\nformat = \"jsno\"");
    assert_at(&d, 2, 10, "access_log.format");
    assert_eq!(d.message, "unknown access-log format `jsno`; valid: text, json");
    assert_eq!(hint(&d), "did you mean `json`?");
}

#[test]
fn durations_need_a_unit() {
    let d = before_base("[timeouts]\nclient_head = 10");
    assert_at(&d, 2, 15, "timeouts.client_head");
    assert_eq!(d.message, "`client_head` must be a duration string such as \"10s\", found an integer");
    assert!(hint(&d).contains("write `client_head = \"10s\"`"), "{}", hint(&d));
    let d = before_base("[timeouts]\nqueue = \"10\"");
    assert_at(&d, 2, 9, "timeouts.queue");
    assert!(hint(&d).contains("write \"10s\""), "{}", hint(&d));
    let d = before_base("[timeouts]\nqueue = \"0s\"");
    assert_eq!(d.message, "`queue` must be longer than 0");
    let d = before_base("[global]\ngrace_period = \"5 sec\"");
    assert_at(&d, 2, 16, "global.grace_period");
    assert_eq!(hint(&d), "write \"5s\"");
}

#[test]
fn empty_rules_path_is_refused() {
    let d = one(&BASE.replace("default_group", "rules = \"\"\ndefault_group"));
    assert_at(&d, 4, 9, "listener[0].rules");
}

#[test]
fn listener_written_as_a_single_table() {
    let text = BASE.replace("[[listener]]", "[listener]");
    let d = one(&text);
    assert_at(&d, 1, 1, "listener");
    assert!(hint(&d).contains("[[listener]]"));
}

#[test]
fn every_problem_in_a_file_is_reported_in_file_order() {
    let text = r#"[global]
workers = 999
[limits]
max_head_bytes = "16k"
[[listener]]
name = "web"
bind = "example.com:80"
default_group = "nope"
[[group]]
name = "web"
scheduler = "fastest"
servers = [
  { name = "a", addr = "127.0.0.1:9001" },
  { name = "a", addr = "127.0.0.1:9002", weigth = 3 },
]
"#;
    let diags = errors(text);
    let got: Vec<(usize, usize, &str)> = diags.iter().map(|d| (d.line, d.col, d.key.as_str())).collect();
    let want = [
        (2, 11, "global.workers"),
        (4, 18, "limits.max_head_bytes"),
        (7, 8, "listener[0].bind"),
        (8, 17, "listener[0].default_group"),
        (11, 13, "group[0].scheduler"),
        (14, 12, "group[0].servers[1].name"),
        (14, 42, "group[0].servers[1].weigth"),
    ];
    assert_eq!(got, want, "{}", Diagnostics(diags.clone()));
}

#[test]
fn display_prints_location_source_caret_and_hint() {
    let text = "[global]\n\tworkers = 999\n[limits]\nretries = \"2\"\n";
    let shown = parse(&format!("{text}{BASE}"), Path::new("conf/cswitch.toml")).unwrap_err().to_string();
    let want = "\
conf/cswitch.toml:2:12: error: `workers` must be between 0 and 256, found 999
  \tworkers = 999
  \t          ^
  hint: the default is 0
conf/cswitch.toml:4:11: error: `retries` must be an integer, found a string
  retries = \"2\"
            ^
  hint: remove the quotes: `retries = 2`
2 errors";
    assert_eq!(shown, want);
}

#[test]
fn display_of_a_single_error_without_hint() {
    let shown = parse("[[listener]]\nname = 'web'\nbind = '1.2.3.4:80'\ndefault_group = 'g'\n[[group]]\nname = 'g'\nscheduler = 'fifo'\nservers = [{ name = 's', addr = '1.2.3.4:81' }]", Path::new("c.toml"))
        .unwrap_err()
        .to_string();
    let valid = balance::SchedulerKind::NAMES.join(", ");
    let want = format!(
        "c.toml:7:13: error: unknown scheduler `fifo`; valid: {valid}\n  scheduler = 'fifo'\n              ^\n1 error"
    );
    assert_eq!(shown, want);
}

#[test]
fn unreadable_file_has_no_position() {
    let err = load(Path::new("/nonexistent/cswitch.toml")).unwrap_err();
    assert_eq!((err.0[0].line, err.0[0].col), (0, 0));
    assert!(err.to_string().starts_with("/nonexistent/cswitch.toml: error: cannot read config file"));
}

#[test]
fn balancing_keys_are_checked_with_positions_and_hints() {
    let base =
        "[[listener]]\nname = 'web'\nbind = '1.2.3.4:80'\ndefault_group = 'g'\n[[group]]\nname = 'g'\n";
    let servers = "servers = [{ name = 's', addr = '1.2.3.4:81' }]";
    let err = |group_keys: &str| {
        let text = format!("{base}{group_keys}\n{servers}");
        parse(&text, Path::new("c.toml")).unwrap_err().0
    };
    let d = &err("hash_key = 'urll'")[0];
    assert_eq!((d.line, d.col), (7, 12));
    assert!(d.message.starts_with("unknown hash_key `urll`"), "{}", d.message);
    assert_eq!(d.hint.as_deref(), Some("did you mean `url`?"));
    let d = &err("hash_balance_factor = 50")[0];
    assert!(d.message.contains("at least 100"), "{}", d.message);
    let d = &err("persistence = { mode = 'rename', cookie = 'SID' }")[0];
    assert!(d.message.contains("first 8 characters"), "{}", d.message);
    let d = &err("persistence = { mode = 'insrt', cookie = 'SRV' }")[0];
    assert_eq!(d.hint.as_deref(), Some("did you mean `insert`?"));
    let d = &err("persistence = { mode = 'source', netmsk = 24 }")[0];
    assert!(d.message.contains("netmsk"), "{}", d.message);
    let d = &err("lard_low = 50\nlard_high = 40")[0];
    assert!(d.message.contains("must be above"), "{}", d.message);
}

#[test]
fn balancing_keys_parse() {
    let text = "[[listener]]\nname = 'web'\nbind = '1.2.3.4:80'\ndefault_group = 'g'\nconnection_persistence = 'redirect'\n\
                [[group]]\nname = 'g'\nscheduler = 'consistent'\nhash_key = 'header:X-User'\nhash_balance_factor = 125\n\
                persistence = { mode = 'insert', cookie = 'SRV', secure = true, max_idle = '20m' }\n\
                servers = [{ name = 's', addr = '1.2.3.4:81', cookie = 'a1' }]";
    let c = parse(text, Path::new("c.toml")).unwrap();
    let g = &c.groups[0];
    assert_eq!(g.hash_key, cswitch_config::HashKey::Header("X-User".into()));
    assert_eq!(g.params.hash_balance_factor, 125);
    assert_eq!(g.servers[0].cookie, "a1");
    assert_eq!(c.listeners[0].connection_persistence, cswitch_config::ConnectionPersistence::Redirect);
    match &g.persistence.as_ref().unwrap().mode {
        cswitch_config::PersistMode::Insert(i) => {
            assert!(i.secure && i.indirect && i.httponly);
            assert_eq!(i.max_idle, Some(std::time::Duration::from_secs(1200)));
        }
        other => panic!("{other:?}"),
    }
}

/// One-way switching's keys: a listener's `mode`, `[oneway]`, a server's `agent` and `mac`.
const ONEWAY: &str = "[oneway]\ninterface = 'eth0'\ntoken = '0123456789abcdef0123'\nhandoff_timeout = '80ms'\n\
                      [[listener]]\nname = 'web'\nbind = '10.0.0.100:80'\ndefault_group = 'g'\nmode = 'one-way'\n\
                      [[group]]\nname = 'g'\n\
                      servers = [{ name = 'b1', addr = '10.0.0.11:8080', agent = '10.0.0.11:9000', mac = '02:00:00:00:00:11' },\n\
                      { name = 'b2', addr = '10.0.0.12:8080' }]\n";

#[test]
fn oneway_keys_parse() {
    let c = parse(ONEWAY, Path::new("c.toml")).unwrap();
    assert_eq!(c.listeners[0].mode, cswitch_config::Mode::OneWay);
    let o = c.oneway.as_ref().unwrap();
    assert_eq!((o.interface.as_str(), o.table.as_str()), ("eth0", "cswitch"));
    assert_eq!(o.handoff_timeout, std::time::Duration::from_millis(80));
    assert_eq!(o.flow_timeout, std::time::Duration::from_secs(600));
    let h = c.groups[0].servers[0].handoff.unwrap();
    assert_eq!((h.agent.to_string().as_str(), h.mac), ("10.0.0.11:9000", [2, 0, 0, 0, 0, 0x11]));
    assert_eq!(c.groups[0].servers[1].handoff, None, "a server without an agent is served two-way");
    use cswitch_config::ConnectionPersistence as P;
    assert_eq!(c.listeners[0].connection_persistence, P::Pin, "a one-way listener pins by default");
    for (written, want) in
        [("close", P::Close), ("redirect", P::Redirect), ("pin", P::Pin), ("migrate", P::Migrate)]
    {
        let text = ONEWAY
            .replace("mode = 'one-way'", &format!("mode = 'one-way'\nconnection_persistence = '{written}'"));
        assert_eq!(parse(&text, Path::new("c.toml")).unwrap().listeners[0].connection_persistence, want);
    }
}

#[test]
fn connection_persistence_follows_the_listeners_mode() {
    // per_request needs the switch to see every request.
    let d =
        one(&ONEWAY.replace("mode = 'one-way'", "mode = 'one-way'\nconnection_persistence = 'per_request'"));
    assert_at(&d, 10, 26, "listener[0].connection_persistence");
    assert!(
        d.message.starts_with("a one-way listener's later requests reach the server's agent"),
        "{}",
        d.message
    );
    assert_eq!(
        hint(&d),
        "write connection_persistence = \"migrate\" (the connection follows the rules), \"pin\", \"close\" or \"redirect\""
    );
    // pin is one-way's.
    let d = one(&ONEWAY.replace("mode = 'one-way'", "connection_persistence = 'pin'"));
    assert_eq!(d.message, "`pin` applies to one-way listeners (a two-way listener routes every request)");
    // A typo: suggested from the listener's own modes.
    let d = one(&ONEWAY.replace("mode = 'one-way'", "mode = 'one-way'\nconnection_persistence = 'pinn'"));
    assert_eq!(d.message, "unknown connection_persistence `pinn`; valid: pin, close, redirect, migrate");
    assert_eq!(hint(&d), "did you mean `pin`?");
}

#[test]
fn oneway_mistakes_are_named_where_they_are() {
    // No [oneway] section.
    let d = one(&ONEWAY.replace(
        "[oneway]\ninterface = 'eth0'\ntoken = '0123456789abcdef0123'\nhandoff_timeout = '80ms'\n",
        "",
    ));
    assert_at(&d, 5, 8, "listener[0].mode");
    assert_eq!(d.message, "mode = \"one-way\" needs a [oneway] section");
    // A typo in the mode.
    let d = one(&ONEWAY.replace("'one-way'", "'oneway'"));
    assert_eq!((d.message.as_str(), hint(&d)), ("unknown mode `oneway`", "did you mean `one-way`?"));
    // No token: anyone reaching an agent could inject a connection.
    let d = one(&ONEWAY.replace("token = '0123456789abcdef0123'\n", ""));
    assert!(d.message.starts_with("one-way hand-offs need a token"), "{}", d.message);
    // agent without mac, and a bad mac.
    let d = one(&ONEWAY.replace(", mac = '02:00:00:00:00:11'", ""));
    assert_eq!(
        (d.message.as_str(), d.key.as_str()),
        ("`agent` and `mac` go together", "group[0].servers[0].agent")
    );
    let d = one(&ONEWAY.replace("02:00:00:00:00:11", "02:00:00:00:11"));
    assert_eq!(d.message, "`02:00:00:00:11` is not a MAC address");
    // No server with an agent in the default group.
    let d = one(&ONEWAY.replace(", agent = '10.0.0.11:9000', mac = '02:00:00:00:00:11'", ""));
    assert_eq!(d.message, "no server of group `g` has an agent to hand connections to");
    // One-way on a mail listener.
    let d = one(&ONEWAY.replace("mode = 'one-way'", "protocol = 'smtp'\nmode = 'one-way'"));
    assert_eq!(d.message, "mode = \"one-way\" is built for protocol = \"http\" and \"tls\", not \"smtp\"");
    assert_at(&d, 10, 8, "listener[0].mode");
    // One-way on a listener that terminates TLS: refused at `mode`, whatever else is wrong
    // with its certificates (the files do not exist here).
    let diags = errors(
        &ONEWAY.replace("mode = 'one-way'\n", "mode = 'one-way'\ntls = { cert = 'a.pem', key = 'a.key' }\n"),
    );
    let d = diags.iter().find(|d| d.key == "listener[0].mode").expect("the one-way refusal");
    assert_at(d, 9, 8, "listener[0].mode");
    assert_eq!(d.message, "a listener that terminates TLS stays two-way (the TLS session cannot move)");
    assert_eq!(hint(d), "remove `mode`, or `tls`; protocol = \"tls\" (passthrough) can be one-way");
}

/// TLS passthrough (`protocol = "tls"`) may be one-way: the switch routes on the
/// ClientHello and hands the connection off; the server's TLS session never touched it.
#[test]
fn oneway_tls_passthrough_is_accepted() {
    let text = ONEWAY.replace("mode = 'one-way'", "protocol = 'tls'\nmode = 'one-way'");
    let c = parse(&text, Path::new("c.toml")).unwrap();
    assert_eq!(c.listeners[0].protocol, cswitch_config::Protocol::Tls);
    assert_eq!(c.listeners[0].mode, cswitch_config::Mode::OneWay);
    // The checks that hold for HTTP hold for it too: no agent in the default group.
    let d = one(&text.replace(", agent = '10.0.0.11:9000', mac = '02:00:00:00:00:11'", ""));
    assert_eq!(d.message, "no server of group `g` has an agent to hand connections to");
}

/// The diagnostic at `key` among all of `text`'s (a TLS listener's missing certificate
/// files are reported too).
fn at_key(text: &str, key: &str) -> Diagnostic {
    let diags = errors(text);
    diags.iter().find(|d| d.key == key).cloned().unwrap_or_else(|| panic!("no error at {key}: {diags:?}"))
}

#[test]
fn http2_keys_name_what_they_apply_to() {
    let d = one(&BASE.replace("default_group", "alpn = [\"h2\"]\ndefault_group"));
    assert_at(&d, 4, 8, "listener[0].alpn");
    assert!(d.message.contains("applies only to a listener with `tls`"), "{}", d.message);
    assert!(hint(&d).contains("h2c"), "{}", hint(&d));
    let tls = "tls = { cert = \"a.pem\", key = \"a.key\" }\n";
    let d =
        at_key(&BASE.replace("default_group", &format!("{tls}h2c = true\ndefault_group")), "listener[0].h2c");
    assert_eq!((d.line, d.col), (5, 7));
    assert!(hint(&d).contains("alpn = [\"http/1.1\"]"), "{}", hint(&d));
    let d = one(&BASE.replace("default_group", "protocol = \"smtp\"\nh2c = false\ndefault_group"));
    assert_eq!(d.message, "`h2c` applies only to protocol = \"http\", not \"smtp\"");
    let d = one(&BASE.replace("default_group", "h2c = \"yes\"\ndefault_group"));
    assert_at(&d, 4, 7, "listener[0].h2c");
}

#[test]
fn alpn_names_are_checked() {
    let tls = "tls = { cert = \"a.pem\", key = \"a.key\" }\n";
    let with = |alpn: &str| BASE.replace("default_group", &format!("{tls}alpn = {alpn}\ndefault_group"));
    let d = at_key(&with("[\"h2\", \"http/1\"]"), "listener[0].alpn");
    assert_eq!((d.line, d.col), (5, 8));
    assert_eq!(d.message, "ALPN protocol `http/1` is not supported; supported: h2, http/1.1");
    assert_eq!(hint(&d), "did you mean `http/1.1`?");
    let d = at_key(&with("[\"h2\", \"h2\"]"), "listener[0].alpn");
    assert_eq!(d.message, "ALPN protocol `h2` is named twice");
    let d = at_key(&with("[]"), "listener[0].alpn");
    assert_eq!(d.message, "`alpn` must name at least one protocol");
    let d = at_key(&with("\"h2\""), "listener[0].alpn");
    assert!(d.message.contains("must be an array of strings"), "{}", d.message);
}
