//! The balancing keys of a `[[group]]` (`hash_key`, the scheduler tunables, `persistence`)
//! and of a `[[listener]]` (`connection_persistence`, `preallocate`).

use crate::diag::Sink;
use crate::keys::{home_of, CAP_CLASS_KEYS, PERSISTENCE_KEYS};
use crate::walk::{Located, Table};
use crate::{
    suggest, CapClass, ConnectionPersistence, HashKey, InsertCookie, Params, PersistMode, Persistence,
};
use std::time::Duration;

const MODES: &[&str] = &["insert", "prefix", "learn", "rename", "source", "header", "url_param"];
const HASH_KEYS: &[&str] = &["url", "path", "host", "srcip", "header:Name", "cookie:Name", "arg:name"];
const CONNECTION_MODES: &[&str] = &["per_request", "close", "redirect"];
/// On a one-way listener the agent applies them, and `per_request` is not one of them.
const ONE_WAY_CONNECTION_MODES: &[&str] = &["pin", "close", "redirect", "migrate"];
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// `hash_key` (default `url`).
pub(crate) fn hash_key(t: &Table, sink: &mut Sink) -> HashKey {
    let Some(k) = t.string(sink, "hash_key") else {
        return HashKey::Url;
    };
    let named = |prefix: &str| k.value.strip_prefix(prefix).filter(|n| !n.is_empty()).map(str::to_string);
    match k.value {
        "url" => HashKey::Url,
        "path" => HashKey::Path,
        "host" => HashKey::Host,
        "srcip" => HashKey::SrcIp,
        _ => {
            if let Some(n) = named("header:") {
                return HashKey::Header(n);
            }
            if let Some(n) = named("cookie:") {
                return HashKey::Cookie(n);
            }
            if let Some(n) = named("arg:") {
                return HashKey::Arg(n);
            }
            let message = format!("unknown hash_key `{}`; valid: {}", k.value, HASH_KEYS.join(", "));
            let hint = suggest::hint(k.value, HASH_KEYS.iter().copied())
                .or_else(|| Some("write e.g. hash_key = \"url\" or \"header:X-User\"".into()));
            sink.error(&k.span, &k.key, message, hint);
            HashKey::Url
        }
    }
}

/// The scheduler tunables, each with its default from [`Params::default`].
pub(crate) fn params(t: &Table, sink: &mut Sink) -> Params {
    let d = Params::default();
    let int = |sink: &mut Sink, key, default: u32, range| {
        u32::try_from(t.int_or(sink, key, i64::from(default), range)).unwrap_or(default)
    };
    let factor = int(sink, "hash_balance_factor", d.hash_balance_factor, 0..=10_000);
    if (1..100).contains(&factor) {
        let span = t.value_span("hash_balance_factor");
        let message =
            format!("`hash_balance_factor` is a percentage of the mean load, at least 100; found {factor}");
        let hint = Some("write e.g. hash_balance_factor = 125 (0 turns bounded load off)".into());
        sink.error(&span, &t.key_path("hash_balance_factor"), message, hint);
    }
    let lard_low = int(sink, "lard_low", d.lard_low, 1..=1_000_000);
    let lard_high = int(sink, "lard_high", d.lard_high, 1..=1_000_000);
    if lard_high <= lard_low && t.has("lard_high") {
        let message = format!("`lard_high` ({lard_high}) must be above `lard_low` ({lard_low})");
        sink.error(&t.value_span("lard_high"), &t.key_path("lard_high"), message, None);
    }
    Params {
        virtual_nodes: int(sink, "virtual_nodes", d.virtual_nodes, 1..=10_000),
        hash_balance_factor: factor,
        lard_low,
        lard_high,
        cap_classes: cap_classes(t, sink).unwrap_or(d.cap_classes),
        sieve_extra_functions: int(sink, "sieve_extra_functions", d.sieve_extra_functions, 0..=16),
        sieve_canonical: false,
    }
}

fn cap_classes(t: &Table, sink: &mut Sink) -> Option<Vec<CapClass>> {
    if !t.has("cap_classes") {
        return None;
    }
    let shape = "write cap_classes = [ { name = \"static\", patterns = [\".gif\", \"/img/\"] }, … ]";
    let entries = t.entries(sink, "cap_classes", shape);
    let classes = entries
        .iter()
        .map(|c| {
            c.reject_unknown(sink, CAP_CLASS_KEYS, home_of);
            let name = c.required_string(sink, "name", "\"static\"").map(|n| n.value.to_string());
            let patterns = c.strings(sink, "patterns").unwrap_or_default();
            CapClass { name: name.unwrap_or_default(), patterns }
        })
        .collect::<Vec<_>>();
    (!classes.is_empty()).then_some(classes)
}

