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
        assert_eq!(lake.count(table) as u64, *rows, "table {table}");
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
        let rows = lake.rows(t);
        let total = rows.len();
        let (file, id) = (
            format!("%batch_id={BATCH1}/part-%.jsonl"),
            format!("{BATCH1}-%"),
        );
        let good = rows
            .eq("_batch_id", BATCH1)
            .eq("_topic", t)
            .eq("_meta__source", "feed-a")
            .filter(|r| {
                r.get("_source_file").is_some_and(|f| like(&f, &file))
                    && r.int("_line").is_some_and(|l| l >= 1)
                    && r.get("_loaded_at").is_some()
                    && r.get("_id").is_some_and(|i| like(&i, &id))
            })
            .len();
        assert_eq!(good, total, "lineage of {t}");
        assert_eq!(rows.distinct("_id"), total, "unique ids in {t}");
    }
    for child in [
        "currentprice",
        "fees",
        "levels",
        "levels__orders",
        "tags",
        "tickers",
    ] {
        let rows = lake.rows(child);
        let total = rows.len();
        let good = rows
            .eq("_batch_id", BATCH1)
            .filter(|r| {
                [
                    "_id",
                    "_parent_id",
                    "_root_id",
                    "_topic",
                    "_source_file",
                    "_loaded_at",
                ]
                .iter()
                .all(|c| r.get(c).is_some())
                    && r.int("_idx").is_some_and(|i| i >= 0)
            })
            .len();
        assert_eq!(good, total, "keys of {child}");
        assert_eq!(rows.distinct("_id"), total, "unique ids in {child}");
    }
    // Grandchildren point at their parent row, not the message.
    let orders = lake.rows("levels__orders");
    let levels: std::collections::HashSet<String> =
        lake.rows("levels").strings("_id").into_iter().collect();
    let orphans = orders
        .filter(|o| !o.get("_parent_id").is_some_and(|p| levels.contains(&p)))
        .len();
    assert_eq!(orphans, 0);
    // Join rows: each order once per orderbook row of its root id.
    let mut books: std::collections::HashMap<String, usize> = Default::default();
    for id in lake.rows("orderbook").strings("_id") {
        *books.entry(id).or_default() += 1;
    }
    let joined: usize = orders
        .iter()
        .filter_map(|o| o.get("_root_id").and_then(|r| books.get(&r).copied()))
        .sum();
    assert_eq!(joined, lake.count("levels__orders"));
}

#[test]
fn shared_child_table_holds_rows_of_all_its_topics() {
    let lake = TempLake::new();
    lake.ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    let rows = lake.rows("currentprice");
    let topics: std::collections::BTreeSet<String> = rows.values("_topic").into_iter().collect();
    let topics: Vec<String> = topics.into_iter().collect();
    assert_eq!(topics, ["quote", "trade", "valuation"]);
    // Every currentprice row belongs to a message of its own topic.
    let total = rows.len();
    let parents: std::collections::HashMap<&str, std::collections::HashSet<String>> =
        ["quote", "trade", "valuation"]
            .into_iter()
            .map(|t| {
                let ids = lake.rows(t).strings("_id").into_iter().collect();
                (t, ids)
            })
            .collect();
    let linked = rows
        .filter(|c| match (c.get("_topic"), c.get("_parent_id")) {
            (Some(topic), Some(parent)) => parents
                .get(topic.as_str())
                .is_some_and(|ids| ids.contains(&parent)),
            _ => false,
        })
        .len();
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
    let corrupt = lake.rows("_corrupt_records");
    for c in exp["corrupt"].as_array().unwrap() {
        let (file, line) = (c["file"].as_str().unwrap(), c["line"].as_i64().unwrap());
        let pattern = format!("%/{file}");
        let n = corrupt
            .eq("_line", line)
            .eq("_batch_id", BATCH1)
            .filter(|r| {
                let filled = |c: &str| r.get(c).is_some_and(|v| !v.is_empty());
                r.get("_source_file").is_some_and(|f| like(&f, &pattern))
                    && filled("_reason")
                    && filled("_corrupt_record")
                    && r.get("_loaded_at").is_some()
            })
            .len();
        assert_eq!(n, 1, "{file}:{line}");
    }
    // The raw bytes are exactly the line in the file.
    let sorted = corrupt.sorted_by_key(|r| (r.get("_source_file"), r.int("_line")));
    let files = sorted.values("_source_file");
    let lines = sorted.values("_line");
    let bytes = sorted.values("_corrupt_bytes");
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
