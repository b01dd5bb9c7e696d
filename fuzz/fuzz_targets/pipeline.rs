//! The whole in-memory pipeline (discover, stage, fan out, flatten, Delta commits, run
//! control, rerun) on arbitrary bytes as one landed file.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let work = tempfile::tempdir().expect("temp dir");
    bronze::fuzzing::pipeline(data, work.path());
});
