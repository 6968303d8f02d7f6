//! JSON paths (`json.order.items[0].sku`): every path the rules reference is resolved in
//! one streaming pass over the body bytes (`jsonread.rs` reads them) that stops as soon as
//! each path has a value or is known to be absent. The paths form a trie; a key step
//! matches the object member of that name (the first one, should a name repeat), an index
//! step the array element at that 0-based position. A string's value is its content,
//! unescaped; a number, `true`, `false` or `null` is its text; an object or array is its
//! JSON text as sent.
//!
//! Only containers on a referenced path are read member by member, on an explicit stack
//! no deeper than the longest path; any other value is crossed by the skipper, so neither
//! deep nesting nor size makes the scan recurse.
//!
//! Partial input: a value is committed only once it has ended, and a path is known absent
//! only when the container that would hold it closes (or holds the wrong kind: an array
//! has no keys), so what a prefix of the body decides never changes when more arrives. At
//! the first byte that is not JSON the scan stops: what was resolved before stands, every
//! other path is absent.

use crate::ast::{JsonPath, JsonStep};
use crate::jsonread::{read_scalar, read_string, skip_value, skip_ws, Read, Stop};
use crate::pathstate::PathState;

const ROOT: u32 = 0;

/// The compiled trie of referenced paths.
#[derive(Debug, Default)]
pub(crate) struct JsonPlan {
    nodes: Vec<JNode>,
}

#[derive(Debug, Default)]
struct JNode {
    /// (member name, node).
    keys: Vec<(Box<[u8]>, u32)>,
    /// (0-based index, node).
    indexes: Vec<(u32, u32)>,
    /// The path that ends at this node.
    path: Option<u32>,
    /// Every path ending at this node or below it.
    subtree: Vec<u32>,
}

impl JNode {
    fn is_leaf(&self) -> bool {
        self.keys.is_empty() && self.indexes.is_empty()
    }
}

impl JsonPlan {
    pub fn new(paths: &[JsonPath]) -> JsonPlan {
        let mut plan = JsonPlan { nodes: vec![JNode::default()] };
        for (id, path) in paths.iter().enumerate() {
            let mut at = ROOT;
            plan.nodes[ROOT as usize].subtree.push(id as u32);
            for step in &path.steps {
                at = plan.child(at, step);
                plan.nodes[at as usize].subtree.push(id as u32);
            }
            plan.nodes[at as usize].path = Some(id as u32);
        }
        plan
    }

    fn child(&mut self, parent: u32, step: &JsonStep) -> u32 {
        let next = self.nodes.len() as u32;
        let node = &mut self.nodes[parent as usize];
        let found = match step {
            JsonStep::Key(k) => node.keys.iter().find(|(name, _)| **name == *k.as_bytes()).map(|e| e.1),
            JsonStep::Index(i) => node.indexes.iter().find(|(n, _)| n == i).map(|e| e.1),
        };
        if let Some(c) = found {
            return c;
        }
        match step {
            JsonStep::Key(k) => node.keys.push((k.as_bytes().into(), next)),
            JsonStep::Index(i) => node.indexes.push((*i, next)),
        }
        self.nodes.push(JNode::default());
        next
    }

    pub fn path_count(&self) -> usize {
        self.nodes[ROOT as usize].subtree.len()
    }
}

/// What the last scan made of the body as a whole (for traces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Source {
    /// Read as JSON (so far without a fault).
    #[default]
    Json,
    /// Not read: the request's Content-Type is not JSON.
    NotJson,
    /// Not JSON from this byte offset on.
    Malformed(usize),
}

/// An open object or array on a referenced path.
#[derive(Debug)]
struct Frame {
    node: u32,
    object: bool,
    /// Where its opening bracket is (its value, if a path wants it, is its text).
    start: usize,
    /// Arrays: the index of the next element.
    next_index: u32,
    /// Whether a member has been read (so a `,` or the end must come next).
    after_member: bool,
}

/// Per-worker buffers for the scan, reused across requests.
#[derive(Debug, Default)]
pub(crate) struct JsonScratch {
    stack: Vec<Frame>,
    key: Vec<u8>,
    pub values: Vec<Vec<u8>>,
    pub states: Vec<PathState>,
    pending: usize,
    pub source: Source,
}

impl JsonScratch {
    fn reset(&mut self, plan: &JsonPlan, source: Source) {
        let n = plan.path_count();
        self.values.resize_with(n, Vec::new);
        self.values.iter_mut().for_each(Vec::clear);
        self.states.clear();
        self.states.resize(n, PathState::Pending);
        self.pending = n;
        self.stack.clear();
        self.source = source;
    }

    /// Every path absent: the body is not JSON.
    pub fn not_json(&mut self, plan: &JsonPlan) {
        self.reset(plan, Source::NotJson);
        self.settle_all();
    }

    /// Resolves every path over `input`; `complete` says whether it is the whole body.
    pub fn scan(&mut self, plan: &JsonPlan, input: &[u8], complete: bool) {
        self.reset(plan, Source::Json);
        if self.pending > 0 {
            if let Err(Stop::Bad(at)) = self.run(plan, input) {
                self.source = Source::Malformed(at);
                self.settle_all();
            }
        }
        if complete {
            self.settle_all();
        }
    }

