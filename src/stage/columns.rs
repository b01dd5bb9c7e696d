//! One topic's staged columns, sized exactly up front from a group's messages and
//! filled from their spans.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::SchemaRef;

use super::staged::{At, Message, Span, StagedFile};
use crate::error::Error;
use crate::source::discover::SourceFile;

/// One topic's rows in a group and the bytes its columns need.
#[derive(Default)]
pub(super) struct Sizes {
    rows: usize,
    id_bytes: usize,
    file_bytes: usize,
    meta_bytes: usize,
    payload_bytes: usize,
}

/// Per topic of the group (`topics` of them, `local` mapping each file's topics), the
/// rows and bytes its staged columns need.
pub(super) fn topic_sizes(
    files: &[SourceFile],
    group: &[(usize, StagedFile)],
    local: &[Vec<usize>],
    topics: usize,
) -> Vec<Sizes> {
    let span_len = |s: Span| s.len();
    let mut sizes: Vec<Sizes> = (0..topics).map(|_| Sizes::default()).collect();
    for ((fi, sf), map) in group.iter().zip(local) {
        let name_len = files[*fi].name.len();
        for m in &sf.messages {
            let s = &mut sizes[map[m.topic as usize]];
            s.rows += 1;
            // A generated id is 32 hex characters.
            s.id_bytes += m.id.map_or(32, span_len);
            s.file_bytes += name_len;
            s.meta_bytes += m.meta.map_or(0, span_len);
            s.payload_bytes += span_len(m.payload);
        }
    }
    sizes
}

/// The id of a message without one: from its file's key and its line, and for the
/// second and later records starting on one line, their place on it too.
fn derived_id(key: &[u8], at: At) -> String {
    match at.nth() {
        0 => crate::naming::stable_id(&[key, &at.line().to_le_bytes()]),
        nth => crate::naming::stable_id(&[key, &at.line().to_le_bytes(), &nth.to_le_bytes()]),
    }
}

/// One topic's staged columns being built.
pub(super) struct Builders {
    topic: StringBuilder,
    id: StringBuilder,
    file: StringBuilder,
    line: Int64Builder,
    meta: StringBuilder,
    payload: StringBuilder,
}

impl Builders {
    /// Builders sized for the topic `name` from its [`Sizes`], so no column reallocates.
    pub(super) fn with_sizes(name: &str, s: &Sizes) -> Self {
        Builders {
            topic: StringBuilder::with_capacity(s.rows, s.rows * name.len()),
            id: StringBuilder::with_capacity(s.rows, s.id_bytes),
            file: StringBuilder::with_capacity(s.rows, s.file_bytes),
            line: Int64Builder::with_capacity(s.rows),
            meta: StringBuilder::with_capacity(s.rows, s.meta_bytes),
            payload: StringBuilder::with_capacity(s.rows, s.payload_bytes),
        }
    }

    /// Appends one message of `sf` (from the landing file `source`, whose messages without
    /// an id get one from `key` and their line) to topic `name`.
    #[inline]
    pub(super) fn append(
        &mut self,
        name: &str,
        source: &str,
        key: &[u8],
        sf: &StagedFile,
        m: &Message,
    ) {
        self.topic.append_value(name);
        match m.id {
            Some(v) => self.id.append_value(sf.text(v)),
            None => self.id.append_value(derived_id(key, m.at)),
        }
        self.file.append_value(source);
        self.line.append_value(m.at.line() as i64);
        self.meta.append_option(m.meta.map(|s| sf.text(s)));
        self.payload.append_value(sf.text(m.payload));
    }

    /// The topic's staged batch.
    pub(super) fn finish(mut self, schema: &SchemaRef) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.topic.finish()),
            Arc::new(self.id.finish()),
            Arc::new(self.file.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.meta.finish()),
            Arc::new(self.payload.finish()),
        ];
        // The columns are built right above with the schema's types and equal lengths.
        RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| Error::arrow("_staging", e))
            .expect("staging columns match the staging schema")
    }
}
