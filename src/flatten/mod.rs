//! Flatten: one topic's staged messages → a topic table plus child tables.
//!
//! Takes a topic's staging [`RecordBatch`] (schema [`crate::stage::staging_schema`]) and
//! gives back a [`TablePlan`]: one Arrow batch per target table. Pure: no I/O. The
//! payload text is read with [`crate::json`], so cells borrow the staged text (no copy
//! per value), numbers keep their literal and sub-trees kept as JSON are their exact
//! source text.
//!
//! Rules (also in the README and `DESIGN.md`):
//! - nested objects become columns joined with `__` (`quote__bid`); every data column
//!   carries its original path as a JSON pointer in field metadata `bronze.path`;
//! - an array whose elements are all objects becomes rows of a child table named by its
//!   path (`currentprice`, `quotes__legs`), shared by every topic with an array at that
//!   path (or qualified by topic, or mapped explicitly: [`FlattenConfig`]); any other
//!   non-empty array becomes rows of a child table with one `value` column (objects and
//!   arrays inside it as JSON text); an empty array or object is kept as the JSON text
//!   `[]` / `{}` in the parent's column at its path;
//! - objects and arrays deeper than `max_depth` are kept as their JSON source text;
//! - a payload that is not an object is one `value` column (path ``);
//! - envelope metadata becomes `_meta__<field>` columns (path `_meta/<pointer>`);
//! - column types: see [`TypesMode`]. A JSON-text column is marked `bronze.json=true`;
//! - a column whose pointer in the payload (`*` for an array's elements) has a hint
//!   ([`crate::column_types`]) takes the hinted type; a value that does not convert is
//!   null in it and goes to `_rescued_data` under the column's path (`/amount`), as a
//!   value that does not fit an existing column does. A `json` hint keeps an object or
//!   array at its pointer whole (at `/arr/*`, each element whole in the child table's
//!   `value` column, objects too). Hinted and detectable columns are marked for
//!   [`crate::table::fit::to_table`], which detects timestamp and date columns;
//! - a key repeated in one object: the last value is the column's (as JSON readers do),
//!   earlier ones go to `_rescued_data` under `dup:<pointer>` as a JSON array.
//!
//! Keys: a topic row's `_id` is its message id. A child row's `_id` is its element's place
//! in the message: the parent row's `_id`, the array's JSON pointer from the parent's row
//! (`/holdings`, `/legs/items`: keys with `~` → `~0`, `/` → `~1`) and `/<index>`, so
//! `m-7/holdings/3/lots/1`; a first-level row starts from the message id escaped the same
//! way (`a/b` → `a~1b`). Its `_parent_id` is the parent row's `_id`, `_root_id` the message
//! id, `_idx` the index. See [`ChildIds`] for why these ids are unique.

pub use crate::naming::TableName;

mod hinted;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanBuilder, DictionaryArray, Float64Builder, Int32Array, Int64Array,
    Int64Builder, NullBufferBuilder, RecordBatch, StringArray, StringBuilder,
    TimestampMicrosecondArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, TimeUnit};

use crate::column_types::{ColumnType, DetectType};
use crate::config::{ChildNaming, FlattenConfig, TypesMode};
use crate::error::{Error, Result};
use crate::json::{Doc, Kind, Node, NumClass};
use crate::naming::{self, ColumnNamer, LANDING_PATH, RESCUED};

/// Field metadata key holding a column's original path (a JSON pointer).
pub const PATH_META: &str = "bronze.path";
/// Field metadata key marking a column whose values are JSON text.
pub const JSON_META: &str = "bronze.json";
/// Field metadata key of a flattened column typed by a hint: the hint's full pointer in
/// the payload. Read and dropped when the batch is fitted to its table.
pub const HINT_META: &str = "bronze.hint";
/// Field metadata key of a flattened string column whose type may be detected: the
/// types to try (`timestamp,date`). Read and dropped when the batch is fitted.
pub const DETECT_META: &str = "bronze.detect";
/// Schema metadata key of a flattened batch: how many values its hints rescued. Read
/// and dropped when the batch is fitted.
pub const RESCUED_META: &str = "bronze.rescued";
/// Field metadata key of a flattened column that is not written: the payload's JSON text
/// of each value the hinted column it names converted, kept for a topic whose new fields
/// are rescued ([`crate::config::Evolution::Rescue`]) so that `_rescued_data` gets the
/// values as they were written. Read and dropped when the batch is fitted.
pub const SOURCE_META: &str = "bronze.source";

/// What a run stamps on every row.
#[derive(Clone, Debug)]
pub struct Lineage {
    /// The batch (`_batch_id`, and the key its writes replace).
    pub key: crate::batch::BatchKey,
    /// `_loaded_at`, microseconds since the Unix epoch, UTC.
    pub loaded_at_micros: i64,
    /// `_landing_path` by source file: each batch folder's path (as its files'
    /// `_source_file` values start) and its landing path. Empty: `_landing_path` null.
    pub landing: Vec<(String, String)>,
}

impl Lineage {
    /// A lineage without landing paths (rows get a null `_landing_path`).
    #[cfg(any(test, feature = "testing"))]
    pub fn new(batch_id: impl Into<String>, loaded_at_micros: i64) -> Lineage {
        Lineage {
            key: crate::batch::BatchKey::of_id(batch_id),
            loaded_at_micros,
            landing: Vec::new(),
        }
    }

    /// The lineage of batch `key` read from `folders`.
    pub fn of(
        key: &crate::batch::BatchKey,
        folders: &[crate::batch::Folder],
        loaded_at_micros: i64,
    ) -> Lineage {
        Lineage {
            key: key.clone(),
            loaded_at_micros,
            landing: folders
                .iter()
                .map(|f| {
                    let mut prefix = f.path.to_string_lossy().into_owned();
                    if !prefix.ends_with(std::path::MAIN_SEPARATOR) {
                        prefix.push(std::path::MAIN_SEPARATOR);
                    }
                    (prefix, f.landing_path.clone())
                })
                .collect(),
        }
    }

    /// The landing path of the folder `source_file` (a `_source_file` value) was read from.
    pub fn landing_path_of(&self, source_file: &str) -> Option<&str> {
        match self.landing.as_slice() {
            [] => None,
            [(_, one)] => Some(one),
            many => many
                .iter()
                .find(|(prefix, _)| source_file.starts_with(prefix.as_str()))
                .map(|(_, p)| p.as_str()),
        }
    }
}

/// The tables one topic produces, each as one Arrow batch.
#[derive(Debug, Default)]
pub struct TablePlan {
    /// Target table → rows for it from this topic.
    pub tables: BTreeMap<TableName, RecordBatch>,
}

