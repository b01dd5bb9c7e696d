//! The walk over one topic's staged rows: each message's metadata and payload, object by
//! object and array by array, into the rows and cells of the topic's table and its child
//! tables.

use std::collections::HashMap;
use std::rc::Rc;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};

use super::builder::{META_ROOT, ROOT, TableBuilder, Whole, Within, pointer};
use super::columns::{Typing, build_batch};
use super::ids::push_token;
use super::lineage::{Lineage, LineageColumns, LineageStrings};
use super::{Cell, TablePlan, variant};
use crate::column_types::ColumnType;
use crate::config::{ChildNaming, FlattenConfig, PayloadMode};
use crate::error::{Error, Result};
use crate::json::{Doc, Kind, Node};
use crate::naming::{self, TableName};

/// Where a value being flattened goes: a row of one of the target tables, at a node of
/// that table's path trie.
#[derive(Clone, Copy)]
struct Place {
    /// The table, its index in [`Flattener::tables`].
    table: usize,
    row: u32,
    node: u32,
}

impl Place {
    /// `row` of the topic's own table, at `node`.
    fn topic_row(row: u32, node: u32) -> Place {
        Place {
            table: TOPIC_TABLE,
            row,
            node,
        }
    }

    /// The same row, at `node` (below this place's).
    fn below(self, node: u32) -> Place {
        Place { node, ..self }
    }
}

/// Where the row being flattened came from.
#[derive(Clone, Copy)]
struct RowCtx<'a> {
    root_id: &'a str,
    file: u32,
    line: i64,
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
    /// The stamp of the object whose members are being resolved ([`super::builder::PathNode::stamp`]).
    stamp: u32,
    /// Child id prefixes reused across arrays (one per nesting level in use).
    id_prefixes: Vec<String>,
    /// How the lineage columns are built.
    lineage_columns: LineageColumns,
    /// Whether a `json` or `variant` hint applies to this topic (values are then looked
    /// up before they are flattened).
    whole_hints: bool,
    /// Whether the topic's payloads are kept whole ([`PayloadMode::Variant`]).
    whole_payload: bool,
    /// Encodes the values kept whole as Variants.
    encoder: variant::Encoder,
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

/// Index of the topic's own table in [`Flattener::tables`].
const TOPIC_TABLE: usize = 0;

