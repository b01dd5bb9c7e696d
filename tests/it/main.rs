//! The one integration-test binary (one link instead of one per file).

mod backlog;
mod bad_records;
mod batch_identity;
mod cli;
mod cloud;
mod concurrency;
mod conflicts;
mod crash;
mod envelope;
mod faults;
mod flattening;
mod fuzz_regressions;
mod hostile;
mod idempotency;
mod ingest_basic;
mod interop;
mod maintenance;
mod metrics;
mod other_engines;
mod report;
mod run_control;
mod staging;
mod stores;
mod types;
mod util;
mod workers;
