//! The fixture batches land with the exact expected rows, lineage and corrupt records.

use crate::util::*;

#[test]
fn fixture_batch_lands_with_exact_counts() {
    let lake = TempLake::new();
    let report = lake
        .ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_accounted(&lake, &report);
    let exp = expected(BATCH1);
    let want = expected_tables(BATCH1);

    assert_eq!(lake.tables(), want.keys().cloned().collect::<Vec<_>>());
    for (table, rows) in &want {
        assert_eq!(
            lake.count(&format!("SELECT count(*) FROM {table}")) as u64,
            *rows,
            "table {table}"
        );
        assert_eq!(
            report.tables[table].rows_written, *rows,
            "report for {table}"
        );
        assert!(report.tables[table].error.is_none());
    }
    assert_eq!(
        report.files_read as u64,
        exp["files_read"].as_u64().unwrap()
    );
    assert_eq!(
        report.files_skipped as u64,
        exp["files_skipped"].as_u64().unwrap()
    );
    assert_eq!(report.lines, exp["lines"].as_u64().unwrap());
    assert_eq!(report.messages, exp["messages"].as_u64().unwrap());
    assert_eq!(report.duplicates, exp["duplicates"].as_u64().unwrap());
    assert_eq!(report.corrupt_lines, exp["corrupt_lines"].as_u64().unwrap());
    assert_eq!(report.exit_code(), 1, "corrupt lines make exit code 1");
    // Conservation: every non-blank line is a row, a corrupt record or a dropped duplicate.
    assert_eq!(
        report.lines,
        report.messages + report.corrupt_lines + report.duplicates
    );
}

#[test]
fn every_row_carries_lineage_and_keys() {
    let lake = TempLake::new();
    lake.ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    let exp = expected(BATCH1);
    for topic in exp["topics"].as_array().unwrap() {
        let t = topic.as_str().unwrap();
        let total = lake.count(&format!("SELECT count(*) FROM {t}"));
        let good = lake.count(&format!(
            "SELECT count(*) FROM {t} WHERE _batch_id = '{BATCH1}' AND _topic = '{t}' \
             AND _source_file LIKE '%batch_id={BATCH1}/part-%.jsonl' AND _line >= 1 \
             AND _loaded_at IS NOT NULL AND _id LIKE '{BATCH1}-%' AND \"_meta__source\" = 'feed-a'"
        ));
        assert_eq!(good, total, "lineage of {t}");
        assert_eq!(
            lake.count(&format!("SELECT count(DISTINCT _id) FROM {t}")),
            total,
            "unique ids in {t}"
        );
    }
    for child in [
        "currentprice",
        "fees",
        "levels",
        "levels__orders",
        "tags",
        "tickers",
    ] {
        let total = lake.count(&format!("SELECT count(*) FROM {child}"));
        let good = lake.count(&format!(
            "SELECT count(*) FROM {child} WHERE _batch_id = '{BATCH1}' AND _id IS NOT NULL \
             AND _parent_id IS NOT NULL AND _root_id IS NOT NULL AND _idx >= 0 AND _topic IS NOT NULL \
             AND _source_file IS NOT NULL AND _loaded_at IS NOT NULL"
        ));
        assert_eq!(good, total, "keys of {child}");
        assert_eq!(
            lake.count(&format!("SELECT count(DISTINCT _id) FROM {child}")),
            total,
            "unique ids in {child}"
        );
    }
    // Grandchildren point at their parent row, not the message.
    let orphans = lake.count(
        "SELECT count(*) FROM levels__orders o LEFT JOIN levels l ON o._parent_id = l._id WHERE l._id IS NULL",
    );
    assert_eq!(orphans, 0);
    assert_eq!(
        lake.count("SELECT count(*) FROM levels__orders o JOIN orderbook b ON o._root_id = b._id"),
        lake.count("SELECT count(*) FROM levels__orders")
    );
}

#[test]
fn shared_child_table_holds_rows_of_all_its_topics() {
    let lake = TempLake::new();
    lake.ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    let topics = lake.strings("SELECT DISTINCT _topic FROM currentprice ORDER BY _topic");
    assert_eq!(topics, ["quote", "trade", "valuation"]);
    // Every currentprice row belongs to a message of its own topic.
    let total = lake.count("SELECT count(*) FROM currentprice");
    let linked = lake.count(
        "SELECT count(*) FROM currentprice c WHERE \
         (c._topic = 'quote' AND c._parent_id IN (SELECT _id FROM quote)) OR \
         (c._topic = 'trade' AND c._parent_id IN (SELECT _id FROM trade)) OR \
         (c._topic = 'valuation' AND c._parent_id IN (SELECT _id FROM valuation))",
    );
    assert_eq!(linked, total);
}

#[test]
fn corrupt_lines_are_kept_with_file_line_and_reason() {
    let lake = TempLake::new();
    lake.ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    let exp = expected(BATCH1);
    for c in exp["corrupt"].as_array().unwrap() {
        let (file, line) = (c["file"].as_str().unwrap(), c["line"].as_i64().unwrap());
        let n = lake.count(&format!(
            "SELECT count(*) FROM _corrupt_records WHERE _source_file LIKE '%/{file}' AND _line = {line} \
             AND _batch_id = '{BATCH1}' AND length(_reason) > 0 AND length(_corrupt_record) > 0 \
             AND _loaded_at IS NOT NULL"
        ));
        assert_eq!(n, 1, "{file}:{line}");
    }
    // The raw bytes are exactly the line in the file.
    let files =
        lake.strings("SELECT _source_file FROM _corrupt_records ORDER BY _source_file, _line");
    let lines = lake.strings("SELECT _line FROM _corrupt_records ORDER BY _source_file, _line");
    let bytes = lake.strings(
        "SELECT encode(_corrupt_bytes, 'hex') FROM _corrupt_records ORDER BY _source_file, _line",
    );
    assert_eq!(files.len() as u64, exp["corrupt_lines"].as_u64().unwrap());
    for ((file, line), hex) in files.iter().zip(&lines).zip(&bytes) {
        let text = std::fs::read(file).unwrap();
        let line = text
            .split(|&b| b == b'\n')
            .nth(line.parse::<usize>().unwrap() - 1)
            .unwrap();
        let want: String = line.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, &want, "{file}");
    }
}