/// A flattened leaf value, borrowing the staged text.
#[derive(Clone, Copy, Debug)]
enum Cell<'a> {
    Bool(bool),
    /// A number literal and its class.
    Num(&'a str, NumClass),
    /// A string literal with its quotes, and whether it has escapes.
    Str(&'a str, bool),
    /// JSON source text of a sub-tree.
    Json(&'a str),
}

impl<'a> Cell<'a> {
    /// The value as JSON text.
    fn json(self) -> Cow<'a, str> {
        match self {
            Cell::Bool(true) => "true".into(),
            Cell::Bool(false) => "false".into(),
            Cell::Num(s, _) | Cell::Str(s, _) | Cell::Json(s) => s.into(),
        }
    }

    /// Asks the CPU to start loading the value's text (see [`PREFETCH_AHEAD`]).
    #[inline(always)]
    fn prefetch(self) {
        if let Cell::Num(s, _) | Cell::Str(s, _) | Cell::Json(s) = self {
            prefetch_read(s.as_ptr());
        }
    }

    /// The value as text: strings decoded, anything else as its JSON text.
    fn text(self) -> Cow<'a, str> {
        match self {
            Cell::Str(s, escaped) => crate::json::decode_string(s, escaped),
            other => other.json(),
        }
    }
}

#[derive(Debug, Default)]
struct Column<'a> {
    /// `(row, value)` in row order; nulls are absent.
    cells: Vec<(u32, Cell<'a>)>,
}

/// The payload's root in a table's path trie (the row's object, or the element).
const ROOT: u32 = 0;
/// The envelope metadata's root in the topic table's path trie.
const META_ROOT: u32 = 1;
/// Children a trie node scans linearly before it builds a hash index.
const LINEAR_CHILDREN: usize = 16;

/// One distinct key path below a table's row, resolved once per table: its column and
/// the child table of an array found there. Values then find their column by walking
/// the trie with the decoded keys; no path string is built per value.
struct PathNode {
    parent: u32,
    key: Box<str>,
    /// Child nodes in first-seen order.
    children: Vec<u32>,
    /// Position in `children` by key, once a node has more than [`LINEAR_CHILDREN`].
    index: Option<HashMap<Box<str>, usize>>,
    column: Option<usize>,
    /// The child table (its index) of an array at this path, and the path's JSON pointer
    /// from the row (`/legs`), which a child row's `_id` repeats.
    child_table: Option<(usize, Rc<str>)>,
    /// Whether a `json` hint keeps the value at this path whole, once looked up.
    keep_json: Option<bool>,
    /// The last object with a member at this path ([`Flattener::members`]).
    stamp: u32,
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
            keep_json: None,
            stamp: 0,
        }
    }
}

/// Rows being built for one target table.
struct TableBuilder<'a> {
    is_child: bool,
    /// Array path (`quotes[].legs`) of a child table, for the names and ids of its own
    /// children.
    origin: Option<Rc<str>>,
    /// JSON pointer of the table's rows in the payload: `` for the topic's table,
    /// `/currentprice/*` for the elements of the array that created a child table.
    base: String,
    /// Every array's elements that fed this child table, sorted (`base` and, for a table
    /// several array paths share, the others'): a hint types a column when its pointer
    /// through any of them has one, the first in this order winning.
    bases: Vec<String>,
    namer: ColumnNamer,
    nodes: Vec<PathNode>,
    columns: Vec<Column<'a>>,
    /// The `_id`s and `_parent_id`s of a child table's rows (empty for a topic's table).
    ids: ChildIds,
    /// Each row's message id: a topic row's `_id`, a child row's `_root_id`.
    root_ids: Vec<&'a str>,
    idx: Vec<i64>,
    files: Vec<u32>,
    lines: Vec<i64>,
    /// `(row, key, JSON text)` of values kept aside.
    rescued: Vec<(u32, String, String)>,
}

