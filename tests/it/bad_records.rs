//! Bad input is kept, never dropped: gzip batches, invalid UTF-8, odd line endings.

use bronze::testdata::{GenSpec, generate};

use crate::util::*;

#[test]
fn a_generated_gzip_batch_conserves_every_line() {
    let landing = tempfile::tempdir().unwrap();
    let spec = GenSpec {
        files: 6,
        lines_per_file: 120,
        topics: 12,
        corrupt_per_10k: 100,
        gzip: true,
        ..Default::default()
    };
    let truth = generate(landing.path(), "gz1", &spec).unwrap();
    let lake = TempLake::new();
    let report = lake.ingest().build().unwrap().run(&truth.dir).unwrap();
    assert_accounted(&lake, &report);
    assert_eq!(report.files_read, 6);
    assert_eq!(report.lines, truth.lines);
    assert_eq!(report.duplicates, truth.duplicates);
    assert_eq!(report.corrupt_lines, truth.corrupt);
    assert_eq!(
        report.messages,
        truth.lines - truth.duplicates - truth.corrupt
    );
    let mut rows = 0;
    for t in lake.tables() {
        if t.starts_with("quote_")
            || t.starts_with("trade_")
            || t.starts_with("orderbook_")
            || t.starts_with("position_")
            || t.starts_with("reference_")
            || t.starts_with("news_")
        {
            rows += lake.count(&t);
        }
    }
    assert_eq!(rows as u64, report.messages);
    assert_eq!(lake.count("_corrupt_records") as u64, truth.corrupt);
}

#[test]
fn invalid_utf8_crlf_bom_and_missing_newline_are_kept_exactly() {
    let landing = tempfile::tempdir().unwrap();
    let dir = landing.path().join("batch_id=u1");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = Vec::new();
    text.extend_from_slice(
        b"\xEF\xBB\xBF{\"topic\":\"a\",\"message_id\":\"1\",\"payload\":{\"x\":1}}\r\n",
    );
    text.extend_from_slice(
        b"{\"topic\":\"a\",\"message_id\":\"2\",\"payload\":{\"x\":\"\xff\xfe\"}}\r\n",
    );
    text.extend_from_slice(b"\r\n   \n");
    text.extend_from_slice(b"{\"topic\":\"a\",\"message_id\":\"3\",\"payload\":{\"x\":3}}");
    std::fs::write(dir.join("f.jsonl"), &text).unwrap();
    let lake = TempLake::new();
    let report = lake.ingest().build().unwrap().run(&dir).unwrap();
    assert_accounted(&lake, &report);
    assert_eq!(
        (report.lines, report.messages, report.corrupt_lines),
        (3, 2, 1)
    );
    assert_eq!(report.exit_code(), 1);
    assert_eq!(
        lake.rows("a")
            .filter(|r| matches!(r.get("x").as_deref(), Some("1" | "3")))
            .len(),
        2
    );
    let hex = lake
        .rows("_corrupt_records")
        .eq("_line", 2)
        .values("_corrupt_bytes");
    let want: String = b"{\"topic\":\"a\",\"message_id\":\"2\",\"payload\":{\"x\":\"\xff\xfe\"}}\r"
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, [want]);
}
