//! Every landed file read in the form it comes in: compressed by the tools a copy step
//! uses (Debian's `gzip`, `zstd`, `bzip2`, `lz4`; snappy's framing and zlib written by
//! their crates, as no Debian tool writes them), cut short, or holding one JSON array or
//! pretty-printed envelopes; on disk and in an S3 emulator.

use std::path::Path;
use std::process::{Command, Output};

use crate::util::*;

/// `count` envelopes of topic `t` with ids `<prefix><i>`, one per line.
fn envelopes(prefix: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "{{\"topic\":\"t\",\"message_id\":\"{prefix}{i}\",\"payload\":{{\"n\":{i},\"s\":\"café {i}\"}}}}\n"
            )
        })
        .collect()
}

/// Runs a Debian tool that compresses `plain` into `packed` (`tool args… < plain > packed`).
fn debian_tool(tool: &str, args: &[&str], plain: &Path, packed: &Path) {
    let out = Command::new(tool)
        .args(args)
        .stdin(std::fs::File::open(plain).unwrap())
        .stdout(std::fs::File::create(packed).unwrap())
        .output()
        .unwrap_or_else(|e| {
            panic!("{tool}: {e}; `scripts/test` installs it (apt-get install {tool})")
        });
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write_with(packed: &Path, write: impl FnOnce(&mut dyn std::io::Write, &[u8]), text: &str) {
    let mut out = std::fs::File::create(packed).unwrap();
    write(&mut out, text.as_bytes());
}

/// A batch folder `src/ent/batch_id=b1` under `root` with 200 envelopes in each of nine
/// files: plain, gzip, zstd, bzip2, lz4 (the Debian tools), snappy framed, zlib, raw
/// deflate, and zstd bytes in a file named `.jsonl` (known by its magic bytes).
fn mixed_batch(root: &Path) -> std::path::PathBuf {
    let dir = root.join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = root.join("plain");
    std::fs::create_dir_all(&scratch).unwrap();
    let plain = |name: &str| {
        let p = scratch.join(name);
        std::fs::write(&p, envelopes(name, 200)).unwrap();
        p
    };
    std::fs::write(dir.join("a.jsonl"), envelopes("a", 200)).unwrap();
    debian_tool("gzip", &["-c"], &plain("b"), &dir.join("b.jsonl.gz"));
    debian_tool("zstd", &["-c", "-q"], &plain("c"), &dir.join("c.jsonl.zst"));
    debian_tool("bzip2", &["-c"], &plain("d"), &dir.join("d.json.bz2"));
    debian_tool("lz4", &["-c", "-q"], &plain("e"), &dir.join("e.ndjson.lz4"));
    debian_tool("zstd", &["-c", "-q"], &plain("i"), &dir.join("i.jsonl"));
    write_with(
        &dir.join("f.jsonl.sz"),
        |out, text| {
            let mut w = snap::write::FrameEncoder::new(out);
            std::io::Write::write_all(&mut w, text).unwrap();
            w.into_inner().map_err(|e| e.to_string()).unwrap();
        },
        &envelopes("f", 200),
    );
    write_with(
        &dir.join("g.jsonl.zz"),
        |out, text| {
            let mut w = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
            std::io::Write::write_all(&mut w, text).unwrap();
            w.finish().unwrap();
        },
        &envelopes("g", 200),
    );
    write_with(
        &dir.join("h.jsonl.deflate"),
        |out, text| {
            let mut w = flate2::write::DeflateEncoder::new(out, flate2::Compression::default());
            std::io::Write::write_all(&mut w, text).unwrap();
            w.finish().unwrap();
        },
        &envelopes("h", 200),
    );
    dir
}

/// The ids `<p><i>` of [`envelopes`] for each prefix, sorted.
fn ids_of(prefixes: &[&str], count: usize) -> Vec<String> {
    let mut ids: Vec<String> = prefixes
        .iter()
        .flat_map(|p| (0..count).map(move |i| format!("{p}{i}")))
        .collect();
    ids.sort();
    ids
}

fn ingest(lake: &TempLake, batch: &str, extra: &[&str]) -> Output {
    bronze_cli()
        .args(["ingest", "--json", "--catalog"])
        .arg(lake.catalog())
        .arg(batch)
        .args(extra)
        .output()
        .unwrap()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn files_compressed_by_the_debian_tools_and_the_codec_crates_load_like_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let batch = mixed_batch(dir.path());
    let lake = TempLake::new();
    let out = ingest(&lake, batch.to_str().unwrap(), &[]);
    assert!(out.status.success(), "{}", said(&out));
    let rows = lake.rows("t");
    assert_eq!(
        sorted(rows.strings("_id")),
        ids_of(&["a", "b", "c", "d", "e", "f", "g", "h", "i"], 200)
    );
    // Payloads come through byte for byte (non-ASCII text included).
    let e7 = rows.eq("_id", "e7");
    assert_eq!(e7.strings("s"), ["café 7"]);
    assert!(e7.strings("_source_file")[0].ends_with("/e.ndjson.lz4"));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["corrupt_lines"], 0);
    assert_eq!(report["files_read"], 9);
    assert_eq!(report["lines"], 1800);
}