    fn settle_all(&mut self) {
        for s in &mut self.states {
            if *s == PathState::Pending {
                *s = PathState::Absent;
            }
        }
        self.pending = 0;
    }

    fn run(&mut self, plan: &JsonPlan, s: &[u8]) -> Result<(), Stop> {
        let mut at = self.value(plan, s, skip_ws(s, 0), Some(ROOT))?;
        while self.pending > 0 {
            let Some(top) = self.stack.last() else { return Ok(()) };
            at = skip_ws(s, at);
            let b = *s.get(at).ok_or(Stop::End)?;
            if b == if top.object { b'}' } else { b']' } {
                self.close(plan, &s[..at + 1]);
                at += 1;
                continue;
            }
            if top.after_member {
                if b != b',' {
                    return Err(Stop::Bad(at));
                }
                at = skip_ws(s, at + 1);
            }
            at = self.member(plan, s, at)?;
        }
        Ok(())
    }

    /// The next member of the innermost open container, starting at `s[at]`.
    fn member(&mut self, plan: &JsonPlan, s: &[u8], at: usize) -> Read {
        let Some(top) = self.stack.last_mut() else { return Err(Stop::Bad(at)) };
        top.after_member = true;
        let node = &plan.nodes[top.node as usize];
        if !top.object {
            let i = top.next_index;
            top.next_index = i.saturating_add(1);
            let child = node.indexes.iter().find(|(n, _)| *n == i).map(|e| e.1);
            return self.value(plan, s, at, child);
        }
        match s.get(at) {
            Some(b'"') => {}
            Some(_) => return Err(Stop::Bad(at)),
            None => return Err(Stop::End),
        }
        self.key.clear();
        let colon = skip_ws(s, read_string(s, at, &mut self.key)?);
        match s.get(colon) {
            Some(b':') => {}
            Some(_) => return Err(Stop::Bad(colon)),
            None => return Err(Stop::End),
        }
        let child = node.keys.iter().find(|(name, _)| **name == *self.key).map(|e| e.1);
        self.value(plan, s, skip_ws(s, colon + 1), child)
    }

    /// The value at `s[at]` for trie node `node` (`None`: no path goes through it).
    fn value(&mut self, plan: &JsonPlan, s: &[u8], at: usize, node: Option<u32>) -> Read {
        let Some(n) = node.filter(|&n| self.wanted(plan, n)) else { return skip_value(s, at) };
        let node = &plan.nodes[n as usize];
        let end = match s.get(at) {
            None => return Err(Stop::End),
            Some(b'{' | b'[') if !node.is_leaf() => {
                self.open(plan, n, s[at] == b'{', at);
                return Ok(at + 1);
            }
            Some(b'{' | b'[') => skip_value(s, at)?,
            Some(b'"') => return self.string(node, s, at),
            Some(_) => read_scalar(s, at)?,
        };
        self.found(node, &s[at..end]);
        Ok(end)
    }

    /// Whether a path through node `n` is still unresolved (a repeated member name finds
    /// its paths resolved by the first one).
    fn wanted(&self, plan: &JsonPlan, n: u32) -> bool {
        plan.nodes[n as usize].subtree.iter().any(|&p| self.states[p as usize] == PathState::Pending)
    }

    /// A string value: unescaped into the path's value, or into scratch just to check it.
    fn string(&mut self, node: &JNode, s: &[u8], at: usize) -> Read {
        let end = match node.path.filter(|&p| self.states[p as usize] == PathState::Pending) {
            Some(p) => {
                let value = &mut self.values[p as usize];
                value.clear();
                let end = read_string(s, at, value)?;
                self.resolve(p, PathState::Found);
                end
            }
            None => {
                self.key.clear();
                read_string(s, at, &mut self.key)?
            }
        };
        self.settle(node);
        Ok(end)
    }

    /// Node `node`'s own value is `text` (a scalar, or a container no deeper path enters);
    /// anything below it is absent.
    fn found(&mut self, node: &JNode, text: &[u8]) {
        if let Some(p) = node.path {
            if self.states[p as usize] == PathState::Pending {
                self.values[p as usize].clear();
                self.values[p as usize].extend_from_slice(text);
                self.resolve(p, PathState::Found);
            }
        }
        self.settle(node);
    }

    /// An object or array opens at `s[at]` for node `n`: steps of the other kind are absent.
    fn open(&mut self, plan: &JsonPlan, n: u32, object: bool, at: usize) {
        let node = &plan.nodes[n as usize];
        if object {
            for &(_, c) in &node.indexes {
                self.settle(&plan.nodes[c as usize]);
            }
        } else {
            for &(_, c) in &node.keys {
                self.settle(&plan.nodes[c as usize]);
            }
        }
        self.stack.push(Frame { node: n, object, start: at, next_index: 0, after_member: false });
    }

    /// The innermost container closes at the last byte of `s`.
    fn close(&mut self, plan: &JsonPlan, s: &[u8]) {
        let Some(frame) = self.stack.pop() else { return };
        self.found(&plan.nodes[frame.node as usize], &s[frame.start..]);
    }

    /// Whatever a node could have held and did not is absent for good.
    fn settle(&mut self, node: &JNode) {
        for &p in &node.subtree {
            self.resolve(p, PathState::Absent);
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
