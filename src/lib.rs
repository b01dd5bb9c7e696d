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
//! [`Error`]; [`Location`] (a folder or an `s3://`, `abfss://`, `gs://` URL) and
//! [`StorageOptions`] for catalogs and landing folders in object stores; [`Catalog`] and
//! [`maintenance::Maintenance`] for keeping tables healthy. The pipeline and its
//! invariants are described in `DESIGN.md`.

#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]
#![deny(unsafe_code)]

/// Modules whose internals tests, benches, examples and fuzz targets reach into: public
/// (and hidden from the docs) with the `testing` feature, private otherwise, so a
/// program linking the library sees only the API re-exported below.
macro_rules! internal {
    ($($module:ident),* $(,)?) => {$(
        #[cfg(feature = "testing")]
        #[doc(hidden)]
        pub mod $module;
        #[cfg(not(feature = "testing"))]
        mod $module;
    )*};
}

internal!(batch, flatten, json, lease, naming, stage);

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod bench;
mod catalog;
pub mod column_types;
mod config;
mod error;
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub mod failpoint;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod fuzzing;
mod locks;
pub mod maintenance;

mod report;
mod run;
mod run_control;
mod settings;
mod shapes;
mod source;
mod store;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use source::{discover, read};
pub mod metastore;
mod table;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testdata;
mod validate;

pub use catalog::Catalog;
pub use config::{
    ChildNaming, ColumnType, CommitPer, DetectType, EnvelopeConfig, Evolution, FlattenConfig,
    IngestConfig, LateFiles, LockPolicy, MetastoreConfig, MetastoreKind, PayloadMode, TypesMode,
    default_memory_budget,
};
pub use error::{Error, Result, TypeConflict, chain as error_chain};
pub use locks::{TableGuard, TableLocks};
pub use naming::{TableName, is_staging_table};
pub use report::{BatchReport, MAX_LISTED_CORRUPT, StagingMode, TableOutcome};
pub use run::metrics;
pub use run::{
    BacklogOutcome, BatchStatus, CLEAN_ROW, Changed, CleanAction, CleanOptions, CleanOutcome,
    CleanStatus, Cleaned, DEFAULT_MAX_PARALLEL, EntityStatus, Failure, IN_MEMORY_PER_LANDING_BYTE,
    INVARIANT_ROW, InProgress, Ingest, IngestBuilder, LandingChange, MIN_DELETE_RETENTION,
    Manifest, ManifestFile, MemoryRelease, MemoryReleaseFn, PendingBatch, PendingOptions, Progress,
    ProgressFn, RUN_CONTROL_TABLE,
};
pub use run_control::{RunControlRow, RunStatus};
pub use settings::{
    Codec, Duration, EnvelopeSettings, FlattenSettings, MetastoreSettings, MetricsSettings,
    Settings, Size, TopicSettings, parse_duration, parse_size,
};
#[doc(hidden)]
pub use shapes::result_shapes;
pub use source::discover::expand_folders;
pub use source::records::Format;
pub use store::location::{Location, SCHEMES, StorageOptions};
