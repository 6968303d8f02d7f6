//! XML tag paths (seed 000 §4.3): every `xml.…` path the rules reference is resolved in one
//! streaming pass over the body bytes (`markup.rs` reads them) that stops as soon as each
//! path has a value or is known to be absent. The paths form a trie; a step `name:N` matches the N-th
//! element named `name` among the children of the element matched by the step before
//! (for the first step: among the root-level elements, of which a document here may have
//! several). A path's value is the element's text content (descendant text included),
//! entities resolved, trimmed.
//!
//! Partial input: a value is committed only at its element's end tag, and a path is known
//! absent only when the element that would contain it closes (or a complete body ends),
//! so what a prefix of the body decides never changes when more arrives.

use crate::ast::XmlPath;
use crate::markup::{next_token, skip_children, Token};
use crate::pathstate::PathState;

const ROOT: u32 = 0;

/// The compiled trie of referenced paths.
#[derive(Debug, Default)]
pub(crate) struct XmlPlan {
    nodes: Vec<XNode>,
    /// Number of sibling counters (one per node and distinct child name).
    slots: usize,
}

#[derive(Debug, Default)]
struct XNode {
    /// Distinct child names; child name `k` counts in counter `slot_base + k`.
    names: Vec<Box<[u8]>>,
    slot_base: usize,
    /// (name index, 1-based position, node).
    children: Vec<(usize, u32, u32)>,
    /// The path that ends at this node.
    path: Option<u32>,
    /// Every path ending at this node or below it.
    subtree: Vec<u32>,
}

impl XmlPlan {
    pub fn new(paths: &[XmlPath]) -> XmlPlan {
        let mut plan = XmlPlan { nodes: vec![XNode::default()], slots: 0 };
        for (id, path) in paths.iter().enumerate() {
            let mut at = ROOT;
            plan.nodes[ROOT as usize].subtree.push(id as u32);
            for step in &path.steps {
                at = plan.child(at, step.name.as_bytes(), step.index.unwrap_or(1));
                plan.nodes[at as usize].subtree.push(id as u32);
            }
            plan.nodes[at as usize].path = Some(id as u32);
        }
        let mut base = 0;
        for node in &mut plan.nodes {
            node.slot_base = base;
            base += node.names.len();
        }
        plan.slots = base;
        plan
    }

    fn child(&mut self, parent: u32, name: &[u8], index: u32) -> u32 {
        let node = &mut self.nodes[parent as usize];
        let k = match node.names.iter().position(|n| &**n == name) {
            Some(k) => k,
            None => {
                node.names.push(name.into());
                node.names.len() - 1
            }
        };
        if let Some(&(_, _, c)) = node.children.iter().find(|(nk, ni, _)| *nk == k && *ni == index) {
            return c;
        }
        let c = self.nodes.len() as u32;
        self.nodes[parent as usize].children.push((k, index, c));
        self.nodes.push(XNode::default());
        c
    }

    pub fn path_count(&self) -> usize {
        self.nodes[ROOT as usize].subtree.len()
    }
}

/// Per-worker buffers for the scan, reused across requests.
#[derive(Debug, Default)]
pub(crate) struct XmlScratch {
    counters: Vec<u32>,
    stack: Vec<u32>,
    capturing: Vec<(u32, u32)>,
    pub values: Vec<Vec<u8>>,
    pub states: Vec<PathState>,
    pending: usize,
}

impl XmlScratch {
    /// Marks every path "not yet known" (used when the XML source itself is unknown).
    pub fn all(&mut self, plan: &XmlPlan, state: PathState) {
        let n = plan.path_count();
        self.values.resize_with(n, Vec::new);
        self.states.clear();
        self.states.resize(n, state);
    }

    /// Resolves every path over `input`; `complete` says whether it is the whole document.
    pub fn scan(&mut self, plan: &XmlPlan, input: &[u8], complete: bool) {
        self.all(plan, PathState::Pending);
        self.values.iter_mut().for_each(Vec::clear);
        self.counters.clear();
        self.counters.resize(plan.slots, 0);
        self.stack.clear();
        self.capturing.clear();
        self.pending = plan.path_count();
        if self.pending > 0 {
            self.run(plan, input);
        }
        if complete {
            for s in &mut self.states {
                if *s == PathState::Pending {
                    *s = PathState::Absent;
                }
            }
        }
    }

