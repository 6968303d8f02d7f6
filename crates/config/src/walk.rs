//! Reading one TOML table by hand. Each getter reports a wrong type or an out-of-range value
//! at the value's span and gives back the default, so reading goes on and every problem in
//! the file is found in one pass.

use crate::diag::{Sink, Span};
use crate::{duration, suggest};
use std::ops::RangeInclusive;
use std::time::Duration;
use toml_edit::{Item, TableLike, Value};

/// A value and where it was written, kept for checks across entries (duplicates, references).
#[derive(Clone, Debug)]
pub(crate) struct Located<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
    /// Dotted key path, e.g. `listener[0].bind`.
    pub(crate) key: String,
}

/// One table of the document (a `[section]`, an `[[array]]` entry or an inline `{ … }`),
/// with its dotted path for diagnostics.
pub(crate) struct Table<'d> {
    path: String,
    table: &'d dyn TableLike,
    span: Span,
}

impl<'d> Table<'d> {
    /// The document's root table.
    pub(crate) fn root(table: &'d dyn TableLike) -> Self {
        Table { path: String::new(), table, span: Some(0..0) }
    }

    /// `path.key`, or `key` at the root.
    pub(crate) fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn get(&self, key: &str) -> Option<&'d Item> {
        let table: &'d dyn TableLike = self.table;
        table.get(key)
    }

    /// True when `key` is written in this table.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// True when `key` is an array (of tables or values) with no entries.
    pub(crate) fn is_empty_array(&self, key: &str) -> bool {
        match self.get(key) {
            Some(Item::ArrayOfTables(a)) => a.is_empty(),
            Some(item) => item.as_array().is_some_and(|a| a.is_empty()),
            None => false,
        }
    }

    /// Span of `key`'s value, falling back to the key itself (implicit tables have none).
    pub(crate) fn value_span(&self, key: &str) -> Span {
        let key_span = || self.table.key(key).and_then(|k| k.span());
        self.get(key).and_then(Item::span).or_else(key_span)
    }

    /// Reports every key not in `known`, at the key, with a hint towards the right spelling
    /// (or the section the key belongs to, via `elsewhere`).
    pub(crate) fn reject_unknown(
        &self,
        sink: &mut Sink,
        known: &[&str],
        elsewhere: impl Fn(&str) -> Option<String>,
    ) {
        for (key, _) in self.table.iter() {
            if known.contains(&key) {
                continue;
            }
            let span = self.table.key(key).and_then(|k| k.span());
            let hint = suggest::hint(key, known.iter().copied())
                .or_else(|| elsewhere(key))
                .unwrap_or_else(|| format!("known keys here: {}", known.join(", ")));
            let message = if self.path.is_empty() {
                format!("unknown section `{key}`")
            } else {
                format!("unknown key `{key}` in `{}`", self.path)
            };
            sink.error(&span, &self.key_path(key), message, Some(hint));
        }
    }

    /// Reports that a required `key` is absent; `example` is a value to suggest.
    pub(crate) fn missing(&self, sink: &mut Sink, key: &str, example: &str) {
        let within = if self.path.is_empty() { String::new() } else { format!(" in `{}`", self.path) };
        let message = format!("missing `{key}`{within}");
        sink.error(&self.span, &self.key_path(key), message, Some(format!("add {key} = {example}")));
    }

    /// A string value, or `None` (reported) when it has another type.
    pub(crate) fn string(&self, sink: &mut Sink, key: &str) -> Option<Located<&'d str>> {
        let item = self.get(key)?;
        match item.as_str() {
            Some(value) => Some(Located { value, span: item.span(), key: self.key_path(key) }),
            None => {
                self.wrong_type(sink, key, item, Kind::String);
                None
            }
        }
    }

    /// A string that must be present; `example` goes into the hint when it is not.
    pub(crate) fn required_string(
        &self,
        sink: &mut Sink,
        key: &str,
        example: &str,
    ) -> Option<Located<&'d str>> {
        if !self.has(key) {
            self.missing(sink, key, example);
        }
        self.string(sink, key)
    }

    /// A boolean, or `default` when absent or (reported) of another type.
    pub(crate) fn bool_or(&self, sink: &mut Sink, key: &str, default: bool) -> bool {
        let Some(item) = self.get(key) else {
            return default;
        };
        item.as_bool().unwrap_or_else(|| {
            self.wrong_type(sink, key, item, Kind::Bool);
            default
        })
    }

    /// An integer within `range`, or `default` when absent or (reported) invalid.
    pub(crate) fn int_or(&self, sink: &mut Sink, key: &str, default: i64, range: RangeInclusive<i64>) -> i64 {
        let Some(item) = self.get(key) else {
            return default;
        };
        let Some(value) = item.as_integer() else {
            self.wrong_type(sink, key, item, Kind::Integer);
            return default;
        };
        if range.contains(&value) {
            return value;
        }
        let (min, max) = (range.start(), range.end());
        let bounds =
            if *max == i64::MAX { format!("at least {min}") } else { format!("between {min} and {max}") };
        let message = format!("`{key}` must be {bounds}, found {value}");
        let hint = Some(format!("the default is {default}"));
        sink.error(&item.span(), &self.key_path(key), message, hint);
        default
    }

    /// A duration string ("10s"), or `default` when absent or (reported) invalid.
    pub(crate) fn duration_or(
        &self,
        sink: &mut Sink,
        key: &str,
        default: Duration,
        allow_zero: bool,
    ) -> Duration {
        let Some(item) = self.get(key) else {
            return default;
        };
        let Some(text) = item.as_str() else {
            self.wrong_type(sink, key, item, Kind::Duration);
            return default;
        };
        let path = self.key_path(key);
        match duration::parse(text) {
            Ok(d) if d.is_zero() && !allow_zero => {
                let message = format!("`{key}` must be longer than 0");
                let hint = format!("the default is \"{}\"", duration::format(default));
                sink.error(&item.span(), &path, message, Some(hint));
                default
            }
            Ok(d) => d,
            Err(e) => {
                sink.error(&item.span(), &path, e.message, e.hint);
                default
            }
        }
    }

    /// An array of strings, or `None` when absent or (reported) not one.
    pub(crate) fn strings(&self, sink: &mut Sink, key: &str) -> Option<Vec<String>> {
        let item = self.get(key)?;
        let strings =
            item.as_array().and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect());
        if strings.is_none() {
            let message = format!("`{key}` must be an array of strings, found {}", found(item));
            let hint = Some(format!("write {key} = [\"a\", \"b\"]"));
            sink.error(&self.value_span(key), &self.key_path(key), message, hint);
        }
        strings
    }

    /// An array of TCP/UDP ports (1–65535), or `None` when absent or (reported) not one.
    pub(crate) fn ports(&self, sink: &mut Sink, key: &str) -> Option<Vec<u16>> {
        let item = self.get(key)?;
        let ports = item.as_array().and_then(|a| {
            a.iter().map(|v| v.as_integer().and_then(|n| u16::try_from(n).ok()).filter(|p| *p > 0)).collect()
        });
        if ports.is_none() {
            let message = format!("`{key}` must be an array of ports (1 to 65535), found {}", found(item));
            let hint = Some(format!("write {key} = [80, 443]"));
            sink.error(&self.value_span(key), &self.key_path(key), message, hint);
        }
        ports
    }

    /// The sub-table `key` (`[key]` or `key = { … }`), or `None` when absent or not a table.
    pub(crate) fn section(&self, sink: &mut Sink, key: &str) -> Option<Table<'d>> {
        let item = self.get(key)?;
        match item.as_table_like() {
            Some(table) => Some(Table {
                path: self.key_path(key),
                table,
                span: item.span().or_else(|| self.value_span(key)),
            }),
            None => {
                self.wrong_type(sink, key, item, Kind::Table);
                None
            }
        }
    }

    /// The sub-table `key` if it is one, without reporting anything otherwise (for keys
    /// that may be a table or an array of tables).
    pub(crate) fn section_quiet(&self, key: &str) -> Option<Table<'d>> {
        let item = self.get(key)?;
        let table = item.as_table_like()?;
        Some(Table { path: self.key_path(key), table, span: item.span().or_else(|| self.value_span(key)) })
    }

    /// The entries of an array of tables: `[[key]]` sections or `key = [ { … }, … ]`.
    /// `shape` tells the operator how to write it when it is something else.
    pub(crate) fn entries(&self, sink: &mut Sink, key: &str, shape: &str) -> Vec<Table<'d>> {
        let Some(item) = self.get(key) else {
            return Vec::new();
        };
        let path = self.key_path(key);
        let entry = |i: usize, table: &'d dyn TableLike, span: Span| Table {
            path: format!("{path}[{i}]"),
            table,
            span,
        };
        if let Some(tables) = item.as_array_of_tables() {
            let iter = tables.iter().enumerate();
            return iter.map(|(i, t)| entry(i, t, t.span())).collect();
        }
        let Some(array) = item.as_array() else {
            let message = format!("`{key}` must be an array of tables, found {}", found(item));
            sink.error(&self.value_span(key), &path, message, Some(shape.to_string()));
            return Vec::new();
        };
        let mut tables = Vec::new();
        for (i, value) in array.iter().enumerate() {
            match value.as_inline_table() {
                Some(t) => tables.push(entry(i, t, value.span())),
                None => {
                    let message = format!("`{key}[{i}]` must be a table, found {}", found_value(value));
                    sink.error(&value.span(), &format!("{path}[{i}]"), message, Some(shape.to_string()));
                }
            }
        }
        tables
    }

    fn wrong_type(&self, sink: &mut Sink, key: &str, item: &Item, kind: Kind) {
        let message = format!("`{key}` must be {}, found {}", kind.describe(), found(item));
        let hint = kind.fix(key, item);
        sink.error(&self.value_span(key), &self.key_path(key), message, hint);
    }
}

