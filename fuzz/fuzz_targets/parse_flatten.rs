//! Line parsing + flattening + schema fitting on arbitrary bytes (one landed file).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bronze::fuzzing::parse_and_flatten(data);
});