impl TableBuilder<'_> {
    fn new(is_child: bool, origin: Option<Rc<str>>, base: String) -> Self {
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
    fn child_node(&mut self, node: u32, key: &str, hint: &mut usize) -> u32 {
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
    fn fed_from(&mut self, base: String) {
        if let Err(at) = self.bases.binary_search(&base) {
            self.bases.insert(at, base);
            // The columns' hints are looked up again with this base.
            for node in &mut self.nodes {
                node.keep_json = None;
            }
        }
    }

    /// The decoded keys from the root to `node`.
    fn keys(&self, mut node: u32) -> Vec<&str> {
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
    fn column(&mut self, node: u32, within: Within) -> usize {
        match self.nodes[node as usize].column {
            Some(c) => c,
            None => self.new_column(node, within),
        }
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
enum Within {
    /// The message's payload.
    Payload,
    /// The envelope's metadata (`_meta`).
    Meta,
}

/// Where the row being flattened came from.
#[derive(Clone, Copy)]
struct RowCtx<'a> {
    root_id: &'a str,
    file: u32,
    line: i64,
}

/// RFC 6901 JSON pointer of `keys` (and `extra`): `/a/b`, `~` → `~0`, `/` → `~1`; `""`
/// is the whole value.
fn pointer(keys: &[&str], extra: Option<&str>) -> String {
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

struct Flattener<'a, 'c> {
    cfg: &'c FlattenConfig,
    topic: &'a str,
    /// Target tables; index 0 is the topic's own table.
    tables: Vec<(TableName, TableBuilder<'a>)>,
    by_name: HashMap<TableName, usize>,
    files: Vec<&'a str>,
    /// Values, rescued values and child rows recorded so far (to spot elements that
    /// produced nothing).
    recorded: usize,
    /// Member lists reused across objects (one per nesting level in use).
    member_bufs: Vec<Vec<Member>>,
    /// The stamp of the object whose members are being resolved ([`PathNode::stamp`]).
    stamp: u32,
    /// Child id prefixes reused across arrays (one per nesting level in use).
    id_prefixes: Vec<String>,
    /// How the lineage columns are built.
    lineage_columns: LineageColumns,
    /// Whether a `json` hint applies to this topic (objects and arrays are then looked
    /// up before they are flattened).
    json_hints: bool,
}

/// A member of an object: its key and value nodes in the document, the trie node of its
/// key, and whether it is the last member with that key (earlier ones are rescued).
#[derive(Clone, Copy)]
struct Member {
    key: u32,
    value: u32,
    node: u32,
    is_last: bool,
}

/// The `_id`s of a child table's rows as one text, built as the rows are (no allocation per
/// row): row `r`'s `_id` is `text[ends[r]..ends[r + 1]]`, and its `_parent_id` the first
/// `parent_lens[r]` bytes of it (0: the parent is a topic row, whose `_id` is the message
/// id, `_root_id`).
///
/// An `_id` is `<message id>` + `<pointer>` + `/<index>` repeated down the levels, where
/// `<pointer>` is the array's JSON pointer from its parent row, keys escaped by RFC 6901
/// (`~` → `~0`, `/` → `~1`), and the message id is escaped the same way. So the text up to
/// the first `/` is the escaped message id, which gives the message id back (escaping is
/// reversible), and the rest is the JSON pointer of the element in that message's payload
/// (`/holdings/3/lots/1`). In one payload a pointer names at most one value (a repeated
/// key is flattened once, the others are rescued), so two rows have the same `_id` only
/// if they come from the same message id, whatever table, array path, depth or topic fed
/// them. Message ids are unique across all the topics of a batch (staging drops a repeated
/// id whatever its topic), so the topic is not part of the id: within a batch a child
/// table's `_id`s are unique even when several topics feed it. Where message ids repeat
/// (a dedup key other than the id, or one message id loaded by two batches), child ids
/// repeat with them, as the topic rows' `_id`s do; `_batch_id` and `_topic` tell such rows
/// apart.
#[derive(Debug)]
struct ChildIds {
    text: String,
    /// Arrow offsets of the ids in `text`: 0, then the end of each.
    ends: Vec<i32>,
    parent_lens: Vec<u32>,
    /// Whether `text` outgrew an Arrow string column (2 GiB): an error when it is built.
    overflow: bool,
}

impl Default for ChildIds {
    fn default() -> Self {
        ChildIds {
            text: String::new(),
            ends: vec![0],
            parent_lens: Vec::new(),
            overflow: false,
        }
    }
}

impl ChildIds {
    /// Adds the id `prefix` + `idx` of a row whose parent's `_id` is `parent_len` bytes
    /// of `prefix` (0: the message id).
    #[inline]
    fn push(&mut self, prefix: &str, parent_len: u32, idx: usize) {
        self.text.push_str(prefix);
        push_index(&mut self.text, idx);
        match i32::try_from(self.text.len()) {
            Ok(end) => self.ends.push(end),
            Err(_) => {
                self.overflow = true;
                self.ends.push(i32::MAX);
            }
        }
        self.parent_lens.push(parent_len);
    }

    /// The `_id` of row `r`.
    fn id(&self, r: usize) -> &str {
        &self.text[self.ends[r] as usize..self.ends[r + 1] as usize]
    }

    /// The `_parent_id` of row `r`, its message id being `root_id`.
    fn parent_id<'s>(&'s self, r: usize, root_id: &'s str) -> &'s str {
        match self.parent_lens[r] as usize {
            0 => root_id,
            len => &self.id(r)[..len],
        }
    }

    /// The `_id` column: the text and offsets as they are, no copy. Their spare capacity
    /// is given back first (the allocator shrinks in place): the column may be held
    /// until the table's commit.
    fn into_column(mut self) -> Result<StringArray> {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        if self.overflow {
            return Err(Error::arrow(
                naming::ID,
                arrow::error::ArrowError::ComputeError("column over 2 GiB".into()),
            ));
        }
        StringArray::try_new(
            arrow::buffer::OffsetBuffer::new(self.ends.into()),
            self.text.into_bytes().into(),
            None,
        )
        .map_err(|e| Error::arrow(naming::ID, e))
    }
}

/// Appends `i` in decimal.
#[inline]
fn push_index(out: &mut String, mut i: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

/// Appends `s` as a JSON pointer token (RFC 6901): `~` → `~0`, `/` → `~1`.
#[inline]
fn push_token(out: &mut String, s: &str) {
    // Ids and keys are short: a plain scan beats setting up a vectorised search.
    if !s.bytes().any(|b| b == b'~' || b == b'/') {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// A string column of `values`, each known to be UTF-8 (message ids, child ids): built
/// from their bytes and checked once as a whole, not value by value.
fn utf8_column<'v>(column: &str, values: impl Iterator<Item = &'v [u8]>) -> Result<StringArray> {
    // Sized for ids of about 32 bytes (grows if they are longer).
    let rows = values.size_hint().0;
    let mut bytes = Vec::with_capacity(rows * 32);
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    for v in values {
        bytes.extend_from_slice(v);
        let end = i32::try_from(bytes.len()).map_err(|_| {
            Error::arrow(
                column,
                arrow::error::ArrowError::ComputeError("column over 2 GiB".into()),
            )
        })?;
        offsets.push(end);
    }
    StringArray::try_new(
        arrow::buffer::OffsetBuffer::new(offsets.into()),
        bytes.into(),
        None,
    )
    .map_err(|e| Error::arrow(column, e))
}

/// Index of the topic's own table in [`Flattener::tables`].
const TOPIC_TABLE: usize = 0;

/// Flattens one topic's staged rows (its batches in order, as one input).
#[cfg(any(test, feature = "testing"))]
pub fn flatten<'a>(
    topic: &'a str,
    staged: &'a [RecordBatch],
    lineage: &Lineage,
    cfg: &FlattenConfig,
) -> Result<TablePlan> {
    flatten_with(topic, staged, lineage, cfg, LineageColumns::Plain)
}

/// [`flatten`], with the lineage columns whose values repeat (`_batch_id`,
/// `_landing_path`, `_topic`, `_source_file`) as Arrow dictionaries: a row of a child
/// table then holds 4-byte keys instead of ~100 bytes of copied text. The loader keeps
/// the flattened rows of tables that several topics feed this way until their one
/// commit, and turns them back into the table's string columns ([`plain`]) one table at
/// a time as it writes them (BENCHMARKS.md).
pub fn flatten_compact<'a>(
    topic: &'a str,
    staged: &'a [RecordBatch],
    lineage: &Lineage,
    cfg: &FlattenConfig,
) -> Result<TablePlan> {
    flatten_with(topic, staged, lineage, cfg, LineageColumns::Dictionary)
}

/// `batch` with its dictionary columns ([`flatten_compact`]) cast to their value type:
/// the columns, types and field metadata of [`flatten`]'s batches.
pub fn plain(batch: RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Dictionary(..)))
    {
        return Ok(batch);
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Dictionary(_, value) => {
                let cast = arrow::compute::cast(column, value)
                    .map_err(|e| Error::arrow(field.name(), e))?;
                fields.push(field.as_ref().clone().with_data_type(value.as_ref().clone()));
                columns.push(cast);
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(column.clone());
            }
        }
    }
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| Error::arrow("_flattened", e))
}

fn flatten_with<'a>(
    topic: &'a str,
    staged: &'a [RecordBatch],
    lineage: &Lineage,
    cfg: &FlattenConfig,
    lineage_columns: LineageColumns,
) -> Result<TablePlan> {
    let topic_table = TableName::for_topic(topic);
    let mut f = Flattener {
        cfg,
        topic,
        tables: vec![(
            topic_table.clone(),
            TableBuilder::new(false, None, String::new()),
        )],
        by_name: HashMap::from([(topic_table, TOPIC_TABLE)]),
        files: Vec::new(),
        recorded: 0,
        member_bufs: Vec::new(),
        stamp: 0,
        id_prefixes: Vec::new(),
        lineage_columns,
        json_hints: cfg
            .column_types
            .values()
            .chain(cfg.topic_column_types.get(topic).into_iter().flat_map(|h| h.values()))
            .any(|t| *t == ColumnType::Json),
    };
    let mut nodes = Vec::new();
    for staged in staged {
        let columns = StagedColumns::of(staged)?;
        for r in 0..staged.num_rows() {
            nodes = f.staged_row(&columns, r, nodes);
        }
    }
    f.finish(lineage)
}

/// The staging columns [`flatten_with`] reads, of one staged batch.
struct StagedColumns<'a> {
    ids: &'a StringArray,
    files: &'a StringArray,
    metas: &'a StringArray,
    payloads: &'a StringArray,
    lines: &'a Int64Array,
}

