//! The report datagram: one ASCII line, fields in a fixed order.
//!
//! ```text
//! cswitch-agent/1 server=127.0.0.1:8081 capacity=1048576 load=12 metric=timewait token=s3cret
//! ```
//!
//! `token` is optional and last. Parsing is strict (exact order, no unknown fields, no
//! control characters): a report carries a shared secret and sets a server's weight, so
//! anything unexpected is refused rather than guessed at. A later format gets a new
//! version number.

use std::net::SocketAddr;

use subtle::ConstantTimeEq;

/// First word of every report: the format's name and version.
pub const PREFIX: &str = "cswitch-agent/1";

/// Longest token an agent sends: long enough for any sensible secret, short enough that a
/// report stays far below [`MAX_DATAGRAM`]. (The switches' tokens are 16 to 128 characters.)
pub const MAX_TOKEN_LEN: usize = 128;

/// Longest datagram a receiver accepts. Reports are ~100 bytes; the limit keeps a
/// receiver's buffer small and a report well inside one unfragmented packet.
pub const MAX_DATAGRAM: usize = 512;

/// One capacity report, from an agent to a switch.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The address the switch knows the server by (its `addr` in the switch's config).
    pub server: SocketAddr,
    /// g(load): the weight the switch should give the server.
    pub capacity: u32,
    /// The measured load, for logs and metrics; finite.
    pub load: f64,
    /// The metric's name (`timewait`, `established`, `loadavg`, `cpu`, `file`).
    pub metric: String,
    /// The shared secret, when the switch requires one. Printable ASCII, no spaces.
    pub token: Option<String>,
}

/// Why a datagram is not a report.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// Longer than [`MAX_DATAGRAM`].
    #[error("datagram of {0} bytes is over the {max}-byte limit", max = MAX_DATAGRAM)]
    TooLong(usize),
    /// Not valid UTF-8.
    #[error("datagram is not UTF-8")]
    NotUtf8,
    /// A control or non-ASCII character (other than the final newline).
    #[error("datagram holds a control or non-ASCII character")]
    BadCharacter,
    /// Does not start with `cswitch-agent/`.
    #[error("not a cswitch-agent report")]
    BadPrefix,
    /// A `cswitch-agent/` version this build does not read.
    #[error("unsupported report version {0:?} (this build reads {PREFIX})")]
    BadVersion(String),
    /// A required field is absent, empty, or not where the order puts it.
    #[error("field {0} is missing or empty (order: server, capacity, load, metric, token)")]
    MissingField(&'static str),
    /// `capacity` or `load` is not a number (a finite one, for `load`).
    #[error("field {0} is not a valid number")]
    BadNumber(&'static str),
    /// `server` is not `IP:PORT`.
    #[error("field server is not an IP:PORT address")]
    BadAddress,
    /// Something after the last field.
    #[error("unexpected field {0:?}")]
    UnexpectedField(String),
}

impl Report {
    /// Appends the report as one line, newline included. The token and metric must be
    /// printable ASCII without spaces, or the line will not parse.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let line = format!(
            "{PREFIX} server={} capacity={} load={} metric={}",
            self.server, self.capacity, self.load, self.metric
        );
        out.extend_from_slice(line.as_bytes());
        if let Some(token) = &self.token {
            out.extend_from_slice(b" token=");
            out.extend_from_slice(token.as_bytes());
        }
        out.push(b'\n');
    }

    /// Reads one datagram. The final newline is optional.
    pub fn parse(datagram: &[u8]) -> Result<Report, WireError> {
        let line = checked_line(datagram)?;
        let mut fields = line.split(' ');
        check_prefix(fields.next().unwrap_or_default())?;
        let server = field(&mut fields, "server")?.parse().map_err(|_| WireError::BadAddress)?;
        let capacity = field(&mut fields, "capacity")?;
        let capacity = capacity.parse().map_err(|_| WireError::BadNumber("capacity"))?;
        let load = parse_load(field(&mut fields, "load")?)?;
        let metric = field(&mut fields, "metric")?.to_string();
        let token = match fields.next() {
            None => None,
            Some(f) => Some(token_value(f)?.to_string()),
        };
        if let Some(extra) = fields.next() {
            return Err(WireError::UnexpectedField(extra.to_string()));
        }
        Ok(Report { server, capacity, load, metric, token })
    }
}

/// The datagram as a line without its newline, once size and characters are checked.
fn checked_line(datagram: &[u8]) -> Result<&str, WireError> {
    if datagram.len() > MAX_DATAGRAM {
        return Err(WireError::TooLong(datagram.len()));
    }
    let text = std::str::from_utf8(datagram).map_err(|_| WireError::NotUtf8)?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    if !line.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(WireError::BadCharacter);
    }
    Ok(line)
}

fn check_prefix(word: &str) -> Result<(), WireError> {
    match word.strip_prefix("cswitch-agent/") {
        None => Err(WireError::BadPrefix),
        Some("1") => Ok(()),
        Some(version) => Err(WireError::BadVersion(version.to_string())),
    }
}

