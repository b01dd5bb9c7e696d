//! The rows being built for one target table, and the trie of the key paths below them:
//! each distinct path resolved once per table to its column and to the child table of an
//! array found there.

use std::collections::HashMap;
use std::rc::Rc;

use super::Column;
use super::ids::{ChildIds, push_token};
use crate::naming::{self, ColumnNamer};

/// The payload's root in a table's path trie (the row's object, or the element).
pub(super) const ROOT: u32 = 0;

/// The envelope metadata's root in the topic table's path trie.
pub(super) const META_ROOT: u32 = 1;

/// Children a trie node scans linearly before it builds a hash index.
const LINEAR_CHILDREN: usize = 16;

/// One distinct key path below a table's row, resolved once per table: its column and
/// the child table of an array found there. Values then find their column by walking
/// the trie with the decoded keys; no path string is built per value.
pub(super) struct PathNode {
    parent: u32,
    key: Box<str>,
    /// Child nodes in first-seen order.
    children: Vec<u32>,
    /// Position in `children` by key, once a node has more than [`LINEAR_CHILDREN`].
    index: Option<HashMap<Box<str>, usize>>,
    pub(super) column: Option<usize>,
    /// The child table (its index) of an array at this path, and the path's JSON pointer
    /// from the row (`/legs`), which a child row's `_id` repeats.
    pub(super) child_table: Option<(usize, Rc<str>)>,
    /// Whether a `json` or `variant` hint keeps the value at this path whole, once
    /// looked up.
    pub(super) whole: Option<Whole>,
    /// The last object with a member at this path ([`super::walk::Flattener::members`]).
    pub(super) stamp: u32,
}

impl PathNode {
    fn new(parent: u32, key: &str) -> Self {
        PathNode {
            parent,
            key: key.into(),
            children: Vec::new(),
            index: None,
            column: None,
            child_table: None,
            whole: None,
            stamp: 0,
        }
    }
}

/// How a hint keeps the value at a path whole instead of flattening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Whole {
    /// It does not: the value is flattened.
    No,
    /// As its JSON text (`json`), when an object or array.
    Json,
    /// As a Parquet Variant (`variant`), whatever the value.
    Variant,
}

/// Rows being built for one target table.
pub(super) struct TableBuilder<'a> {
    pub(super) is_child: bool,
    /// Array path (`quotes[].legs`) of a child table, for the names and ids of its own
    /// children.
    pub(super) origin: Option<Rc<str>>,
    /// JSON pointer of the table's rows in the payload: `` for the topic's table,
    /// `/currentprice/*` for the elements of the array that created a child table.
    pub(super) base: String,
    /// Every array's elements that fed this child table, sorted (`base` and, for a table
    /// several array paths share, the others'): a hint types a column when its pointer
    /// through any of them has one, the first in this order winning.
    pub(super) bases: Vec<String>,
    pub(super) namer: ColumnNamer,
    pub(super) nodes: Vec<PathNode>,
    pub(super) columns: Vec<Column<'a>>,
    /// The `_id`s and `_parent_id`s of a child table's rows (empty for a topic's table).
    pub(super) ids: ChildIds,
    /// Each row's message id: a topic row's `_id`, a child row's `_root_id`.
    pub(super) root_ids: Vec<&'a str>,
    pub(super) idx: Vec<i64>,
    pub(super) files: Vec<u32>,
    pub(super) lines: Vec<i64>,
    /// `(row, key, JSON text)` of values kept aside.
    pub(super) rescued: Vec<(u32, String, String)>,
}