impl<'a> StagedColumns<'a> {
    /// The columns of `staged`; an error names the first one missing.
    fn of(staged: &'a RecordBatch) -> Result<Self> {
        let col = |name: &str| -> Result<&'a StringArray> {
            staged
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| staging_bug(format!("staging column `{name}` missing")))
        };
        let ids = col(naming::ID)?;
        let files = col(naming::SOURCE_FILE)?;
        let metas = col(naming::META)?;
        let payloads = col(naming::PAYLOAD)?;
        let lines = staged
            .column_by_name(naming::LINE)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| staging_bug(format!("staging column `{}` missing", naming::LINE)))?;
        Ok(StagedColumns {
            ids,
            files,
            metas,
            payloads,
            lines,
        })
    }
}

fn staging_bug(reason: String) -> Error {
    Error::arrow("_staging", arrow::error::ArrowError::SchemaError(reason))
}

impl<'a> Flattener<'a, '_> {
    /// Flattens row `r` of a staged batch into the topic's table (and its child tables);
    /// `nodes` is the parse buffer, given back for the next row.
    #[inline]
    fn staged_row(&mut self, columns: &StagedColumns<'a>, r: usize, nodes: Vec<Node>) -> Vec<Node> {
        let file: &'a str = columns.files.value(r);
        let file_idx = match self.files.last() {
            Some(last) if *last == file => self.files.len() - 1,
            _ => {
                self.files.push(file);
                self.files.len() - 1
            }
        } as u32;
        let ctx = RowCtx {
            root_id: columns.ids.value(r),
            file: file_idx,
            line: columns.lines.value(r),
        };
        let row = self.new_row(TOPIC_TABLE, ctx, None);
        let nodes = if columns.metas.is_valid(r) {
            self.row_meta(row, columns.metas.value(r), nodes)
        } else {
            nodes
        };
        self.row_payload(row, ctx, columns.payloads.value(r), nodes)
    }

    /// Flattens a row's `_meta` object into its metadata columns (text that does not
    /// parse is rescued whole); gives `nodes` back.
    #[inline]
    fn row_meta(&mut self, row: u32, meta: &'a str, nodes: Vec<Node>) -> Vec<Node> {
        match Doc::parse_reusing(meta, self.cfg.max_depth + 1, nodes) {
            Ok(doc) => {
                if doc.kind(0) == Kind::Object {
                    self.meta_object(TOPIC_TABLE, row, META_ROOT, &doc, 0, 1);
                }
                doc.into_nodes()
            }
            Err((_, reused)) => {
                let text = serde_json::to_string(meta).unwrap_or_default();
                self.rescue(TOPIC_TABLE, row, naming::META.into(), text);
                reused
            }
        }
    }

    /// Flattens a row's payload into its columns and child rows; gives `nodes` back.
    #[inline]
    fn row_payload(
        &mut self,
        row: u32,
        ctx: RowCtx<'a>,
        payload: &'a str,
        nodes: Vec<Node>,
    ) -> Vec<Node> {
        let doc = match Doc::parse_reusing(payload, self.cfg.max_depth + 1, nodes) {
            Ok(doc) => doc,
            Err((e, reused)) => {
                // Staging accepted the line, so this reader should too; if they ever
                // disagree the payload is kept whole rather than lost.
                let topic = self.topic;
                tracing::warn!(topic, line = ctx.line, error = %e, "payload kept as text");
                let text = serde_json::to_string(payload).unwrap_or_default();
                self.rescue(TOPIC_TABLE, row, String::new(), text);
                return reused;
            }
        };
        if doc.kind(0) == Kind::Object {
            self.object(TOPIC_TABLE, row, ROOT, &doc, 0, ctx);
        } else {
            self.value(TOPIC_TABLE, row, ROOT, &doc, 0, ctx);
        }
        doc.into_nodes()
    }

    /// A new row of table `t`; `parent` is `(id prefix, parent id length, index)` for a
    /// child row ([`ChildIds::push`]), the prefix being the one its siblings share.
    fn new_row(&mut self, t: usize, ctx: RowCtx<'a>, parent: Option<(&str, u32, usize)>) -> u32 {
        let b = &mut self.tables[t].1;
        let row = b.root_ids.len() as u32;
        self.recorded += 1;
        b.root_ids.push(ctx.root_id);
        if let Some((prefix, parent_len, idx)) = parent {
            b.ids.push(prefix, parent_len, idx);
            b.idx.push(idx as i64);
        }
        b.files.push(ctx.file);
        b.lines.push(ctx.line);
        row
    }

    /// Writes into `prefix` what the `_id`s of the elements of the array at JSON pointer
    /// `pointer` below `row` of table `t` share (all but their index): the row's `_id` (a
    /// topic row's escaped, [`ChildIds`]), the pointer and `/`. Gives the length of the
    /// row's `_id` in it, 0 for a topic row (its children's `_parent_id` is the message id).
    fn id_prefix(&self, t: usize, row: u32, pointer: &str, prefix: &mut String) -> u32 {
        prefix.clear();
        let parent = &self.tables[t].1;
        let parent_len = if parent.is_child {
            prefix.push_str(parent.ids.id(row as usize));
            // An id is a path in one line of text: far below 4 GiB.
            prefix.len() as u32
        } else {
            push_token(prefix, parent.root_ids[row as usize]);
            0
        };
        prefix.push_str(pointer);
        prefix.push('/');
        parent_len
    }

    /// Records `cell` (if not null) in column `c` of table `t`.
    fn set(&mut self, t: usize, row: u32, c: usize, cell: Option<Cell<'a>>) {
        if let Some(cell) = cell {
            self.tables[t].1.columns[c].cells.push((row, cell));
            self.recorded += 1;
        }
    }

    fn rescue(&mut self, t: usize, row: u32, key: String, json: String) {
        self.tables[t].1.rescued.push((row, key, json));
        self.recorded += 1;
    }

    /// Members of object `obj` whose row is at trie `node` of table `t`, each with the
    /// trie node of its key ([`Member`]).
    fn members(&mut self, t: usize, node: u32, doc: &Doc<'a>, obj: usize) -> Vec<Member> {
        let mut members = self.member_bufs.pop().unwrap_or_default();
        // A key repeated in the object finds the node its first occurrence marked with
        // this object's stamp. A stamp that wrapped around to an older object's only costs
        // the exact check below.
        self.stamp = self.stamp.wrapping_add(1);
        let stamp = self.stamp;
        let table = &mut self.tables[t].1;
        let mut hint = 0;
        let mut repeats = false;
        for (k, v) in doc.members(obj) {
            let n = table.child_node(node, &doc.str(k), &mut hint);
            let seen = &mut table.nodes[n as usize].stamp;
            repeats |= *seen == stamp;
            *seen = stamp;
            members.push(Member {
                key: k as u32,
                value: v as u32,
                node: n,
                is_last: true,
            });
        }
        if repeats {
            for i in 0..members.len() {
                members[i].is_last = members[i + 1..].iter().all(|m| m.node != members[i].node);
            }
        }
        members
    }

    /// `dup:<pointer>` for a repeated key `k` below `node` of table `t`, a path
    /// `within` the payload or the metadata.
    fn dup_key(&self, t: usize, node: u32, k: &str, within: Within) -> String {
        let keys = self.tables[t].1.keys(node);
        format!(
            "dup:{}{}",
            match within {
                Within::Meta => naming::META,
                Within::Payload => "",
            },
            pointer(&keys, Some(k))
        )
    }

    fn meta_object(
        &mut self,
        t: usize,
        row: u32,
        node: u32,
        doc: &Doc<'a>,
        obj: usize,
        depth: usize,
    ) {
        let mut members = self.members(t, node, doc, obj);
        for m in members.drain(..) {
            let (v, n) = (m.value as usize, m.node);
            if !m.is_last {
                let key = self.dup_key(t, node, &doc.str(m.key as usize), Within::Meta);
                self.rescue(t, row, key, doc.raw(v).to_string());
                continue;
            }
            if doc.kind(v) == Kind::Object && !doc.is_empty(v) && depth < self.cfg.max_depth {
                self.meta_object(t, row, n, doc, v, depth + 1);
            } else {
                let c = self.tables[t].1.column(n, Within::Meta);
                self.set(t, row, c, leaf(doc, v));
            }
        }
        self.member_bufs.push(members);
    }

    fn object(
        &mut self,
        t: usize,
        row: u32,
        node: u32,
        doc: &Doc<'a>,
        obj: usize,
        ctx: RowCtx<'a>,
    ) {
        let mut members = self.members(t, node, doc, obj);
        for m in members.drain(..) {
            let v = m.value as usize;
            if m.is_last {
                self.value(t, row, m.node, doc, v, ctx);
            } else {
                let key = self.dup_key(t, node, &doc.str(m.key as usize), Within::Payload);
                self.rescue(t, row, key, doc.raw(v).to_string());
            }
        }
        self.member_bufs.push(members);
    }

    /// Flattens value `v` found at trie `node` of table `t` into `row`.
    fn value(&mut self, t: usize, row: u32, node: u32, doc: &Doc<'a>, v: usize, ctx: RowCtx<'a>) {
        match doc.kind(v) {
            Kind::Object | Kind::Array if self.json_hints && self.keeps_json(t, node) => {
                let c = self.tables[t].1.column(node, Within::Payload);
                self.set(t, row, c, Some(Cell::Json(doc.raw(v))));
            }
            Kind::Object if !doc.is_empty(v) => self.object(t, row, node, doc, v, ctx),
            Kind::Array if !doc.is_empty(v) => self.array(t, row, node, doc, v, ctx),
            _ => {
                let c = self.tables[t].1.column(node, Within::Payload);
                self.set(t, row, c, leaf(doc, v));
            }
        }
    }

    /// Whether a `json` hint keeps the value at trie `node` of table `t` whole (as its
    /// JSON text); looked up once per path.
    fn keeps_json(&mut self, t: usize, node: u32) -> bool {
        if let Some(keep) = self.tables[t].1.nodes[node as usize].keep_json {
            return keep;
        }
        let table = &self.tables[t].1;
        let path = pointer(&table.keys(node), None);
        let keep = matches!(
            Typing::of(self.cfg, self.topic, &table.bases, &path),
            Typing::Hinted(ColumnType::Json, _)
        );
        self.tables[t].1.nodes[node as usize].keep_json = Some(keep);
        keep
    }

    /// The child table for the array at trie `node` of a row of table `t`, and the
    /// array's JSON pointer from the row; resolved once per (table, path).
    fn child_table(&mut self, t: usize, node: u32) -> (usize, Rc<str>) {
        if let Some((c, pointer)) = &self.tables[t].1.nodes[node as usize].child_table {
            return (*c, Rc::clone(pointer));
        }
        let (parent_name, parent) = &self.tables[t];
        let keys: Vec<String> = parent.keys(node).into_iter().map(String::from).collect();
        let joined = keys.join(".");
        let origin: Rc<str> = match &parent.origin {
            None => joined.into(),
            Some(p) => format!("{p}[].{joined}").into(),
        };
        let topic_table = &self.tables[TOPIC_TABLE].0;
        let name = if let Some(mapped) = self.cfg.mapped_child(&origin) {
            TableName::for_child(&[mapped.to_string()])
        } else {
            let mut parts: Vec<String> = Vec::with_capacity(keys.len() + 1);
            if t != TOPIC_TABLE || self.cfg.child_naming == ChildNaming::Topic {
                parts.push(parent_name.as_str().to_string());
            }
            parts.extend(keys.iter().cloned());
            TableName::for_child(&parts)
        };
        // A child named like its own topic's table (topic `c__levels` with an array
        // `` `levels ``, or a mapping onto it) would mix the topic's rows with its child
        // rows: it is qualified by the topic table instead (stable: a function of the
        // topic and the path only).
        let name = if name == *topic_table {
            let mut parts = vec![topic_table.as_str().to_string()];
            parts.extend(keys.iter().cloned());
            match TableName::for_child(&parts) {
                n if n == *topic_table => {
                    parts.push("child".to_string());
                    TableName::for_child(&parts)
                }
                n => n,
            }
        } else {
            name
        };
        // The first array path to create a child table names its own children; a hint
        // types its columns through any array path that feeds it (`bases`).
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let from_row: Rc<str> = pointer(&keys, None).into();
        let base = format!("{}{from_row}/*", self.tables[t].1.base);
        let c = match self.by_name.get(&name) {
            Some(&c) => {
                self.tables[c].1.fed_from(base);
                c
            }
            None => {
                let c = self.tables.len();
                self.by_name.insert(name.clone(), c);
                let child = TableBuilder::new(true, Some(Rc::clone(&origin)), base);
                self.tables.push((name, child));
                c
            }
        };
        self.tables[t].1.nodes[node as usize].child_table = Some((c, Rc::clone(&from_row)));
        (c, from_row)
    }

    fn array(&mut self, t: usize, row: u32, node: u32, doc: &Doc<'a>, arr: usize, ctx: RowCtx<'a>) {
        let (child, pointer) = self.child_table(t, node);
        // A `json` hint on the elements (`/arr/*`) keeps each whole in `value`.
        let all_objects = doc.elements(arr).all(|e| doc.kind(e) == Kind::Object)
            && !(self.json_hints && self.keeps_json(child, ROOT));
        // One buffer per nesting level in use, reused: an element's own arrays take
        // another while this one is held.
        let mut prefix = self.id_prefixes.pop().unwrap_or_default();
        let parent_len = self.id_prefix(t, row, &pointer, &mut prefix);
        for (i, elem) in doc.elements(arr).enumerate() {
            let child_row = self.new_row(child, ctx, Some((&prefix, parent_len, i)));
            if all_objects {
                let before = self.recorded;
                self.object(child, child_row, ROOT, doc, elem, ctx);
                if self.recorded == before {
                    // `{}` (or only nulls): a row with no values would read back as a
                    // null element, so it says `{}` in `value`.
                    let c = self.tables[child].1.column(ROOT, Within::Payload);
                    self.set(child, child_row, c, Some(Cell::Json("{}")));
                }
            } else {
                // Scalars as they are; objects and arrays as their JSON text.
                let c = self.tables[child].1.column(ROOT, Within::Payload);
                self.set(child, child_row, c, leaf(doc, elem));
            }
        }
        self.id_prefixes.push(prefix);
    }

    fn finish(self, lineage: &Lineage) -> Result<TablePlan> {
        let mut plan = TablePlan::default();
        let rows = self.tables.iter().map(|(_, t)| t.root_ids.len()).max().unwrap_or(0);
        let strings = LineageStrings::new(lineage, &self.files, self.lineage_columns, rows);
        for (name, t) in self.tables {
            if t.root_ids.is_empty() {
                continue;
            }
            let batch = build_batch(&name, t, self.topic, &strings, self.cfg)?;
            plan.tables.insert(name, batch);
        }
        Ok(plan)
    }
}

