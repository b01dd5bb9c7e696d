//! `bronze` loads landed batches of multi-topic JSON Lines files into Delta Lake bronze
//! tables: parse every line once, fan topics out over a thread pool the library owns,
//! flatten each payload into a topic table plus child tables for nested arrays, keep
//! every line (corrupt ones in `_corrupt_records`), stamp lineage on every row, and
//! replace a batch's rows on rerun so loads are idempotent.
//!
//! ```no_run
//! # fn main() -> bronze::Result<()> {
//! let ingest = bronze::Ingest::builder("./lakehouse").with_schema("bronze").build()?;
//! let report = ingest.run("landing/market/events/batch_id=2026-04-05_001")?;
//! println!("{}", report.to_text());
//! # Ok(())
//! # }
//! ```
//!
//! Main types: [`Ingest`] (and [`IngestBuilder`]), [`IngestConfig`], [`BatchReport`],
//! [`Error`]. The pipeline and its invariants are described in `DESIGN.md`.

#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(unsafe_code)]

pub mod batch;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod bench;
mod clock;
mod config;
mod error;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod flatten;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod fuzzing;
mod ingest;
pub mod json;
pub mod lease;
mod locks;
pub mod maintenance;
mod mem;
pub mod naming;
mod report;
mod schema;
mod source;
pub use source::{discover, read};
pub mod stage;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testdata;
mod validate;
mod write;

pub use config::{
    ChildNaming, CommitPer, ConfigFile, EnvelopeConfig, Evolution, FlattenConfig, IngestConfig,
    LockPolicy, TypesMode, default_memory_budget, parse_size,
};
pub use error::{Error, Result, chain as error_chain};
pub use ingest::{
    DEFAULT_MAX_PARALLEL, INVARIANT_ROW, Ingest, IngestBuilder, MemoryRelease, MemoryReleaseFn,
    Progress, ProgressFn, RUN_CONTROL_TABLE,
};
pub use locks::{TableGuard, TableLocks};
pub use naming::TableName;
pub use report::{BatchReport, RunControlRow, RunStatus, StagingMode, TableOutcome};