pub(super) fn flatten_with<'a>(
    topic: &'a str,
    staged: &'a [RecordBatch],
    lineage: &Lineage,
    cfg: &FlattenConfig,
    lineage_columns: LineageColumns,
) -> Result<TablePlan> {
    let topic_table = TableName::for_topic(topic);
    let whole_payload = cfg.payload_for(topic) == PayloadMode::Variant;
    let mut topic_builder = TableBuilder::new(false, None, String::new());
    if whole_payload {
        // The payload's root is hinted `variant` (`FlattenConfig::column_type`); its
        // column is named for what it holds.
        topic_builder.name_root(naming::VARIANT_PAYLOAD);
    }
    let mut f = Flattener {
        cfg,
        topic,
        tables: vec![(topic_table.clone(), topic_builder)],
        by_name: HashMap::from([(topic_table, TOPIC_TABLE)]),
        files: Vec::new(),
        recorded: 0,
        member_bufs: Vec::new(),
        stamp: 0,
        id_prefixes: Vec::new(),
        lineage_columns,
        whole_hints: whole_payload
            || cfg
                .column_types
                .values()
                .chain(cfg.topic_column_types.get(topic).into_iter().flat_map(|h| h.values()))
                .any(|t| matches!(t, ColumnType::Json | ColumnType::Variant)),
        whole_payload,
        encoder: variant::Encoder::default(),
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
                    self.meta_object(Place::topic_row(row, META_ROOT), &doc, 0, 1);
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
        // A payload kept whole is parsed as deep as a Variant goes, not only as deep as
        // flattening does: nothing parsed twice.
        let depth = match self.whole_payload {
            true => variant::MAX_DEPTH + 1,
            false => self.cfg.max_depth + 1,
        };
        let doc = match Doc::parse_reusing(payload, depth, nodes) {
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
        if doc.kind(0) == Kind::Object && !self.whole_payload {
            self.object(Place::topic_row(row, ROOT), &doc, 0, ctx);
        } else {
            // A scalar or array payload, or one kept whole (its root hinted `variant`).
            self.value(Place::topic_row(row, ROOT), &doc, 0, ctx);
        }
        doc.into_nodes()
    }

    /// A new row of table `t`; `parent` is `(id prefix, parent id length, index)` for a
    /// child row ([`super::ids::ChildIds::push`]), the prefix being the one its siblings share.
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
    /// topic row's escaped, [`super::ids::ChildIds`]), the pointer and `/`. Gives the length of the
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

    /// Flattens the metadata object `obj` found at `at` into its row, objects down to
    /// the maximum depth (`depth` is `obj`'s).
    fn meta_object(&mut self, at: Place, doc: &Doc<'a>, obj: usize, depth: usize) {
        let Place { table: t, row, node } = at;
        let mut members = self.members(t, node, doc, obj);
        for m in members.drain(..) {
            let (v, n) = (m.value as usize, m.node);
            if !m.is_last {
                let key = self.dup_key(t, node, &doc.str(m.key as usize), Within::Meta);
                self.rescue(t, row, key, doc.raw(v).to_string());
                continue;
            }
            if doc.kind(v) == Kind::Object && !doc.is_empty(v) && depth < self.cfg.max_depth {
                self.meta_object(at.below(n), doc, v, depth + 1);
            } else {
                let c = self.tables[t].1.column(n, Within::Meta);
                self.set(t, row, c, leaf(doc, v));
            }
        }
        self.member_bufs.push(members);
    }

    /// Flattens object `obj` found at `at` into its row (a repeated key's earlier values
    /// rescued).
    fn object(&mut self, at: Place, doc: &Doc<'a>, obj: usize, ctx: RowCtx<'a>) {
        let Place { table: t, row, node } = at;
        let mut members = self.members(t, node, doc, obj);
        for m in members.drain(..) {
            let v = m.value as usize;
            if m.is_last {
                self.value(at.below(m.node), doc, v, ctx);
            } else {
                let key = self.dup_key(t, node, &doc.str(m.key as usize), Within::Payload);
                self.rescue(t, row, key, doc.raw(v).to_string());
            }
        }
        self.member_bufs.push(members);
    }

    /// Flattens value `v` found at `at` into its row.
    fn value(&mut self, at: Place, doc: &Doc<'a>, v: usize, ctx: RowCtx<'a>) {
        let Place { table: t, row, node } = at;
        let whole = match self.whole_hints {
            true => self.kept_whole(t, node),
            false => Whole::No,
        };
        match doc.kind(v) {
            _ if whole == Whole::Variant => self.variant(at, doc, v),
            Kind::Object | Kind::Array if whole == Whole::Json => {
                let c = self.tables[t].1.column(node, Within::Payload);
                self.set(t, row, c, Some(Cell::Json(doc.raw(v))));
            }
            Kind::Object if !doc.is_empty(v) => self.object(at, doc, v, ctx),
            Kind::Array if !doc.is_empty(v) => self.array(at, doc, v, ctx),
            _ => {
                let c = self.tables[t].1.column(node, Within::Payload);
                self.set(t, row, c, leaf(doc, v));
            }
        }
    }

    /// Whether a `json` or `variant` hint keeps the value at trie `node` of table `t`
    /// whole; looked up once per path.
    fn kept_whole(&mut self, t: usize, node: u32) -> Whole {
        if let Some(whole) = self.tables[t].1.nodes[node as usize].whole {
            return whole;
        }
        let table = &self.tables[t].1;
        let path = pointer(&table.keys(node), None);
        let whole = match Typing::of(self.cfg, self.topic, &table.bases, &path) {
            Typing::Hinted(ColumnType::Json, _) => Whole::Json,
            Typing::Hinted(ColumnType::Variant, _) => Whole::Variant,
            _ => Whole::No,
        };
        self.tables[t].1.nodes[node as usize].whole = Some(whole);
        whole
    }

    /// Keeps value `v` found at `at` whole, as a Variant; what no Variant holds is
    /// rescued under its pointer.
    fn variant(&mut self, at: Place, doc: &Doc<'a>, v: usize) {
        let Place { table: t, row, node } = at;
        let c = self.tables[t].1.column(node, Within::Payload);
        let column = &mut self.tables[t].1.columns[c];
        let index = self.encoder.encode(&mut column.variants, doc, v, "");
        // Rescued pointers start at the value; the column's path (one allocation) only
        // when something was rescued.
        if !self.encoder.rescued.is_empty() {
            let path = pointer(&self.tables[t].1.keys(node), None);
            for (key, json) in std::mem::take(&mut self.encoder.rescued) {
                self.rescue(t, row, variant::under(&path, &key), json);
            }
        }
        self.set(t, row, c, Some(Cell::Variant(doc.raw(v), index)));
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

    /// Flattens array `arr` found at `at` into rows of its child table, one per element.
    fn array(&mut self, at: Place, doc: &Doc<'a>, arr: usize, ctx: RowCtx<'a>) {
        let Place { table: t, row, node } = at;
        let (child, pointer) = self.child_table(t, node);
        // A `json` or `variant` hint on the elements (`/arr/*`) keeps each whole in
        // `value`.
        let whole = match self.whole_hints {
            true => self.kept_whole(child, ROOT),
            false => Whole::No,
        };
        let all_objects =
            doc.elements(arr).all(|e| doc.kind(e) == Kind::Object) && whole == Whole::No;
        // One buffer per nesting level in use, reused: an element's own arrays take
        // another while this one is held.
        let mut prefix = self.id_prefixes.pop().unwrap_or_default();
        let parent_len = self.id_prefix(t, row, &pointer, &mut prefix);
        for (i, elem) in doc.elements(arr).enumerate() {
            let child_row = self.new_row(child, ctx, Some((&prefix, parent_len, i)));
            if all_objects {
                let before = self.recorded;
                self.object(Place { table: child, row: child_row, node: ROOT }, doc, elem, ctx);
                if self.recorded == before {
                    // `{}` (or only nulls): a row with no values would read back as a
                    // null element, so it says `{}` in `value`.
                    let c = self.tables[child].1.column(ROOT, Within::Payload);
                    self.set(child, child_row, c, Some(Cell::Json("{}")));
                }
            } else if whole == Whole::Variant {
                self.variant(Place { table: child, row: child_row, node: ROOT }, doc, elem);
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