/// A scalar, or the JSON text of a container kept whole (empty, or beyond the depth).
fn leaf<'a>(doc: &Doc<'a>, v: usize) -> Option<Cell<'a>> {
    match doc.kind(v) {
        Kind::Null => None,
        Kind::Bool(b) => Some(Cell::Bool(b)),
        Kind::Num(class) => Some(Cell::Num(doc.raw(v), class)),
        Kind::Str { escaped } => Some(Cell::Str(doc.raw(v), escaped)),
        Kind::Object | Kind::Array | Kind::Raw => Some(Cell::Json(doc.raw(v))),
    }
}

/// The Arrow type of a `_loaded_at` column.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// A data column's field: its name, type, original path and JSON marker.
pub(crate) fn data_field(name: &str, dt: DataType, path: &str, json: bool) -> Field {
    let mut meta = std::collections::HashMap::from([(PATH_META.to_string(), path.to_string())]);
    if json {
        meta.insert(JSON_META.to_string(), "true".to_string());
    }
    Field::new(name, dt, true).with_metadata(meta)
}

/// Builds the `_rescued_data` column: per row, a JSON object of the entries for it.
/// Entries of one key are collected in order; `dup:` keys always hold an array.
pub(crate) fn rescued_column(n: usize, mut entries: Vec<(u32, String, String)>) -> ArrayRef {
    entries.sort_by_key(|e| e.0);
    let mut b = StringBuilder::new();
    let mut it = entries.into_iter().peekable();
    for row in 0..n as u32 {
        let mut obj: BTreeMap<String, Vec<String>> = BTreeMap::new();
        while let Some(e) = it.next_if(|e| e.0 == row) {
            obj.entry(e.1).or_default().push(e.2);
        }
        if obj.is_empty() {
            b.append_null();
            continue;
        }
        let mut s = String::from("{");
        for (i, (k, vals)) in obj.into_iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&serde_json::to_string(&k).unwrap_or_default());
            s.push(':');
            if k.starts_with("dup:") || vals.len() > 1 {
                s.push('[');
                s.push_str(&vals.join(","));
                s.push(']');
            } else {
                s.push_str(&vals[0]);
            }
        }
        s.push('}');
        b.append_value(s);
    }
    Arc::new(b.finish())
}