#[test]
fn a_cut_or_damaged_stream_keeps_the_lines_before_the_damage_and_one_record_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&batch).unwrap();
    // 60,000 lines: several blocks of every codec, so the cut leaves whole blocks.
    // Each file's ids have their own prefix (its codec's name).
    let cut = |tool: &'static str, args: &[&str], name: &'static str| {
        let plain = dir.path().join(tool);
        std::fs::write(&plain, envelopes(tool, 60_000)).unwrap();
        let whole = dir.path().join(name);
        debian_tool(tool, args, &plain, &whole);
        let bytes = std::fs::read(&whole).unwrap();
        std::fs::write(batch.join(name), &bytes[..bytes.len() * 3 / 4]).unwrap();
        (name, tool, bytes.len() * 3 / 4)
    };
    let cuts = [
        cut("zstd", &["-c", "-q"], "x.jsonl.zst"),
        cut("gzip", &["-c"], "y.jsonl.gz"),
        cut("lz4", &["-c", "-q", "-B4"], "w.jsonl.lz4"),
        cut("bzip2", &["-c"], "v.jsonl.bz2"),
    ];
    let lake = TempLake::new();
    let out = ingest(&lake, batch.to_str().unwrap(), &[]);
    // Corrupt records make exit code 1, as a corrupt line does.
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let corrupt = lake.rows("_corrupt_records");
    assert_eq!(corrupt.len(), 4, "{}", lake.dump("_corrupt_records"));
    let rows = lake.rows("t");
    for (name, prefix, size) in cuts {
        let record = corrupt.filter(|r| r.get("_source_file").is_some_and(|f| f.ends_with(name)));
        let reason = record.strings("_reason");
        assert_eq!(reason.len(), 1, "{name}");
        assert!(
            reason[0].contains(&format!("of {size} ("))
                && reason[0].contains("breaks at or before compressed byte"),
            "{name}: {reason:?}"
        );
        // Every line before the damage is a row: ids 0..N, none missing, and the
        // corrupt record sits on the line after them with the cut line's bytes.
        let kept = rows.filter(|r| r.get("_source_file").is_some_and(|f| f.ends_with(name)));
        let n = kept.len();
        assert!(n > 10_000, "{name}: only {n} lines kept");
        assert_eq!(sorted(kept.strings("_id")), ids_of(&[prefix], n));
        assert_eq!(
            record.iter().next().unwrap().int("_line"),
            Some(n as i64 + 1)
        );
        let raw = record.strings("_corrupt_record");
        let next = envelopes(prefix, n + 1);
        assert!(
            next.lines().last().unwrap().starts_with(&raw[0]),
            "{name}: {raw:?}"
        );
    }
}

/// A pretty-printed array as `json.dumps(…, indent=2)` writes it, with one broken element.
const ARRAY: &str = r#"[
  {
    "topic": "t",
    "message_id": "a1",
    "payload": {"n": 1, "tags": ["x", "y"]}
  },
  {"topic": "t", "message_id": "a2", "payload": {"n": 2}}, {"topic": "t", "message_id": "a3", "payload": {"n": 3}},
  {"topic": "t", "message_id": "bad", "payload": {"n": }},
  {
    "topic": "t",
    "message_id": "a4",
    "payload": {"s": "a ] } , \" in a string"}
  }
]
"#;