/// The value of the next field, which must be `name=VALUE` with a non-empty value.
fn field<'a>(fields: &mut impl Iterator<Item = &'a str>, name: &'static str) -> Result<&'a str, WireError> {
    value_of(fields.next().ok_or(WireError::MissingField(name))?, name)
}

fn value_of<'a>(field: &'a str, name: &'static str) -> Result<&'a str, WireError> {
    match field.split_once('=') {
        Some((key, value)) if key == name && !value.is_empty() => Ok(value),
        Some((key, _)) if key == name => Err(WireError::MissingField(name)),
        // A known field out of place is a missing one here; anything else is unexpected.
        Some((key, _)) if FIELDS.contains(&key) => Err(WireError::MissingField(name)),
        _ => Err(WireError::UnexpectedField(field.to_string())),
    }
}

/// The optional last field: `token=VALUE` or nothing else.
fn token_value(field: &str) -> Result<&str, WireError> {
    match field.strip_prefix("token=") {
        Some("") => Err(WireError::MissingField("token")),
        Some(token) => Ok(token),
        None => Err(WireError::UnexpectedField(field.to_string())),
    }
}

const FIELDS: [&str; 5] = ["server", "capacity", "load", "metric", "token"];

fn parse_load(text: &str) -> Result<f64, WireError> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(WireError::BadNumber("load")),
    }
}