/// How the lineage columns whose values repeat are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineageColumns {
    /// As string columns, the values copied ([`flatten`]).
    Plain,
    /// As Arrow dictionaries ([`flatten_compact`]).
    Dictionary,
}

/// The lineage a batch's rows repeat: the run's, and the files the topic's rows came
/// from; built as `columns` says.
///
/// Built once per flatten and shared by its tables: the dictionaries' values
/// (`_source_file`, `_landing_path`: one entry per file, hundreds of kilobytes on a batch
/// of thousands of files) and the buffers of the columns every row repeats (a constant's
/// zero keys, `_loaded_at`), which each table slices. The flattened rows of the tables
/// several topics feed wait for their one commit ([`flatten_compact`]); built per table,
/// these copies were a quarter of the historical batch's peak heap (BENCHMARKS.md).
struct LineageStrings<'l> {
    lineage: &'l Lineage,
    columns: LineageColumns,
    /// The files' `_source_file` values, in [`Flattener::files`] order.
    files: Arc<StringArray>,
    /// The files' `_landing_path` values, in the same order.
    landing: Arc<StringArray>,
    /// Zero keys, as many as the largest table has rows.
    zeros: ScalarBuffer<i32>,
    /// `_loaded_at` of as many rows.
    loaded_at: ScalarBuffer<i64>,
}

impl<'l> LineageStrings<'l> {
    /// The shared values of tables of up to `rows` rows whose rows came from `files`.
    fn new(lineage: &'l Lineage, files: &[&str], columns: LineageColumns, rows: usize) -> Self {
        let names = StringArray::from_iter_values(files.iter());
        let landing = StringArray::from_iter(files.iter().map(|f| lineage.landing_path_of(f)));
        LineageStrings {
            lineage,
            columns,
            files: Arc::new(names),
            landing: Arc::new(landing),
            zeros: ScalarBuffer::from(vec![0; rows]),
            loaded_at: ScalarBuffer::from(vec![lineage.loaded_at_micros; rows]),
        }
    }

    /// A string column of `keys.len()` rows, row `i` being `values[keys[i]]`: a
    /// dictionary for [`LineageColumns::Dictionary`], else the values copied.
    fn column(&self, values: &Arc<StringArray>, keys: &[u32]) -> (DataType, ArrayRef) {
        if self.columns == LineageColumns::Dictionary {
            let keys = Int32Array::from_iter_values(keys.iter().map(|&k| k as i32));
            let values: ArrayRef = Arc::clone(values) as ArrayRef;
            let array = DictionaryArray::<Int32Type>::new(keys, values);
            (array.data_type().clone(), Arc::new(array))
        } else {
            let value = |k: u32| values.is_valid(k as usize).then(|| values.value(k as usize));
            let array = StringArray::from_iter(keys.iter().map(|&k| value(k)));
            (DataType::Utf8, Arc::new(array))
        }
    }

    /// `_source_file` of rows from the files `keys` index.
    fn files(&self, keys: &[u32]) -> (DataType, ArrayRef) {
        self.column(&self.files, keys)
    }

    /// `_landing_path` of rows from the files `keys` index.
    fn landing(&self, keys: &[u32]) -> (DataType, ArrayRef) {
        self.column(&self.landing, keys)
    }

    /// A string column of `values` (UTF-8: [`utf8_column`]); for
    /// [`LineageColumns::Dictionary`], a dictionary of its runs of equal values (a child
    /// row's parent and root ids repeat for its siblings).
    fn runs<'v>(
        &self,
        column: &str,
        values: impl ExactSizeIterator<Item = &'v [u8]>,
    ) -> Result<(DataType, ArrayRef)> {
        if self.columns == LineageColumns::Plain {
            return Ok((DataType::Utf8, Arc::new(utf8_column(column, values)?)));
        }
        let mut keys = Vec::with_capacity(values.len());
        let mut distinct: Vec<&[u8]> = Vec::new();
        for v in values {
            if distinct.last() != Some(&v) {
                distinct.push(v);
            }
            keys.push(distinct.len() as i32 - 1);
        }
        let values = utf8_column(column, distinct.into_iter())?;
        Ok(dictionary(Int32Array::from(keys), values))
    }

    /// A column of `n` rows of `value`.
    fn constant(&self, value: &str, n: usize) -> (DataType, ArrayRef) {
        if self.columns == LineageColumns::Dictionary {
            let keys = Int32Array::new(self.zeros.slice(0, n), None);
            dictionary(keys, StringArray::from(vec![value]))
        } else {
            (DataType::Utf8, Arc::new(StringArray::from(vec![value; n])))
        }
    }

    /// `_loaded_at` of `n` rows.
    fn loaded_at(&self, n: usize) -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::new(self.loaded_at.slice(0, n), None).with_timezone("UTC"))
    }
}