/// Envelopes one after another as `jq .` prints them, one of them broken.
const STREAM: &str = r#"{
  "topic": "t",
  "message_id": "s1",
  "payload": {
    "n": 1
  }
}
{
  "topic": "t",
  "message_id": "s2",
  "payload": {
    "n":
}
{
  "topic": "t",
  "message_id": "s3",
  "payload": {}
}
"#;

#[test]
fn an_array_file_and_a_stream_file_give_each_record_on_its_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&batch).unwrap();
    std::fs::write(batch.join("array.json"), ARRAY).unwrap();
    std::fs::write(batch.join("stream.json"), STREAM).unwrap();
    std::fs::write(batch.join("lines.jsonl"), envelopes("l", 3)).unwrap();
    let lake = TempLake::new();
    let out = ingest(&lake, batch.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let rows = lake.rows("t");
    let line_of = |id: &str| {
        rows.eq("_id", id)
            .iter()
            .next()
            .and_then(|r| r.int("_line"))
    };
    assert_eq!(
        ["a1", "a2", "a3", "a4", "s1", "s3", "l0", "l2"].map(line_of),
        [
            Some(2),
            Some(7),
            Some(7),
            Some(9),
            Some(1),
            Some(14),
            Some(1),
            Some(3)
        ]
    );
    assert_eq!(
        rows.eq("_id", "a4").strings("s"),
        ["a ] } , \" in a string"]
    );
    assert_eq!(rows.len(), 9);
    // Each broken record is kept whole, with its bytes and first line.
    let corrupt = lake.rows("_corrupt_records").sorted_by("_line");
    let kept: Vec<(Option<i64>, String)> = corrupt
        .iter()
        .map(|r| (r.int("_line"), r.get("_corrupt_record").unwrap()))
        .collect();
    assert_eq!(
        kept,
        [
            (Some(8), r#"{"topic": "t", "message_id": "bad", "payload": {"n": }}"#.to_string()),
            (Some(8), "{\n  \"topic\": \"t\",\n  \"message_id\": \"s2\",\n  \"payload\": {\n    \"n\":\n}".to_string()),
        ]
    );
    // Forced to lines, the array's lines are corrupt records, none lost.
    let lake = TempLake::new();
    let out = ingest(&lake, batch.to_str().unwrap(), &["--format", "lines"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines = ARRAY
        .lines()
        .chain(STREAM.lines())
        .filter(|l| !l.trim().is_empty())
        .count()
        + 3;
    assert_eq!(report["lines"], lines);
}

#[test]
fn a_compact_array_on_one_line_gives_each_element_its_own_id() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&batch).unwrap();
    // No id field: each element's id comes from its file, line and place on the line.
    let elements: Vec<String> = (0..5)
        .map(|i| format!("{{\"topic\":\"t\",\"payload\":{{\"n\":{i}}}}}"))
        .collect();
    std::fs::write(batch.join("one.json"), format!("[{}]", elements.join(","))).unwrap();
    let lake = TempLake::new();
    let out = ingest(&lake, batch.to_str().unwrap(), &["--id-field", ""]);
    assert!(out.status.success(), "{}", said(&out));
    let rows = lake.rows("t");
    assert_eq!(rows.len(), 5);
    assert_eq!(rows.distinct("_id"), 5);
    // A rerun gives the same ids.
    let first = sorted(rows.strings("_id"));
    let out = ingest(&lake, batch.to_str().unwrap(), &["--id-field", ""]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(sorted(lake.rows("t").strings("_id")), first);
}

#[test]
fn compressed_array_and_stream_files_in_an_s3_landing_folder_load_as_on_disk() {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let s3 = crate::cloud::moto();
    crate::cloud::create_bucket(&s3.endpoint, "landing");
    let options = crate::cloud::s3_options(&s3.endpoint);
    let dir = tempfile::tempdir().unwrap();
    let local = mixed_batch(dir.path());
    std::fs::write(local.join("array.json"), ARRAY).unwrap();
    std::fs::write(local.join("stream.json"), STREAM).unwrap();
    let (store, _) = bronze::testdata::object_store_at("s3://landing", &options).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for e in std::fs::read_dir(&local).unwrap() {
        let e = e.unwrap();
        let path = deltalake::logstore::object_store::path::Path::parse(format!(
            "src/ent/batch_id=b1/{}",
            e.file_name().to_str().unwrap()
        ))
        .unwrap();
        rt.block_on(store.put(&path, std::fs::read(e.path()).unwrap().into()))
            .unwrap();
    }
    let on_disk = TempLake::new();
    let out = ingest(&on_disk, local.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let in_s3 = TempLake::new();
    let mut cmd = bronze_cli();
    cmd.args(["ingest", "--json", "--catalog"])
        .arg(in_s3.catalog());
    for (k, v) in &options {
        cmd.arg("--storage-option").arg(format!("{k}={v}"));
    }
    let out = cmd
        .arg("s3://landing/src/ent/batch_id=b1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    for table in ["t", "_corrupt_records"] {
        let key = |lake: &TempLake| {
            let rows = lake.rows(table);
            let mut v: Vec<(String, Option<i64>, String)> = rows
                .iter()
                .map(|r| {
                    let file = r.get("_source_file").unwrap();
                    let name = file.rsplit('/').next().unwrap().to_string();
                    (
                        name,
                        r.int("_line"),
                        r.get("_id")
                            .or(r.get("_corrupt_record"))
                            .unwrap_or_default(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(key(&in_s3), key(&on_disk), "{table}");
    }
    // The array's ids a1-a4 are a.jsonl's too: duplicates, dropped.
    assert_eq!(in_s3.count("t"), 1800 + 2);
}

#[test]
fn a_file_larger_than_the_memory_budget_is_staged_in_pieces_with_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&batch).unwrap();
    // A 3 MB pretty-printed array and a cut zstd file, each over twice a chunk.
    let mut array = String::from("[\n");
    for i in 0..12_000 {
        let sep = if i + 1 < 12_000 { "," } else { "" };
        array.push_str(&format!(
            "  {{\n    \"topic\": \"t{}\",\n    \"message_id\": \"a{i}\",\n    \"payload\": {{\"n\": {i}, \"s\": \"é ] {{\"}}\n  }}{sep}\n",
            i % 3
        ));
    }
    array.push_str("]\n");
    std::fs::write(batch.join("big.json"), &array).unwrap();
    let plain = dir.path().join("z");
    std::fs::write(&plain, envelopes("z", 60_000)).unwrap();
    let whole = dir.path().join("z.zst");
    debian_tool("zstd", &["-c", "-q"], &plain, &whole);
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::write(batch.join("cut.jsonl.zst"), &bytes[..bytes.len() * 3 / 4]).unwrap();
    let whole_run = TempLake::new();
    let out = ingest(&whole_run, batch.to_str().unwrap(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let pieces_run = TempLake::new();
    let out = ingest(
        &pieces_run,
        batch.to_str().unwrap(),
        &["--memory-budget", "1MiB"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["staging"], "persisted", "{report}");
    assert_eq!(report["files_read"], 2);
    // One line of counts per file, whatever the pieces.
    assert_eq!(report["files"].as_array().unwrap().len(), 2, "{report}");
    for table in ["t0", "t1", "t2", "t", "_corrupt_records"] {
        let key = |lake: &TempLake| {
            let mut v: Vec<(Option<String>, Option<i64>, Option<String>)> = lake
                .rows(table)
                .iter()
                .map(|r| {
                    (
                        r.get("_id"),
                        r.int("_line"),
                        r.get("_corrupt_record").or(r.get("s")),
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(key(&pieces_run), key(&whole_run), "{table}");
    }
    assert_eq!(
        whole_run.count("t0") + whole_run.count("t1") + whole_run.count("t2"),
        12_000
    );
    assert_eq!(pieces_run.count("_corrupt_records"), 1);
}