/// Whether the `given` token equals the `expected` one. Call it only when a token is
/// configured: a report without one never matches. The comparison takes the same time
/// whatever the content (only the length can show), so a wrong token teaches an
/// attacker nothing about the right one.
pub fn token_matches(expected: &str, given: Option<&str>) -> bool {
    match given {
        None => false,
        // subtle compares slices of different lengths as unequal without reading them.
        Some(given) => expected.as_bytes().ct_eq(given.as_bytes()).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn sample() -> Report {
        Report {
            server: "127.0.0.1:8081".parse().unwrap(),
            capacity: 1_048_576,
            load: 12.0,
            metric: "timewait".into(),
            token: Some("s3cret".into()),
        }
    }

    fn encoded(r: &Report) -> String {
        let mut out = Vec::new();
        r.encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn encodes_the_documented_line() {
        let line =
            "cswitch-agent/1 server=127.0.0.1:8081 capacity=1048576 load=12 metric=timewait token=s3cret\n";
        assert_eq!(encoded(&sample()), line);
        let no_token = Report { token: None, ..sample() };
        assert_eq!(
            encoded(&no_token),
            "cswitch-agent/1 server=127.0.0.1:8081 capacity=1048576 load=12 metric=timewait\n"
        );
    }

    #[test]
    fn parses_with_and_without_newline_and_token() {
        let r = Report::parse(b"cswitch-agent/1 server=[::1]:80 capacity=7 load=0.25 metric=cpu").unwrap();
        assert_eq!(r.server, "[::1]:80".parse().unwrap());
        assert_eq!((r.capacity, r.load, r.metric.as_str(), r.token), (7, 0.25, "cpu", None));
        assert_eq!(Report::parse(encoded(&sample()).as_bytes()), Ok(sample()));
    }

    #[test]
    fn round_trips_edge_values() {
        let servers = ["10.0.0.5:80", "[2001:db8::1]:65535", "0.0.0.0:0", "[::ffff:1.2.3.4]:1"];
        let loads = [0.0, -3.5, 0.1, 12.0, 1234.5678, 1e9, 99.99999999999999];
        for (i, server) in servers.iter().enumerate() {
            for (j, &load) in loads.iter().enumerate() {
                for capacity in [0, 1, 1_048_576, u32::MAX] {
                    let token = (j % 2 == 0).then(|| format!("t{i}{j}~!#$%&'()*+,-./:;<=>?@[]^_`{{|}}"));
                    let r = Report {
                        server: server.parse().unwrap(),
                        capacity,
                        load,
                        metric: "established".into(),
                        token,
                    };
                    assert_eq!(Report::parse(encoded(&r).as_bytes()), Ok(r.clone()), "{r:?}");
                }
            }
        }
    }

    fn any_addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::from((Ipv4Addr::from(ip), p))),
            (any::<[u16; 8]>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::from((Ipv6Addr::from(ip), p))),
        ]
    }

    proptest! {
        #[test]
        fn round_trips(
            server in any_addr(),
            capacity in any::<u32>(),
            load in prop_oneof![-1e12f64..1e12, (0u32..100_000).prop_map(f64::from)],
            metric in "[a-z]{1,12}",
            token in proptest::option::of("[!-~]{1,64}"),
        ) {
            let r = Report { server, capacity, load, metric, token };
            let line = encoded(&r);
            prop_assert!(line.len() <= MAX_DATAGRAM);
            prop_assert_eq!(Report::parse(line.as_bytes()), Ok(r));
        }

        #[test]
        fn never_panics_on_junk(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = Report::parse(&bytes);
        }
    }

    fn err(text: &str) -> WireError {
        Report::parse(text.as_bytes()).unwrap_err()
    }

    const OK: &str = "cswitch-agent/1 server=10.0.0.5:80 capacity=5 load=1 metric=cpu";

    #[test]
    fn too_long() {
        let long = format!("{OK} token={}", "x".repeat(MAX_DATAGRAM));
        assert_eq!(err(&long), WireError::TooLong(long.len()));
        let just_fits = format!("{OK} token={}", "x".repeat(MAX_DATAGRAM - OK.len() - 7));
        assert_eq!(Report::parse(just_fits.as_bytes()).map(|r| r.capacity), Ok(5));
    }

    #[test]
    fn not_utf8() {
        assert_eq!(Report::parse(b"cswitch-agent/1 server=\xff\xfe"), Err(WireError::NotUtf8));
    }

    #[test]
    fn control_or_non_ascii_characters() {
        assert_eq!(err(&format!("{OK} token=a\tb")), WireError::BadCharacter);
        assert_eq!(err(&format!("{OK}\r\n")), WireError::BadCharacter);
        assert_eq!(err(&format!("{OK} token=pässword")), WireError::BadCharacter);
        assert_eq!(err(&format!("{OK}\n\n")), WireError::BadCharacter);
    }

    #[test]
    fn wrong_prefix_or_version() {
        assert_eq!(err(""), WireError::BadPrefix);
        assert_eq!(err("GET / HTTP/1.1"), WireError::BadPrefix);
        assert_eq!(err(&OK.replace("cswitch-agent/1", "cswitch/1")), WireError::BadPrefix);
        assert_eq!(err(&OK.replace("/1 ", "/2 ")), WireError::BadVersion("2".into()));
    }

    #[test]
    fn missing_fields() {
        assert_eq!(err("cswitch-agent/1"), WireError::MissingField("server"));
        assert_eq!(err("cswitch-agent/1 server=10.0.0.5:80"), WireError::MissingField("capacity"));
        assert_eq!(err(&OK.replace(" metric=cpu", "")), WireError::MissingField("metric"));
        assert_eq!(err(&OK.replace("metric=cpu", "metric=")), WireError::MissingField("metric"));
        assert_eq!(err(&format!("{OK} token=")), WireError::MissingField("token"));
        // Out of order: capacity where server belongs.
        let swapped = "cswitch-agent/1 capacity=5 server=10.0.0.5:80 load=1 metric=cpu";
        assert_eq!(err(swapped), WireError::MissingField("server"));
    }

    #[test]
    fn bad_numbers() {
        assert_eq!(err(&OK.replace("capacity=5", "capacity=-5")), WireError::BadNumber("capacity"));
        assert_eq!(err(&OK.replace("capacity=5", "capacity=4294967296")), WireError::BadNumber("capacity"));
        assert_eq!(err(&OK.replace("load=1", "load=many")), WireError::BadNumber("load"));
        assert_eq!(err(&OK.replace("load=1", "load=NaN")), WireError::BadNumber("load"));
        assert_eq!(err(&OK.replace("load=1", "load=inf")), WireError::BadNumber("load"));
    }

    #[test]
    fn bad_address() {
        assert_eq!(err(&OK.replace("10.0.0.5:80", "10.0.0.5")), WireError::BadAddress);
        assert_eq!(err(&OK.replace("10.0.0.5:80", "web1:80")), WireError::BadAddress);
        assert_eq!(err(&OK.replace("10.0.0.5:80", "::1:80")), WireError::BadAddress);
    }

    #[test]
    fn unexpected_fields() {
        assert_eq!(err(&format!("{OK} colour=red")), WireError::UnexpectedField("colour=red".into()));
        assert_eq!(err(&format!("{OK} load=2")), WireError::UnexpectedField("load=2".into()));
        assert_eq!(err(&format!("{OK} token=a b")), WireError::UnexpectedField("b".into()));
        assert_eq!(err(&format!("{OK}  token=a")), WireError::UnexpectedField("".into()));
        assert_eq!(err(&OK.replace(" server", "  server")), WireError::UnexpectedField("".into()));
    }

    #[test]
    fn error_messages_are_short_and_clear() {
        assert_eq!(WireError::TooLong(600).to_string(), "datagram of 600 bytes is over the 512-byte limit");
        assert_eq!(
            WireError::BadVersion("2".into()).to_string(),
            "unsupported report version \"2\" (this build reads cswitch-agent/1)"
        );
    }

    #[test]
    fn tokens() {
        assert!(token_matches("s3cret", Some("s3cret")));
        assert!(!token_matches("s3cret", Some("s3creT")));
        assert!(!token_matches("s3cret", Some("s3cre")));
        assert!(!token_matches("s3cret", Some("s3crets")));
        assert!(!token_matches("s3cret", Some("")));
        assert!(!token_matches("s3cret", None));
    }
}