fn dictionary(keys: Int32Array, values: StringArray) -> (DataType, ArrayRef) {
    let array = DictionaryArray::<Int32Type>::new(keys, Arc::new(values));
    (array.data_type().clone(), Arc::new(array))
}

fn build_batch(
    name: &TableName,
    t: TableBuilder<'_>,
    topic: &str,
    strings: &LineageStrings<'_>,
    cfg: &FlattenConfig,
) -> Result<RecordBatch> {
    let n = t.root_ids.len();
    let lineage = strings.lineage;
    let mut fields = vec![Field::new(naming::ID, DataType::Utf8, false)];
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(t.columns.len() + 12);
    if t.is_child {
        let (ids, roots) = (&t.ids, &t.root_ids);
        let parent_ids = (0..n).map(|r| ids.parent_id(r, roots[r]).as_bytes());
        let parents = strings.runs(naming::PARENT_ID, parent_ids)?;
        let roots = strings.runs(naming::ROOT_ID, t.root_ids.iter().map(|r| r.as_bytes()))?;
        arrays.push(Arc::new(t.ids.into_column()?));
        for (name, (dt, array)) in [(naming::PARENT_ID, parents), (naming::ROOT_ID, roots)] {
            fields.push(Field::new(name, dt, true));
            arrays.push(array);
        }
        fields.push(Field::new(naming::IDX, DataType::Int64, true));
        arrays.push(Arc::new(Int64Array::from(t.idx)));
    } else {
        let ids = t.root_ids.iter().map(|r| r.as_bytes());
        arrays.push(Arc::new(utf8_column(naming::ID, ids)?));
    }
    let mut push = |name: &str, nullable: bool, (dt, array): (DataType, ArrayRef)| {
        fields.push(Field::new(name, dt, nullable));
        arrays.push(array);
    };
    push(naming::BATCH_ID, false, strings.constant(lineage.key.batch_id.as_str(), n));
    push(LANDING_PATH, true, strings.landing(&t.files));
    push(naming::TOPIC, false, strings.constant(topic, n));
    push(naming::SOURCE_FILE, false, strings.files(&t.files));
    fields.push(Field::new(naming::LINE, DataType::Int64, false));
    arrays.push(Arc::new(Int64Array::from(t.lines)));
    fields.push(Field::new(naming::LOADED_AT, timestamp_type(), false));
    arrays.push(strings.loaded_at(n));
    let mut rescued = t.rescued;
    let before = rescued.len();
    let names = t.namer.into_names();
    let (data_fields, data) = data_columns(names, (t.columns, n), (topic, &t.bases), cfg, &mut rescued);
    fields.extend(data_fields);
    arrays.extend(data);
    let mut meta = std::collections::HashMap::new();
    if rescued.len() > before {
        meta.insert(RESCUED_META.to_string(), (rescued.len() - before).to_string());
    }
    if !rescued.is_empty() {
        fields.push(Field::new(RESCUED, DataType::Utf8, true));
        arrays.push(rescued_column(n, rescued));
    }
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, meta)), arrays)
        .map_err(|e| Error::arrow(name.as_str(), e))
}