/// The value types a getter can ask for.
#[derive(Clone, Copy)]
enum Kind {
    String,
    Integer,
    Bool,
    Duration,
    Table,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Bool => "a boolean (true or false)",
            Kind::Duration => "a duration string such as \"10s\"",
            Kind::Table => "a table",
        }
    }

    /// The likely fix when the value was written with the wrong type, e.g. in quotes.
    fn fix(self, key: &str, item: &Item) -> Option<String> {
        let text = item.as_str();
        match self {
            Kind::Integer => match (text.and_then(|t| t.parse::<i64>().ok()), item.as_float()) {
                (Some(n), _) => Some(format!("remove the quotes: `{key} = {n}`")),
                (None, Some(f)) if f.fract() == 0.0 => Some(format!("write `{key} = {f:.0}`")),
                _ => None,
            },
            Kind::Bool => match text {
                Some(t @ ("true" | "false")) => Some(format!("remove the quotes: `{key} = {t}`")),
                _ => None,
            },
            Kind::String => match (item.as_integer(), item.as_bool()) {
                (Some(n), _) => Some(format!("add quotes: `{key} = \"{n}\"`")),
                (_, Some(b)) => Some(format!("add quotes: `{key} = \"{b}\"`")),
                _ => None,
            },
            Kind::Duration => item
                .as_integer()
                .map(|n| format!("durations need a unit; write `{key} = \"{n}s\"` (units: ms, s, m, h)")),
            Kind::Table => Some(format!("write it as a section: `[{key}]`")),
        }
    }
}

/// "a string", "an array", … for messages.
fn found(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Value(value) => found_value(value),
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
    }
}

fn found_value(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "a table",
    }
}
