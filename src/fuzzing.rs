//! Entry points for the fuzz targets in `fuzz/` and their regression tests: each runs
//! part of the pipeline on arbitrary bytes and panics when an invariant breaks.
//!
//! Not a stable API.

use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::{Array, RecordBatch, StringArray};

use crate::column_types::{ColumnType, DetectType};
use crate::config::{EnvelopeConfig, Evolution, FlattenConfig};
use crate::flatten::{Lineage, flatten};
use crate::naming::{self, TableName};
use crate::source::discover::{Compression, SourceFile};
use crate::stage::{IdSet, assemble, stage_file_bytes};

/// Stages `data` as one file, checks the line accounting, flattens every topic and
/// fits each table's rows to the schema of the rows flattened from the file's first
/// half (a later batch meeting an earlier table). The first byte picks `max_depth` (its
/// low three bits), and with bit 3 set turns on type detection and hints (`/ts`, `/*/ts`
/// timestamps, `/day` a date, `/amount` a decimal).
pub fn parse_and_flatten(data: &[u8]) {
    let (first, data) = match data.split_first() {
        Some((d, rest)) => (*d, rest),
        None => (0, data),
    };
    let mut cfg = FlattenConfig {
        max_depth: 1 + usize::from(first % 8),
        ..FlattenConfig::default()
    };
    if first & 8 != 0 {
        cfg.detect_types = vec![DetectType::Timestamp, DetectType::Date];
        for (pointer, ty) in [
            ("/ts", ColumnType::Timestamp),
            ("/items/*/ts", ColumnType::Timestamp),
            ("/day", ColumnType::Date),
            ("/amount", ColumnType::Decimal(18, 2)),
        ] {
            cfg.column_types.insert(pointer.to_string(), ty);
        }
    }
    let whole = flatten_all(data, &cfg);
    // The first half, cut at a line end, is an earlier batch of the same feed.
    let cut = data[..data.len() / 2]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let earlier = flatten_all(&data[..cut], &cfg);
    for (table, batches) in &whole {
        let target = earlier
            .get(table)
            .and_then(|b| b.first())
            .map(|b| b.schema());
        for batch in batches {
            for evolution in [Evolution::Add, Evolution::Rescue] {
                let fitted =
                    crate::table::fit::to_table(table, batch.clone(), target.as_deref(), evolution)
                        .unwrap_or_else(|e| panic!("conform {table} ({evolution:?}): {e}"));
                assert_eq!(fitted.batch.num_rows(), batch.num_rows(), "{table}: rows");
                // The writer's schema merge fills the table's other columns with nulls;
                // what conform emits must keep every table column's type, and add
                // columns only under `Add`.
                let Some(target) = &target else { continue };
                for f in fitted.batch.schema().fields() {
                    let name = f.name();
                    match target.field_with_name(name) {
                        Ok(t) => assert_eq!(f.data_type(), t.data_type(), "{table}.{name}"),
                        Err(_) => assert!(
                            crate::naming::SYSTEM_COLUMNS.contains(&name.as_str())
                                || name == naming::RESCUED
                                || (evolution == Evolution::Add && fitted.added.contains(name)),
                            "{table}.{name}: new column under {evolution:?}"
                        ),
                    }
                }
            }
        }
    }
}

/// Stages and flattens `data` (one file), checking that every non-blank line is a
/// message, a corrupt record or a duplicate, and that every message is one row of its
/// topic table. Tables by name, one batch per topic.
fn flatten_all(data: &[u8], cfg: &FlattenConfig) -> BTreeMap<TableName, Vec<RecordBatch>> {
    let env = EnvelopeConfig::default();
    let staged = stage_file_bytes(data, "fuzz.jsonl", &env);
    let non_blank = crate::source::read::lines(data)
        .filter(|l| !l.is_blank())
        .count() as u64;
    assert_eq!(staged.lines, non_blank, "non-blank lines");
    assert_eq!(
        staged.lines,
        (staged.messages.len() + staged.corrupt.len()) as u64,
        "every line is a message or a corrupt record"
    );
    for c in &staged.corrupt {
        let line = crate::source::read::lines(data)
            .find(|l| l.number == c.line)
            .expect("a corrupt record points at a line of the file");
        assert_eq!(line.raw, c.raw.as_slice(), "corrupt line kept byte-exact");
    }
    let file = SourceFile {
        path: "fuzz.jsonl".into(),
        name: "fuzz.jsonl".into(),
        bytes: data.len() as u64,
        compression: Compression::None,
        folder: 0,
        modified: None,
        etag: None,
    };
    let staging = assemble(&[file], vec![staged], true, &mut IdSet::default());
    assert_eq!(
        staging.lines(),
        staging.messages() + staging.corrupt.len() as u64 + staging.duplicates,
        "lines = messages + corrupt + duplicates"
    );
    let lineage = Lineage::new("fuzz", 0);
    let mut out: BTreeMap<TableName, Vec<RecordBatch>> = BTreeMap::new();
    for (topic, batch) in &staging.topics {
        let plan = flatten(topic, batch, &lineage, cfg)
            .unwrap_or_else(|e| panic!("flatten {topic:?}: {e}"));
        let own = TableName::for_topic(topic);
        let rows = plan.tables.get(&own).map_or(0, RecordBatch::num_rows);
        assert_eq!(
            rows,
            batch.iter().map(RecordBatch::num_rows).sum::<usize>(),
            "topic {topic:?}: one row per message"
        );
        for (table, b) in plan.tables {
            check_system_columns(&table, &b);
            out.entry(table).or_default().push(b);
        }
    }
    out
}

/// Lineage is on every row and names the fuzz batch.
fn check_system_columns(table: &TableName, b: &RecordBatch) {
    let col = b
        .column_by_name(naming::BATCH_ID)
        .unwrap_or_else(|| panic!("{table}: no _batch_id"));
    let ids = col
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap_or_else(|| panic!("{table}: _batch_id is not a string column"));
    assert_eq!(ids.null_count(), 0, "{table}: _batch_id null");
    assert!(ids.iter().all(|v| v == Some("fuzz")), "{table}: _batch_id");
}

/// Runs the whole pipeline (discover, stage in memory, flatten, write, run control) on
/// `data` as one landed file, into a Delta catalog under `work`, twice (the rerun must
/// replace, not add), and checks the library's own accounting each time.
pub fn pipeline(data: &[u8], work: &Path) {
    let batch = work.join("landing").join("batch_id=fuzz");
    std::fs::create_dir_all(&batch).expect("create the landing folder");
    std::fs::write(batch.join("part-0.jsonl"), data).expect("write the landed file");
    let ingest = crate::Ingest::builder(work.join("lake"))
        .with_threads(3)
        .build()
        .expect("build the ingest");
    let first = ingest.run(&batch).expect("ingest");
    assert!(first.invariant_ok, "accounting: {:?}", first.invariant);
    let second = ingest.run(&batch).expect("rerun");
    assert!(
        second.invariant_ok,
        "rerun accounting: {:?}",
        second.invariant
    );
    assert_eq!(first.messages, second.messages, "rerun: messages");
    assert_eq!(first.corrupt_lines, second.corrupt_lines, "rerun: corrupt");
}