/// The `n` rows' data columns of a table whose rows are at `bases` in `topic`'s payloads:
/// each typed as its hint says (the values it rescues appended to `rescued`) or inferred.
fn data_columns(
    names: Vec<(String, String)>,
    (columns, n): (Vec<Column<'_>>, usize),
    (topic, bases): (&str, &[String]),
    cfg: &FlattenConfig,
    rescued: &mut Vec<(u32, String, String)>,
) -> (Vec<Field>, Vec<ArrayRef>) {
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    let mut sources = Vec::new();
    let rescue_new = cfg.evolution_for(topic) == crate::config::Evolution::Rescue;
    for ((col_name, path), column) in names.into_iter().zip(columns) {
        let typing = Typing::of(cfg, topic, bases, &path);
        let (dt, json, array) = match typing {
            Typing::Hinted(ty, _) if rescue_new && ty != ColumnType::Json => {
                let cells = column.cells.clone();
                let typed = hinted::column(column, n, ty, &path, rescued);
                sources.push(hinted::source_column(&col_name, &cells, n, &typed.2));
                typed
            }
            Typing::Hinted(ty, _) => hinted::column(column, n, ty, &path, rescued),
            _ => build_column(column, n, cfg.types),
        };
        let mut field = data_field(&col_name, dt, &path, json);
        typing.mark(&mut field);
        fields.push(field);
        arrays.push(array);
    }
    for (field, array) in sources {
        fields.push(field);
        arrays.push(array);
    }
    (fields, arrays)
}

/// How a data column gets its type: as [`TypesMode`] says, from a hint, or detected
/// when it is all strings ([`crate::table::fit`]).
enum Typing {
    Inferred,
    /// The type hinted and the column's full pointer in the payload.
    Hinted(ColumnType, String),
    /// The types detection tries.
    Detect(String),
}

impl Typing {
    /// The typing of the column at `path` of a table whose rows are at `bases` in
    /// `topic`'s payloads: the hint of the first base that has one for it.
    fn of(cfg: &FlattenConfig, topic: &str, bases: &[String], path: &str) -> Typing {
        if !(path.is_empty() || path.starts_with('/')) {
            // Envelope metadata (`_meta/…`): never hinted.
            return Typing::Inferred;
        }
        for base in bases {
            let full = format!("{base}{path}");
            // A type built in code that no hint's text names (`validate` refuses it for a
            // run) is no hint.
            if let Some(ty) = cfg.column_type(topic, &full).filter(|t| t.is_valid()) {
                return Typing::Hinted(ty, full);
            }
        }
        if cfg.detect_types.is_empty() || cfg.types == TypesMode::Strings {
            return Typing::Inferred;
        }
        let kinds: Vec<&str> = cfg
            .detect_types
            .iter()
            .map(|d| match d {
                DetectType::Timestamp => "timestamp",
                DetectType::Date => "date",
            })
            .collect();
        Typing::Detect(kinds.join(","))
    }

    /// Marks `field` with its hint (its full pointer) or the types to detect, for
    /// [`crate::table::fit::to_table`], which reads and drops the marks.
    fn mark(self, field: &mut Field) {
        let (key, value) = match self {
            Typing::Inferred => return,
            Typing::Hinted(_, full) => (HINT_META, full),
            Typing::Detect(_) if *field.data_type() != DataType::Utf8 => return,
            Typing::Detect(_) if field.metadata().contains_key(JSON_META) => return,
            Typing::Detect(kinds) => (DETECT_META, kinds),
        };
        let mut meta = field.metadata().clone();
        meta.insert(key.to_string(), value);
        field.set_metadata(meta);
    }
}

/// Largest integer magnitude an `f64` holds exactly (2^53).
pub(crate) const F64_EXACT_INT: i64 = 1 << 53;

/// `(type, is JSON text, values)` of one column, by the rules of [`TypesMode`].
fn build_column(col: Column<'_>, n: usize, types: TypesMode) -> (DataType, bool, ArrayRef) {
    let counts = CellCounts::of(&col.cells);
    let total = col.cells.len();
    if types == TypesMode::Strings {
        let b = fill_strings(n, &col.cells, |c| c.text());
        return (DataType::Utf8, false, Arc::new(b));
    }
    if total > 0 && counts.bools == total {
        (DataType::Boolean, false, bool_column(n, &col.cells))
    } else if total > 0 && counts.ints == total {
        (DataType::Int64, false, int_column(n, &col.cells))
    } else if total > 0 && counts.ints + counts.floats == total && counts.wide_ints == 0 {
        (DataType::Float64, false, float_column(n, &col.cells))
    } else if counts.strs == total {
        // All strings, or no value at all: a string column.
        let b = fill_strings(n, &col.cells, |c| c.text());
        (DataType::Utf8, false, Arc::new(b))
    } else {
        // Any other mix, or numbers an int64/float64 would not hold: JSON text, so every
        // value (and its type) survives.
        let b = fill_strings(n, &col.cells, |c| c.json());
        (DataType::Utf8, true, Arc::new(b))
    }
}

/// How many cells of a column hold each kind of value.
#[derive(Default)]
struct CellCounts {
    bools: usize,
    ints: usize,
    floats: usize,
    strs: usize,
    /// Integers a float64 does not hold exactly.
    wide_ints: usize,
}

impl CellCounts {
    /// The counts of `cells`.
    fn of(cells: &[(u32, Cell<'_>)]) -> Self {
        let mut counts = CellCounts::default();
        for (_, c) in cells {
            match c {
                Cell::Bool(_) => counts.bools += 1,
                Cell::Num(s, NumClass::Int) => {
                    counts.ints += 1;
                    // 15 digits stay below 2^53 (9.007e15).
                    let digits = s.len() - usize::from(s.starts_with('-'));
                    if digits > 15
                        && s.parse::<i64>().is_ok_and(|v| v.unsigned_abs() > F64_EXACT_INT.unsigned_abs())
                    {
                        counts.wide_ints += 1;
                    }
                }
                Cell::Num(_, NumClass::Float) => counts.floats += 1,
                Cell::Str(..) => counts.strs += 1,
                Cell::Num(_, NumClass::Big) | Cell::Json(_) => {}
            }
        }
        counts
    }
}

/// A boolean column of `n` rows from `cells` (every one a boolean).
fn bool_column(n: usize, cells: &[(u32, Cell<'_>)]) -> ArrayRef {
    let mut b = BooleanBuilder::with_capacity(n);
    fill(
        &mut b,
        n,
        cells,
        |b, c| match c {
            Cell::Bool(v) => b.append_value(v),
            _ => b.append_null(),
        },
        |b| b.append_null(),
    );
    Arc::new(b.finish())
}

/// An int64 column of `n` rows from `cells` (every one an integer).
fn int_column(n: usize, cells: &[(u32, Cell<'_>)]) -> ArrayRef {
    let mut b = Int64Builder::with_capacity(n);
    fill(
        &mut b,
        n,
        cells,
        |b, c| match c {
            Cell::Num(s, _) => b.append_option(s.parse::<i64>().ok()),
            _ => b.append_null(),
        },
        |b| b.append_null(),
    );
    Arc::new(b.finish())
}

/// A float64 column of `n` rows from `cells` (every one a number a float64 holds).
fn float_column(n: usize, cells: &[(u32, Cell<'_>)]) -> ArrayRef {
    let mut b = Float64Builder::with_capacity(n);
    fill(
        &mut b,
        n,
        cells,
        |b, c| match c {
            Cell::Num(s, _) => b.append_option(s.parse::<f64>().ok()),
            _ => b.append_null(),
        },
        |b| b.append_null(),
    );
    Arc::new(b.finish())
}

/// A string column of `n` rows from `cells`, each value as `text` gives it.
fn fill_strings<'a>(
    n: usize,
    cells: &[(u32, Cell<'a>)],
    text: impl Fn(Cell<'a>) -> Cow<'a, str>,
) -> StringArray {
    let bytes: usize = cells.iter().map(|(_, c)| c.json().len()).sum();
    let mut b = StringColumn::with_capacity(n, bytes);
    fill(
        &mut b,
        n,
        cells,
        |b, c| b.push(&text(c)),
        StringColumn::push_null,
    );
    b.finish()
}

/// A string column built value by value: offsets, text and validity written directly
/// (an Arrow builder costs more per value). Panics past 2 GiB of text, as Arrow's do.
struct StringColumn {
    offsets: Vec<i32>,
    text: String,
    nulls: NullBufferBuilder,
}

impl StringColumn {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        StringColumn {
            offsets,
            text: String::with_capacity(bytes),
            nulls: NullBufferBuilder::new(rows),
        }
    }

    #[inline(always)]
    fn end(&mut self) {
        let end = i32::try_from(self.text.len()).expect("byte array offset overflow");
        self.offsets.push(end);
    }

    #[inline(always)]
    fn push(&mut self, value: &str) {
        self.text.push_str(value);
        self.end();
        self.nulls.append_non_null();
    }

    #[inline(always)]
    fn push_null(&mut self) {
        self.end();
        self.nulls.append_null();
    }

    fn finish(mut self) -> StringArray {
        let nulls = self.nulls.finish();
        string_array(self.offsets, self.text, nulls)
    }
}

/// The string column of `text` cut at `offsets`, which must be the lengths of `text` after
/// each whole `&str` appended to it (0 first, a null's value being empty); `nulls` as its
/// validity.
#[allow(unsafe_code)]
fn string_array(offsets: Vec<i32>, text: String, nulls: Option<NullBuffer>) -> StringArray {
    let offsets = OffsetBuffer::new(offsets.into());
    // SAFETY: the values are one `String` (valid UTF-8) and the offsets, as required
    // above, are char boundaries of it, never decreasing, from 0 to its length: what
    // `StringArray::new` would check. Checked in debug builds (every test) below.
    let array = unsafe { StringArray::new_unchecked(offsets, text.into_bytes().into(), nulls) };
    debug_assert!(array.to_data().validate_full().is_ok());
    array
}

/// Cells ahead of the one being appended whose text is prefetched. A column's values lie
/// a payload apart in the staged text (hundreds of bytes), so once a run of rows has been
/// parsed each value is a cache miss the hardware prefetcher cannot predict; asking for
/// the text a few cells early overlaps the misses (BENCHMARKS.md, "Per stage").
const PREFETCH_AHEAD: usize = 16;

/// A hint to load the cache line at `p`.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and reads nothing the program
    // observes, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn fill<'a, B>(
    b: &mut B,
    n: usize,
    cells: &[(u32, Cell<'a>)],
    mut put: impl FnMut(&mut B, Cell<'a>),
    mut null: impl FnMut(&mut B),
) {
    let mut next = 0usize;
    for (i, &(row, cell)) in cells.iter().enumerate() {
        if let Some(&(_, ahead)) = cells.get(i + PREFETCH_AHEAD) {
            ahead.prefetch();
        }
        while next < row as usize {
            null(b);
            next += 1;
        }
        put(b, cell);
        next += 1;
    }
    while next < n {
        null(b);
        next += 1;
    }
}

#[cfg(test)]
mod roundtrip;
#[cfg(test)]
mod tests;