impl TableBuilder<'_> {
    pub(super) fn new(is_child: bool, origin: Option<Rc<str>>, base: String) -> Self {
        TableBuilder {
            is_child,
            origin,
            bases: vec![base.clone()],
            base,
            namer: ColumnNamer::new(),
            nodes: vec![PathNode::new(ROOT, ""), PathNode::new(META_ROOT, "")],
            columns: Vec::new(),
            ids: ChildIds::default(),
            root_ids: Vec::new(),
            idx: Vec::new(),
            files: Vec::new(),
            lines: Vec::new(),
            rescued: Vec::new(),
        }
    }

    /// The node for `key` below `node`, created on first sight. `hint` is the position
    /// where the previous member of the same object was found: messages of a topic mostly
    /// repeat their key order, so the next key is usually the next child.
    pub(super) fn child_node(&mut self, node: u32, key: &str, hint: &mut usize) -> u32 {
        let n = &self.nodes[node as usize];
        if let Some(&c) = n.children.get(*hint)
            && *self.nodes[c as usize].key == *key
        {
            *hint += 1;
            return c;
        }
        let found = match &n.index {
            Some(index) => index.get(key).copied(),
            None => n
                .children
                .iter()
                .position(|&c| *self.nodes[c as usize].key == *key),
        };
        if let Some(pos) = found {
            *hint = pos + 1;
            return n.children[pos];
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(PathNode::new(node, key));
        let n = &mut self.nodes[node as usize];
        n.children.push(id);
        let pos = n.children.len() - 1;
        if let Some(index) = &mut n.index {
            index.insert(key.into(), pos);
        } else if n.children.len() > LINEAR_CHILDREN {
            let keys = n.children.clone();
            let index = keys
                .iter()
                .enumerate()
                .map(|(i, &c)| (self.nodes[c as usize].key.clone(), i))
                .collect();
            self.nodes[node as usize].index = Some(index);
        }
        *hint = pos + 1;
        id
    }

    /// Records that the elements at `base` are rows of this (shared) child table too.
    pub(super) fn fed_from(&mut self, base: String) {
        if let Err(at) = self.bases.binary_search(&base) {
            self.bases.insert(at, base);
            // The columns' hints are looked up again with this base.
            for node in &mut self.nodes {
                node.whole = None;
            }
        }
    }

    /// The decoded keys from the root to `node`.
    pub(super) fn keys(&self, mut node: u32) -> Vec<&str> {
        let mut keys = Vec::new();
        while node > META_ROOT {
            let n = &self.nodes[node as usize];
            keys.push(&*n.key);
            node = n.parent;
        }
        keys.reverse();
        keys
    }

    /// The column of the value at `node`, a path `within` the payload or the metadata,
    /// named on first sight.
    #[inline]
    pub(super) fn column(&mut self, node: u32, within: Within) -> usize {
        match self.nodes[node as usize].column {
            Some(c) => c,
            None => self.new_column(node, within),
        }
    }

    /// Names the column of the payload's root (the whole payload) `name` instead of
    /// `value`.
    pub(super) fn name_root(&mut self, name: &str) {
        let c = self.namer.column("", name);
        if c == self.columns.len() {
            self.columns.push(Column::default());
        }
        self.nodes[ROOT as usize].column = Some(c);
    }

    /// [`TableBuilder::column`] on first sight of the path: names the column.
    #[cold]
    fn new_column(&mut self, node: u32, within: Within) -> usize {
        let keys = self.keys(node);
        let (key, name) = if within == Within::Meta {
            (
                format!("{}{}", naming::META, pointer(&keys, None)),
                naming::sanitize(&format!(
                    "{}{}{}",
                    naming::META,
                    naming::PATH_SEP,
                    path_name(&keys)
                )),
            )
        } else if keys.is_empty() {
            (String::new(), "value".to_string())
        } else {
            (pointer(&keys, None), path_name(&keys))
        };
        let c = self.namer.column(&key, &name);
        if c == self.columns.len() {
            self.columns.push(Column::default());
        }
        self.nodes[node as usize].column = Some(c);
        c
    }
}

/// What a flattened path is a path in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Within {
    /// The message's payload.
    Payload,
    /// The envelope's metadata (`_meta`).
    Meta,
}

/// RFC 6901 JSON pointer of `keys` (and `extra`): `/a/b`, `~` → `~0`, `/` → `~1`; `""`
/// is the whole value.
pub(super) fn pointer(keys: &[&str], extra: Option<&str>) -> String {
    let mut s = String::new();
    for k in keys.iter().copied().chain(extra) {
        s.push('/');
        push_token(&mut s, k);
    }
    s
}

/// A column name: sanitised keys joined by `__`, bounded to [`naming::MAX_NAME_LEN`] as a
/// whole.
fn path_name(keys: &[&str]) -> String {
    let joined = keys
        .iter()
        .map(|k| naming::sanitize(k))
        .collect::<Vec<_>>()
        .join(naming::PATH_SEP);
    naming::sanitize(&joined)
}
