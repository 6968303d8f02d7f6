//! The page's DOM as dumped (`outerHTML`), read with a few string searches.

use std::collections::HashMap;

/// `document.documentElement.outerHTML`, read with a few string searches (the page's own
/// script builds these elements, so their shape is known).
pub(crate) struct Dom(pub(crate) String);

/// One `tr[data-server]`: its cells by `data-field`.
pub(crate) struct Row {
    pub(crate) group: String,
    pub(crate) server: String,
    pub(crate) cells: HashMap<String, Cell>,
}

pub(crate) struct Cell {
    pub(crate) value: String,
    pub(crate) title: String,
    pub(crate) text: String,
}

impl Dom {
    pub(crate) fn polls(&self) -> u64 {
        let body = tag_at(&self.0, self.0.find("<body").unwrap());
        attr(body, "data-polls").and_then(|p| p.parse().ok()).unwrap_or(0)
    }

    pub(crate) fn banner_shown(&self) -> bool {
        let tag = tag_at(&self.0, self.0.find("<div id=\"banner\"").unwrap());
        attr(tag, "hidden").is_none()
    }

    pub(crate) fn banner_text(&self) -> String {
        let Some(at) = self.0.find("<span id=\"banner-text\">") else { return String::new() };
        let rest = &self.0[at..];
        strip_tags(&rest[..rest.find("</span>").unwrap_or(rest.len())])
    }

    pub(crate) fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut from = 0;
        while let Some(at) = self.0[from..].find("<tr data-group=") {
            let start = from + at;
            let end = start + self.0[start..].find("</tr>").unwrap();
            let tr = tag_at(&self.0, start);
            let (group, server) = (attr(tr, "data-group").unwrap(), attr(tr, "data-server").unwrap());
            rows.push(Row { group, server, cells: cells(&self.0[start..end]) });
            from = end;
        }
        rows
    }

    /// The `data-value` of the first element with `data-field="field"` (the header's).
    pub(crate) fn field_value(&self, field: &str) -> Option<String> {
        let at = self.0.find(&format!("data-field=\"{field}\""))?;
        let open = self.0[..at].rfind('<')?;
        attr(tag_at(&self.0, open), "data-value")
    }

    /// Points the chart `<canvas id>` drew (its `data-points`).
    pub(crate) fn chart_points(&self, id: &str) -> u64 {
        let Some(at) = self.0.find(&format!("<canvas id=\"{id}\"")) else { return 0 };
        attr(tag_at(&self.0, at), "data-points").and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// Hits shown for the rule labelled `label` (first listener).
    pub(crate) fn rule_hits(&self, label: &str) -> f64 {
        let Some(at) = self.0.find(&format!("data-rule=\"{label}\"")) else { return 0.0 };
        let end = at + self.0[at..].find("</tr>").unwrap_or(0);
        cells(&self.0[at..end]).get("hits").and_then(|c| c.value.parse().ok()).unwrap_or(0.0)
    }
}

impl Row {
    pub(crate) fn value(&self, field: &str) -> &str {
        self.cells.get(field).map_or("", |c| c.value.as_str())
    }

    pub(crate) fn num(&self, field: &str) -> Option<f64> {
        self.value(field).parse().ok()
    }

    pub(crate) fn text(&self, field: &str) -> &str {
        self.cells.get(field).map_or("", |c| c.text.as_str())
    }

    pub(crate) fn title(&self, field: &str) -> &str {
        self.cells.get(field).map_or("", |c| c.title.as_str())
    }
}

/// The `td[data-field]` cells of one row's HTML.
pub(crate) fn cells(html: &str) -> HashMap<String, Cell> {
    let mut out = HashMap::new();
    let mut from = 0;
    while let Some(at) = html[from..].find("<td") {
        let start = from + at;
        let tag = tag_at(html, start);
        let body_start = start + tag.len();
        let body_end = body_start + html[body_start..].find("</td>").unwrap_or(0);
        if let Some(field) = attr(tag, "data-field") {
            let cell = Cell {
                value: attr(tag, "data-value").unwrap_or_default(),
                title: attr(tag, "title").unwrap_or_default(),
                text: strip_tags(&html[body_start..body_end]),
            };
            out.insert(field, cell);
        }
        from = body_end;
    }
    out
}

/// The opening tag starting at `at`, `<` to `>` inclusive (attribute values are escaped, so
/// the first `>` ends it).
pub(crate) fn tag_at(html: &str, at: usize) -> &str {
    let end = html[at..].find('>').map_or(html.len(), |e| at + e + 1);
    &html[at..end]
}

/// An attribute's value in an opening tag, unescaped; `Some("")` for a bare attribute.
pub(crate) fn attr(tag: &str, name: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = tag[from..].find(name) {
        let start = from + at;
        let before = tag[..start].chars().last();
        let after = &tag[start + name.len()..];
        if before == Some(' ') {
            if let Some(rest) = after.strip_prefix("=\"") {
                return Some(unescape(&rest[..rest.find('"')?]));
            }
            if after.starts_with([' ', '>', '/']) {
                return Some(String::new());
            }
        }
        from = start + name.len();
    }
    None
}

pub(crate) fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    unescape(out.trim())
}

pub(crate) fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}
