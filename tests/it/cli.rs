//! The `bronze` binary: exit codes, JSON report, clear errors, `--help`.

use std::process::Command;

use crate::util::*;

fn bronze() -> Command {
    crate::util::bronze_cli()
}

#[test]
fn ingest_prints_a_json_report_and_exits_1_on_corrupt_lines() {
    let lake = TempLake::new();
    let out = bronze()
        .args(["ingest", "--json", "--catalog"])
        .arg(lake.catalog())
        .arg(batch_dir(BATCH1))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let exp = expected(BATCH1);
    assert_eq!(report["duplicates"], exp["duplicates"]);
    assert_eq!(report["corrupt_lines"], exp["corrupt_lines"]);
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(
            report["tables"][&table]["rows_written"].as_u64(),
            Some(rows),
            "{table}"
        );
        assert!(report["tables"][&table]["version"].as_i64().is_some());
    }
    // Where the time went: every stage's wall time, adding up to the run's.
    let stages = report["stage_seconds"].as_object().expect("stage_seconds");
    let names: Vec<&str> = stages.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "cleanup",
            "discover",
            "lease",
            "run_control",
            "stage",
            "tables"
        ]
    );
    let sum: f64 = stages.values().map(|v| v.as_f64().unwrap()).sum();
    let elapsed = report["elapsed"].as_f64().unwrap();
    assert!(
        sum + 0.01 >= elapsed && sum <= elapsed + 1.0,
        "stages {sum} s, run {elapsed} s"
    );
    assert!(stages["tables"].as_f64().unwrap() > 0.0);
    // And within `tables`, the table tasks' work, summed over the parallel tasks.
    let tasks = report["task_seconds"].as_object().expect("task_seconds");
    let names: Vec<&str> = tasks.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["builder", "commit", "flatten", "open", "write_files"]
    );
    for work in ["flatten", "write_files", "commit"] {
        assert!(tasks[work].as_f64().unwrap() > 0.0, "{work}: {tasks:?}");
    }
    let out = bronze()
        .args(["ingest", "--catalog"])
        .arg(lake.catalog())
        .arg(batch_dir(BATCH2))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("batch market/events/batch_id={BATCH2}")) && text.contains("quote"),
        "{text}"
    );
    assert!(text.contains("stages: discover "), "{text}");
    assert!(text.contains("table tasks (summed): "), "{text}");
}

#[test]
fn bad_input_exits_2_with_an_error_that_says_what_to_do() {
    let lake = TempLake::new();
    let landing = tempfile::tempdir().unwrap();
    let empty = landing.path().join("batch_id=b1");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("_SUCCESS"), "").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![empty.display().to_string()], "no data files"),
        (vec![landing.path().display().to_string()], "--batch-id"),
        (
            vec![
                empty.display().to_string(),
                "--batch-id".into(),
                "x' OR '1'='1".into(),
            ],
            "invalid batch id",
        ),
        (vec!["/does/not/exist/batch_id=a".into()], "/does/not/exist"),
        (
            vec![
                empty.display().to_string(),
                "--schema".into(),
                "../up".into(),
            ],
            "schema",
        ),
    ];
    // Malformed column type hints, each named in its error.
    let data = landing.path().join("batch_id=b2");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("part-0.jsonl"),
        r#"{"topic":"t","message_id":"1","payload":{"a":1}}"#,
    )
    .unwrap();
    let mut cases = cases;
    for (hint, want) in [
        ("/a=datetime", "unknown type \"datetime\""),
        (
            "/a=decimal(40,2)",
            "\"/a=decimal(40,2)\": \"decimal(40,2)\": the precision is 1 to 38",
        ),
        ("a=int64", "\"a=int64\": \"a\" is not a JSON pointer"),
        ("t:/a", "is not [TOPIC:]POINTER=TYPE"),
    ] {
        let args = vec![
            data.display().to_string(),
            "--column-type".into(),
            hint.into(),
        ];
        cases.push((args, want));
    }
    cases.push((
        vec![
            data.display().to_string(),
            "--column-type".into(),
            "t:/a=int64".into(),
            "--column-type".into(),
            "t:/a=string".into(),
        ],
        "`--column-type t:/a=int64` and `--column-type t:/a=string`: one type per pointer",
    ));
    for (args, want) in cases {
        let out = bronze()
            .arg("ingest")
            .arg("--catalog")
            .arg(lake.catalog())
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!lake.schema_dir().exists(), "nothing written");
}

/// A reader that went away (`bronze ingest … | head -c0`): the batch is committed, the
/// process ends quietly with 141 (as one killed by SIGPIPE), no panic.
#[test]
fn a_closed_stdout_ends_the_run_quietly_after_the_commit() {
    let lake = TempLake::new();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = bronze()
        .args(["ingest", "--json", "--catalog"])
        .arg(lake.catalog())
        .arg(batch_dir(BATCH1))
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(lake.count(&table) as u64, rows, "{table}");
    }
}

#[test]
fn help_teaches_the_command() {
    let out = bronze().args(["ingest", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for want in [
        "batch_id=",
        "--catalog",
        "--topic-field",
        "--id-field",
        "Exit code",
        "_corrupt_records",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
}

#[test]
fn separate_processes_load_different_batches_into_the_same_tables() {
    // A catalog path and a schema name with hyphens and spaces, end to end.
    let root = tempfile::tempdir().unwrap();
    let catalog = root.path().join("my lake-1");
    let spawn = |batch: &str| {
        bronze()
            .args(["ingest", "--schema", "bronze raw-1", "--catalog"])
            .arg(&catalog)
            .arg(batch_dir(batch))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(BATCH1), spawn(BATCH2));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(
        a.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert_eq!(
        b.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&b.stderr)
    );
    let lake = TempLake::at(catalog, "bronze raw-1");
    assert_both_fixture_batches_landed(&lake);
}

/// Log lines carry colour only for a person at a terminal: none in a pipe, none at a
/// terminal (a pty, through util-linux `script`) with `NO_COLOR` set, some without it
/// (which shows the pty is one); `--log-format json` writes one JSON object per line.
/// (`--json`: no progress bar, whose cursor moves are escapes too.)
#[test]
fn logs_are_coloured_only_at_a_terminal_and_can_be_json() {
    let lake = TempLake::new();
    let args = |lake: &TempLake| {
        format!(
            "-v ingest --json --catalog {} {}",
            lake.catalog().display(),
            batch_dir(BATCH2).display()
        )
    };
    let piped = bronze().args(args(&lake).split(' ')).output().unwrap();
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    assert!(
        piped.stderr.windows(5).any(|w| w == b" INFO"),
        "info lines logged"
    );
    assert!(!piped.stderr.contains(&0x1b), "no escape byte in a pipe");

    let at_terminal = |no_color: Option<&str>| {
        let lake = TempLake::new();
        let mut c = Command::new("script");
        c.args(["-qec"])
            .arg(format!("{} {}", env!("CARGO_BIN_EXE_bronze"), args(&lake)))
            .arg("/dev/null")
            .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.windows(4).any(|w| w == b"INFO"), "{out:?}");
        out.stdout.contains(&0x1b)
    };
    assert!(at_terminal(None), "coloured at a terminal");
    assert!(!at_terminal(Some("1")), "NO_COLOR=1: no escape byte");

    let lake = TempLake::new();
    let json = bronze()
        .args(["--log-format", "json"])
        .args(args(&lake).split(' '))
        .output()
        .unwrap();
    assert!(json.status.success(), "{json:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8(json.stderr)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!lines.is_empty());
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["fields"].is_object())
    );
}
