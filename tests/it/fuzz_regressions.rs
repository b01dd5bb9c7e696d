//! Inputs the fuzz targets (`fuzz/`) found crashing, and seeds they start from, replayed
//! through the same entry points on every test run.

use std::path::PathBuf;

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = crate::util::repo().join("fuzz/regressions").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn parse_and_flatten_regressions() {
    let files = inputs("parse_flatten");
    assert!(!files.is_empty());
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let r = std::panic::catch_unwind(|| bronze::fuzzing::parse_and_flatten(&data));
        assert!(r.is_ok(), "{} panics", f.display());
    }
}

#[test]
fn pipeline_regressions() {
    let files = inputs("pipeline");
    assert!(!files.is_empty());
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let work = tempfile::tempdir().unwrap();
        let r = std::panic::catch_unwind(|| bronze::fuzzing::pipeline(&data, work.path()));
        assert!(r.is_ok(), "{} panics", f.display());
    }
}
