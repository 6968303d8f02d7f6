//! Durations as written in the config: `"250ms"`, `"10s"`, `"5m"`, `"1h"`, or sums of those
//! such as `"1m30s"`.
//!
//! Written by hand rather than taken from a crate (humantime and the like): the grammar is a
//! few lines, those crates accept forms we would then have to document and keep ("2 minutes",
//! "1y", fractions), and their errors do not tell us enough to suggest the fix (`write "10s"`).

use std::time::Duration;

/// Why a duration string was refused, and how to fix it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DurationError {
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
}

/// The units, smallest first, with their length in milliseconds.
const UNITS: &[(&str, u64)] = &[("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];

/// Spellings people reach for, and the unit they mean; used only for the hint.
const ALIASES: &[(&str, &str)] = &[
    ("msec", "ms"),
    ("millis", "ms"),
    ("sec", "s"),
    ("secs", "s"),
    ("second", "s"),
    ("seconds", "s"),
    ("min", "m"),
    ("mins", "m"),
    ("minute", "m"),
    ("minutes", "m"),
    ("hr", "h"),
    ("hour", "h"),
    ("hours", "h"),
];

const FORM: &str =
    "write a whole number followed by a unit (ms, s, m, h), e.g. \"250ms\", \"10s\", \"5m\", \"1h\"";

/// Parses one or more `<whole number><unit>` pairs.
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(error(format!("empty duration; {FORM}"), None));
    }
    let mut rest = text;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (digits, after) = rest.split_at(digits_end);
        if digits.is_empty() {
            return Err(error(format!("`{text}` is not a duration"), Some(FORM.into())));
        }
        let unit_end = after.find(|c: char| c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let per_unit = unit_millis(text, digits, unit)?;
        total = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(per_unit))
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| error(format!("duration `{text}` is too large"), None))?;
        rest = next;
    }
    Ok(Duration::from_millis(total))
}

/// Length of `unit` (which followed `digits` in `text`) in milliseconds.
fn unit_millis(text: &str, digits: &str, unit: &str) -> Result<u64, DurationError> {
    if let Some((_, ms)) = UNITS.iter().find(|(name, _)| *name == unit) {
        return Ok(*ms);
    }
    if unit.is_empty() {
        let hint = format!("write \"{text}s\" for seconds (units: ms, s, m, h)");
        return Err(error(format!("duration `{text}` has no unit"), Some(hint)));
    }
    if unit.starts_with('.') {
        let message = format!("duration `{text}` is not a whole number");
        let hint = "use a smaller unit, e.g. \"1500ms\" instead of \"1.5s\"".to_string();
        return Err(error(message, Some(hint)));
    }
    let trimmed = unit.trim();
    let meant = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(trimmed))
        .map(|(_, unit)| *unit)
        .or_else(|| UNITS.iter().map(|(u, _)| *u).find(|u| *u == trimmed));
    let hint = match meant {
        Some(unit) => format!("write \"{digits}{unit}\""),
        None => "units are ms, s, m and h".to_string(),
    };
    let message = format!("unknown unit `{unit}` in duration `{text}`");
    Err(error(message, Some(hint)))
}

fn error(message: String, hint: Option<String>) -> DurationError {
    DurationError { message, hint }
}

/// The shortest config spelling of `d` (whole milliseconds), e.g. `90s`, `5m`, `250ms`.
pub(crate) fn format(d: Duration) -> String {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return "0s".to_string();
    }
    let (name, size) = UNITS.iter().rev().find(|(_, size)| ms % size == 0).copied().unwrap_or(("ms", 1));
    format!("{}{name}", ms / size)
}

#[cfg(test)]
mod tests {
    use super::{format, parse};
    use std::time::Duration;

    #[test]
    fn accepts_each_unit_and_sums() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refusals_suggest_the_fix() {
        let hint = |t: &str| parse(t).err().and_then(|e| e.hint).unwrap_or_default();
        assert!(hint("10").contains("\"10s\""));
        assert!(hint("10sec").contains("\"10s\""));
        assert!(hint("2 minutes").contains("\"2m\""));
        assert!(hint("1.5s").contains("1500ms"));
        assert!(hint("10y").contains("ms, s, m and h"));
        assert!(hint("-5s").contains("whole number"));
        assert!(parse("").is_err());
        assert!(parse("99999999999999999999h").is_err());
    }

    #[test]
    fn format_picks_the_largest_exact_unit() {
        assert_eq!(format(Duration::from_secs(3600)), "1h");
        assert_eq!(format(Duration::from_secs(90)), "90s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(Duration::ZERO), "0s");
    }
}