    fn run(&mut self, plan: &XmlPlan, s: &[u8]) {
        let (mut at, mut depth) = (0usize, 0u32);
        while at < s.len() {
            if self.capturing.is_empty() {
                // Outside a value, go straight to the next child a path goes through (or
                // the end of the current element): the bulk of a large document is
                // crossed this way, without reading it token by token.
                let wanted: &[Box<[u8]>] = match self.stack.len() == depth as usize {
                    true => &plan.nodes[*self.stack.last().unwrap_or(&ROOT) as usize].names,
                    false => &[],
                };
                match skip_children(&s[at..], wanted) {
                    Some(skip) => at += skip,
                    None => return,
                }
            }
            let (token, next) = next_token(s, at);
            at = next;
            match token {
                Token::Start { name, empty } => {
                    self.open(plan, name, depth);
                    match empty {
                        true => self.close(plan, depth),
                        false => depth += 1,
                    }
                }
                // Only nesting counts, so a mismatched end tag closes the innermost element.
                Token::End if depth > 0 => {
                    depth -= 1;
                    self.close(plan, depth);
                }
                Token::Text(text) if !self.capturing.is_empty() => self.append_text(text),
                Token::CData(text) if !self.capturing.is_empty() => self.append(text),
                // The cut end of a partial body (or a broken document): stop here.
                Token::Incomplete => return,
                _ => {}
            }
            if self.pending == 0 {
                return;
            }
        }
    }

    /// Character data: entities resolved as quick-xml does; kept as sent when they can't be.
    fn append_text(&mut self, text: &[u8]) {
        if memchr::memchr(b'&', text).is_none() {
            return self.append(text);
        }
        match std::str::from_utf8(text).map(quick_xml::escape::unescape) {
            Ok(Ok(unescaped)) => self.append(unescaped.as_bytes()),
            _ => self.append(text),
        }
    }

    fn append(&mut self, text: &[u8]) {
        for &(path, _) in &self.capturing {
            self.values[path as usize].extend_from_slice(text);
        }
    }

    /// An element named `name` opens at `depth` (0 = root level).
    fn open(&mut self, plan: &XmlPlan, name: &[u8], depth: u32) {
        if self.stack.len() != depth as usize {
            return; // inside an element no path goes through
        }
        let parent = &plan.nodes[*self.stack.last().unwrap_or(&ROOT) as usize];
        let Some(k) = parent.names.iter().position(|n| &**n == name) else { return };
        let count = &mut self.counters[parent.slot_base + k];
        *count += 1;
        let n = *count;
        let Some(&(_, _, child)) = parent.children.iter().find(|(ck, ci, _)| *ck == k && *ci == n) else {
            return;
        };
        self.stack.push(child);
        let node = &plan.nodes[child as usize];
        self.counters[node.slot_base..node.slot_base + node.names.len()].fill(0);
        if let Some(path) = node.path {
            if self.states[path as usize] == PathState::Pending {
                self.values[path as usize].clear();
                self.capturing.push((path, depth));
            }
        }
    }

    /// The element at `depth` closes.
    fn close(&mut self, plan: &XmlPlan, depth: u32) {
        if self.stack.len() != depth as usize + 1 {
            return;
        }
        let Some(node) = self.stack.pop() else { return };
        if let Some(&(path, d)) = self.capturing.last() {
            if d == depth {
                self.capturing.pop();
                let v = &mut self.values[path as usize];
                let trimmed = trim_range(v);
                v.truncate(trimmed.end);
                v.drain(..trimmed.start);
                self.resolve(path, PathState::Found);
            }
        }
        // Whatever this element could have contained and did not is absent for good.
        for &path in &plan.nodes[node as usize].subtree {
            self.resolve(path, PathState::Absent);
        }
    }

    fn resolve(&mut self, path: u32, state: PathState) {
        let s = &mut self.states[path as usize];
        if *s == PathState::Pending {
            *s = state;
            self.pending -= 1;
        }
    }
}

fn trim_range(v: &[u8]) -> std::ops::Range<usize> {
    let start = v.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    start..end.max(start)
}