/// `persistence = { mode = "…", … }`.
pub(crate) fn persistence(t: &Table, sink: &mut Sink) -> Option<Persistence> {
    let p = t.section(sink, "persistence")?;
    p.reject_unknown(sink, PERSISTENCE_KEYS, home_of);
    let mode = p.required_string(sink, "mode", "\"insert\"")?;
    let table_size =
        usize::try_from(p.int_or(sink, "table_size", 100_000, 1..=100_000_000)).unwrap_or(100_000);
    let timeout = |sink: &mut Sink| p.duration_or(sink, "timeout", DEFAULT_TIMEOUT, false);
    let mode = match mode.value {
        "insert" => PersistMode::Insert(insert(&p, sink)?),
        "prefix" => PersistMode::Prefix { cookie: cookie_name(&p, sink, &mode, 1)? },
        "learn" => PersistMode::Learn { cookie: cookie_name(&p, sink, &mode, 1)?, timeout: timeout(sink) },
        // Seed 001 rewrites the first eight characters of the name.
        "rename" => PersistMode::Rename { cookie: cookie_name(&p, sink, &mode, 8)? },
        "source" => PersistMode::Source {
            timeout: timeout(sink),
            netmask_v4: u8::try_from(p.int_or(sink, "netmask", 32, 0..=32)).unwrap_or(32),
            netmask_v6: u8::try_from(p.int_or(sink, "netmask_v6", 128, 0..=128)).unwrap_or(128),
        },
        "header" => {
            PersistMode::Header { name: named(&p, sink, "header", "\"X-Session\"")?, timeout: timeout(sink) }
        }
        "url_param" => {
            PersistMode::UrlParam { name: named(&p, sink, "param", "\"sid\"")?, timeout: timeout(sink) }
        }
        other => {
            let message = format!("unknown persistence mode `{other}`; valid: {}", MODES.join(", "));
            let hint = suggest::hint(other, MODES.iter().copied());
            sink.error(&mode.span, &mode.key, message, hint);
            return None;
        }
    };
    Some(Persistence { mode, table_size })
}

fn insert(p: &Table, sink: &mut Sink) -> Option<InsertCookie> {
    let mode = Located { value: "insert", span: p.value_span("mode"), key: p.key_path("mode") };
    let optional =
        |sink: &mut Sink, key| p.has(key).then(|| p.duration_or(sink, key, Duration::from_secs(3600), false));
    Some(InsertCookie {
        cookie: cookie_name(p, sink, &mode, 1)?,
        indirect: p.bool_or(sink, "indirect", true),
        nocache: p.bool_or(sink, "nocache", true),
        httponly: p.bool_or(sink, "httponly", true),
        secure: p.bool_or(sink, "secure", false),
        domain: p.string(sink, "domain").map(|d| d.value.to_string()),
        max_idle: optional(sink, "max_idle"),
        max_life: optional(sink, "max_life"),
    })
}

/// The `cookie` name: required, made of RFC 6265 token characters, at least `min` long.
fn cookie_name(p: &Table, sink: &mut Sink, mode: &Located<&str>, min: usize) -> Option<String> {
    let example = if min >= 8 { "\"PHPSESSID\"" } else { "\"SERVERID\"" };
    let name = p.required_string(sink, "cookie", example)?;
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.value.chars().count() < min || !name.value.chars().all(token) {
        let message = if name.value.chars().count() < min {
            format!(
                "mode `{}` rewrites the first 8 characters of the cookie name; `{}` is shorter",
                mode.value, name.value
            )
        } else {
            format!("cookie name `{}` has characters a cookie name cannot have", name.value)
        };
        sink.error(&name.span, &name.key, message, Some(format!("write e.g. cookie = {example}")));
        return None;
    }
    Some(name.value.to_string())
}

fn named(p: &Table, sink: &mut Sink, key: &str, example: &str) -> Option<String> {
    let name = p.required_string(sink, key, example)?;
    if name.value.is_empty() {
        sink.error(
            &name.span,
            &name.key,
            format!("`{key}` is empty"),
            Some(format!("write {key} = {example}")),
        );
        return None;
    }
    Some(name.value.to_string())
}

/// A listener's `connection_persistence`: default `per_request` on a two-way listener,
/// `pin` on a one-way one (its agent relays later requests; issue 12 part 5).
pub(crate) fn connection_persistence(t: &Table, sink: &mut Sink, one_way: bool) -> ConnectionPersistence {
    let (default, valid) = match one_way {
        true => (ConnectionPersistence::Pin, ONE_WAY_CONNECTION_MODES),
        false => (ConnectionPersistence::PerRequest, CONNECTION_MODES),
    };
    let Some(m) = t.string(sink, "connection_persistence") else {
        return default;
    };
    let mode = match m.value {
        "per_request" => ConnectionPersistence::PerRequest,
        "close" => ConnectionPersistence::Close,
        "redirect" => ConnectionPersistence::Redirect,
        "pin" => ConnectionPersistence::Pin,
        "migrate" => ConnectionPersistence::Migrate,
        _ => default,
    };
    if valid.contains(&m.value) {
        return mode;
    }
    let (message, hint) = match (m.value, one_way) {
        ("per_request", true) => (
            "a one-way listener's later requests reach the server's agent, not the switch: it cannot route them one by one".to_string(),
            Some("write connection_persistence = \"migrate\" (the connection follows the rules), \"pin\", \"close\" or \"redirect\"".to_string()),
        ),
        ("pin" | "migrate", false) => (
            format!("`{}` applies to one-way listeners (a two-way listener routes every request)", m.value),
            Some("write connection_persistence = \"per_request\", or mode = \"one-way\"".to_string()),
        ),
        (other, _) => (
            format!("unknown connection_persistence `{other}`; valid: {}", valid.join(", ")),
            suggest::hint(other, valid.iter().copied()),
        ),
    };
    sink.error(&m.span, &m.key, message, hint);
    default
}
