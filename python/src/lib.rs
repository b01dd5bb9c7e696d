//! `bronze._bronze`: the Rust side of the `bronze` Python package.
//!
//! Every function takes the run's settings as one JSON object (built by
//! `bronze._settings` from the keyword arguments) and returns its result as JSON, which
//! the Python side turns into dataclasses: the field names are those of the CLI's
//! `--json`, by construction. Each call detaches from the interpreter (releases the GIL)
//! while it works; errors become exceptions of one class per kind, with the CLI's
//! message (storage option values masked).

use std::sync::Arc;

use pyo3::exceptions::PyException;

/// jemalloc for the extension's Rust allocations (see `Cargo.toml`); CPython's objects
/// keep CPython's allocator, and nothing allocated on one side is freed on the other.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The binary's jemalloc options (see `src/bin/bronze/main.rs`): one arena per CPU, extents and
/// metadata in transparent huge pages where the system offers them. Read by the
/// extension's jemalloc when it initialises; `_RJEM_MALLOC_CONF` still overrides it.
#[cfg(not(target_env = "msvc"))]
#[allow(unsafe_code)]
// SAFETY: jemalloc declares this symbol weak and reads it once, as a NUL-terminated
// option string that lives for the whole program.
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: Option<&'static u8> =
    Some(&b"percpu_arena:percpu,thp:always,metadata_thp:always\0"[0]);
use pyo3::prelude::*;
use pyo3::types::PyModule;

pyo3::create_exception!(
    _bronze,
    BronzeError,
    PyException,
    "Base class of every error raised by bronze."
);
pyo3::create_exception!(
    _bronze,
    BatchBusy,
    BronzeError,
    "Another run holds the batch's lease (the CLI's exit code 3): leave it, or rerun once it ends."
);
pyo3::create_exception!(
    _bronze,
    InvalidBatchId,
    BronzeError,
    "The batch id is missing, mixed across folders, or not usable in paths and predicates."
);
pyo3::create_exception!(
    _bronze,
    InvalidLandingPath,
    BronzeError,
    "The folders above `batch_id=<id>` do not name a `<source>/<entity>`."
);
pyo3::create_exception!(
    _bronze,
    NoDataFiles,
    BronzeError,
    "The batch folder holds no `.jsonl` / `.json` / `.gz` file."
);
pyo3::create_exception!(
    _bronze,
    BatchChanging,
    BronzeError,
    "A landing file changed while it was read (the copy step is still writing it)."
);
pyo3::create_exception!(
    _bronze,
    ConfigError,
    BronzeError,
    "A setting is invalid (its name and the fix are in the message)."
);
pyo3::create_exception!(
    _bronze,
    StorageError,
    BronzeError,
    "A file or object store could not be read or written (the store and the fix are in the message)."
);
pyo3::create_exception!(
    _bronze,
    TableError,
    BronzeError,
    "A Delta table could not be read or written, or its schema could not take the batch."
);
pyo3::create_exception!(
    _bronze,
    NoSuchTable,
    BronzeError,
    "The named table does not exist in the catalog."
);
pyo3::create_exception!(
    _bronze,
    AlreadyLoaded,
    BronzeError,
    "Another worker loaded the batch after this one listed the backlog."
);

/// The exception for a `bronze` error, with the CLI's message (option values masked).
fn to_py(e: &bronze::Error, options: &bronze::StorageOptions) -> PyErr {
    use bronze::Error as E;
    let message = options.mask(&bronze::error_chain(e));
    let kind = match e {
        E::Shared(inner) => return to_py(inner, options),
        E::BatchLeased { .. } | E::LeaseLost { .. } => BatchBusy::new_err,
        E::InvalidBatchId { .. } | E::MissingBatchId { .. } | E::MixedBatchIds { .. } => {
            InvalidBatchId::new_err
        }
        E::InvalidLandingPath { .. } => InvalidLandingPath::new_err,
        E::NoDataFiles { .. } => NoDataFiles::new_err,
        E::FileChanged { .. } => BatchChanging::new_err,
        E::Config { .. } | E::Setting { .. } => ConfigError::new_err,
        E::Io { .. } | E::Store { .. } => StorageError::new_err,
        E::Arrow { .. } | E::Delta { .. } | E::SchemaEvolution { .. } => TableError::new_err,
        E::NoSuchTable { .. } => NoSuchTable::new_err,
        E::AlreadyLoaded { .. } => AlreadyLoaded::new_err,
        _ => BronzeError::new_err,
    };
    kind(message)
}

/// The settings the Python side passes, as JSON (`bronze._settings`).
#[derive(Default)]
struct Settings {
    config: bronze::IngestConfig,
}

impl Settings {
    /// The run's configuration: [`Settings::layers`], resolved.
    fn parse(json: &str) -> Result<Settings, PyErr> {
        let merged = Self::layers(json)?;
        let options = merged.storage.clone();
        let config = merged.resolve().map_err(|e| to_py(&e, &options))?;
        Ok(Settings { config })
    }

    /// The keyword arguments (the keys of `bronze.toml`) over `config_file` (a
    /// `bronze.toml`) or `config` (a dict of its keys).
    fn layers(json: &str) -> Result<bronze::Settings, PyErr> {
        let serde_json::Value::Object(mut args) = serde_json::from_str(json)
            .map_err(|e| ConfigError::new_err(format!("settings are not JSON: {e}")))?
        else {
            return Err(ConfigError::new_err("settings are not a JSON object"));
        };
        let plain = |e: bronze::Error| to_py(&e, &bronze::StorageOptions::default());
        let file = match (args.remove("config_file"), args.remove("config")) {
            (Some(serde_json::Value::String(path)), _) => {
                bronze::Settings::load(std::path::Path::new(&path))
            }
            (_, Some(table)) if !table.is_null() => {
                bronze::Settings::from_json(table).and_then(bronze::Settings::with_env)
            }
            _ => Ok(bronze::Settings::default()),
        }
        .map_err(plain)?;
        Ok(bronze::Settings::from_json(serde_json::Value::Object(args))
            .map_err(plain)?
            .over(file))
    }

    fn options(&self) -> bronze::StorageOptions {
        self.config.storage_options.clone()
    }

    /// The loader, with the progress callback (called from worker threads, each attaching
    /// to the interpreter for the call) and glibc's free pages handed back after a run.
    fn ingest(&self, progress: Option<Py<PyAny>>) -> Result<bronze::Ingest, PyErr> {
        let mut builder =
            bronze::Ingest::builder(self.config.catalog.clone()).with_memory_release(trim);
        *builder.config_mut() = self.config.clone();
        if let Some(callback) = progress {
            let callback = Arc::new(callback);
            builder = builder.with_progress(move |p| report_progress(&callback, p));
        }
        builder
            .build()
            .map_err(|e| to_py(&e, &self.config.storage_options))
    }
}

/// Calls the Python progress callback with `(stage, done, total)`; an exception it raises
/// is printed as unraisable (the run goes on: progress is advisory).
fn report_progress(callback: &Py<PyAny>, p: &bronze::Progress) {
    let (stage, done, total) = match p {
        bronze::Progress::Discovered { files, .. } => ("discover", *files, *files),
        bronze::Progress::FileStaged { done, total } => ("parse", *done, *total),
        bronze::Progress::TableWritten { done, topics, .. } => ("write", *done, *topics),
        _ => return,
    };
    Python::attach(|py| {
        if let Err(e) = callback.call1(py, (stage, done, total)) {
            e.write_unraisable(py, Some(callback.bind(py)));
        }
    });
}

/// Hands freed memory back to the OS after a run freed much of it, as the binary does:
/// glibc's free heap pages (CPython's side) always, and between the phases of an
/// over-budget batch every jemalloc arena's unused dirty pages.
#[allow(unsafe_code)]
fn trim(when: bronze::MemoryRelease) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers and only walks glibc's own arenas under
    // their locks; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(not(target_env = "msvc"))]
    if when == bronze::MemoryRelease::BetweenPhases {
        const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
        // SAFETY: the name is NUL-terminated; a purge reads and writes no value, so every
        // pointer argument is null and the lengths are zero, as mallctl(3) specifies.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                PURGE_ALL.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            );
        }
    }
    #[cfg(target_env = "msvc")]
    let _ = when;
}

/// Runs `f` on a loader built from `settings`, detached from the interpreter, and returns
/// its result as JSON (option values masked).
fn run<T: serde::Serialize>(
    py: Python<'_>,
    settings: &str,
    progress: Option<Py<PyAny>>,
    f: impl FnOnce(&bronze::Ingest) -> bronze::Result<T> + Send,
) -> PyResult<String> {
    let settings = Settings::parse(settings)?;
    let options = settings.options();
    py.detach(|| -> PyResult<String> {
        let ingest = settings.ingest(progress)?;
        let value = f(&ingest).map_err(|e| to_py(&e, &options))?;
        serde_json::to_string(&value)
            .map(|json| options.mask(&json))
            .map_err(|e| BronzeError::new_err(format!("cannot encode the result: {e}")))
    })
}

/// Loads one batch (one or several folders of the same batch id); the report as JSON.
#[pyfunction]
#[pyo3(signature = (folders, settings, progress=None))]
fn ingest(
    py: Python<'_>,
    folders: Vec<String>,
    settings: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    run(py, settings, progress, |ingest| {
        let dirs = bronze::expand_folders(&folders.iter().map(Into::into).collect::<Vec<_>>())?;
        ingest.run_folders(&dirs)
    })
}

/// The pending batches under a landing root, as JSON.
#[pyfunction]
fn pending(py: Python<'_>, root: String, settings: &str) -> PyResult<String> {
    run(py, settings, None, |ingest| ingest.pending(&root))
}

/// The landing zone per entity, as JSON.
#[pyfunction]
fn status(py: Python<'_>, root: String, settings: &str) -> PyResult<String> {
    run(py, settings, None, |ingest| ingest.status(&root))
}

/// Loads the backlog under a landing root; the outcomes as JSON.
#[pyfunction]
#[pyo3(signature = (root, settings, max_batches=None, max_bytes=None, require_success=false, progress=None, max_in_flight=1, unordered=false))]
#[allow(clippy::too_many_arguments)]
fn ingest_pending(
    py: Python<'_>,
    root: String,
    settings: &str,
    max_batches: Option<usize>,
    max_bytes: Option<u64>,
    require_success: bool,
    progress: Option<Py<PyAny>>,
    max_in_flight: usize,
    unordered: bool,
) -> PyResult<String> {
    let options = bronze::PendingOptions::default()
        .with_max_batches(max_batches)
        .with_max_bytes(max_bytes)
        .with_require_success(require_success)
        .with_max_in_flight(max_in_flight)
        .with_unordered(unordered);
    run(py, settings, progress, move |ingest| {
        ingest.run_pending(&root, &options)
    })
}

/// Loads the given pending batches (JSON, as `pending` lists them) in order: one worker's
/// share of a backlog (a Spark or Ray task); the outcomes as JSON.
#[pyfunction]
#[pyo3(signature = (batches, settings, require_success=false, progress=None, unordered=false))]
fn run_batches(
    py: Python<'_>,
    batches: &str,
    settings: &str,
    require_success: bool,
    progress: Option<Py<PyAny>>,
    unordered: bool,
) -> PyResult<String> {
    let batches: Vec<bronze::PendingBatch> = serde_json::from_str(batches)
        .map_err(|e| ConfigError::new_err(format!("batches are not a list of batches: {e}")))?;
    let options = bronze::PendingOptions::default()
        .with_require_success(require_success)
        .with_unordered(unordered);
    run(py, settings, progress, move |ingest| {
        ingest.run_batches(batches, &options)
    })
}

/// Table health rows, as JSON.
#[pyfunction]
fn health(py: Python<'_>, settings: &str) -> PyResult<String> {
    run(py, settings, None, |ingest| {
        Ok(ingest.maintenance().health()?.tables)
    })
}

/// A table's commit history, newest first, as JSON.
#[pyfunction]
#[pyo3(signature = (table, settings, limit=None))]
fn history(
    py: Python<'_>,
    table: String,
    settings: &str,
    limit: Option<usize>,
) -> PyResult<String> {
    run(py, settings, None, move |ingest| {
        ingest.maintenance().history(&table, limit)
    })
}

/// The lakehouse report page (`bronze report --html`), as HTML text; with `landing`, that
/// landing zone's backlog on it.
#[pyfunction]
#[pyo3(signature = (settings, landing=None))]
fn report_html(py: Python<'_>, settings: &str, landing: Option<String>) -> PyResult<String> {
    run(py, settings, None, move |ingest| {
        let mut overview = ingest.maintenance().overview()?;
        if let Some(root) = &landing {
            overview.landing = ingest.status(root)?;
        }
        Ok(overview.to_html())
    })
}

/// The named tables, or every table of the schema.
fn tables_of(
    m: &bronze::maintenance::Maintenance<'_>,
    tables: Option<Vec<String>>,
) -> bronze::Result<Vec<String>> {
    match tables {
        Some(t) => Ok(t),
        None => m.tables(),
    }
}

/// OPTIMIZE (compaction, optionally Z-order) per table, as JSON.
#[pyfunction]
#[pyo3(signature = (tables, settings, target_size=None, zorder=None))]
fn optimize(
    py: Python<'_>,
    tables: Option<Vec<String>>,
    settings: &str,
    target_size: Option<u64>,
    zorder: Option<Vec<String>>,
) -> PyResult<String> {
    run(py, settings, None, move |ingest| {
        let m = ingest.maintenance();
        let zorder = zorder.unwrap_or_default();
        tables_of(&m, tables)?
            .iter()
            .map(|t| m.optimize(t, target_size, &zorder))
            .collect::<bronze::Result<Vec<_>>>()
    })
}

/// VACUUM per table, as JSON.
#[pyfunction]
#[pyo3(signature = (tables, settings, retain_hours=None, dry_run=false, force=false))]
fn vacuum(
    py: Python<'_>,
    tables: Option<Vec<String>>,
    settings: &str,
    retain_hours: Option<u64>,
    dry_run: bool,
    force: bool,
) -> PyResult<String> {
    run(py, settings, None, move |ingest| {
        let m = ingest.maintenance();
        tables_of(&m, tables)?
            .iter()
            .map(|t| {
                let vacuum = m.vacuum_table(t).with_dry_run(dry_run).with_force(force);
                match retain_hours {
                    Some(hours) => vacuum.with_retention_hours(hours),
                    None => vacuum,
                }
                .execute()
            })
            .collect::<bronze::Result<Vec<_>>>()
    })
}

/// A checkpoint per table; `[{"table", "version"}]` as JSON.
#[pyfunction]
fn checkpoint(py: Python<'_>, tables: Option<Vec<String>>, settings: &str) -> PyResult<String> {
    run(py, settings, None, move |ingest| {
        let m = ingest.maintenance();
        tables_of(&m, tables)?
            .iter()
            .map(|t| {
                Ok(bronze::maintenance::CheckpointReport::new(
                    t,
                    m.checkpoint(t)?,
                ))
            })
            .collect::<bronze::Result<Vec<_>>>()
    })
}

/// `bronze maintain`: what `health` recommends, done for every table (worst first,
/// within the bounds); the report as JSON.
#[pyfunction]
#[pyo3(signature = (settings, max_tables=None, max_duration=None, retain_hours=None, force=false))]
fn maintain(
    py: Python<'_>,
    settings: &str,
    max_tables: Option<usize>,
    max_duration: Option<Bound<'_, PyAny>>,
    retain_hours: Option<u64>,
    force: bool,
) -> PyResult<String> {
    let max_duration = max_duration
        .map(|d| duration("max_duration", &d))
        .transpose()?;
    run(py, settings, None, move |ingest| {
        let m = ingest.maintenance();
        let mut op = m
            .maintain()
            .with_max_tables(max_tables)
            .with_max_duration(max_duration)
            .with_force(force);
        if let Some(h) = retain_hours {
            op = op.with_retention_hours(h);
        }
        op.execute()
    })
}

/// A report (`Report`'s fields as JSON, as `ingest` returns them).
fn batch_report(report: &str) -> PyResult<bronze::BatchReport> {
    serde_json::from_str(report)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not a report: {e}")))
}

/// The CLI's exit code for a report given as JSON: 0 clean, 1 corrupt lines kept, 2
/// failed.
#[pyfunction]
fn report_exit_code(report: &str) -> PyResult<u8> {
    Ok(batch_report(report)?.exit_code())
}

/// The first line of the CLI's text for a report given as JSON.
#[pyfunction]
fn report_summary(report: &str) -> PyResult<String> {
    Ok(batch_report(report)?.summary())
}

/// One value of each result type as JSON, by the name of its dataclass: what the
/// package's tests check the dataclasses' fields against.
#[pyfunction]
fn result_shapes() -> PyResult<String> {
    let shapes: serde_json::Map<String, serde_json::Value> = bronze::result_shapes()
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    serde_json::to_string(&shapes)
        .map_err(|e| BronzeError::new_err(format!("cannot encode the result: {e}")))
}

/// The configuration the settings (as `bronze._settings` builds them) give a run, as
/// its debug text: what the package's tests compare across the ways of giving a setting.
#[pyfunction]
fn resolved_settings(settings: &str) -> PyResult<String> {
    Ok(format!("{:?}", Settings::parse(settings)?.config))
}

/// The keys of `bronze.toml` the settings (as `bronze._settings` builds them) leave
/// unset, as dotted paths.
#[pyfunction]
fn unset_settings(settings: &str) -> PyResult<Vec<String>> {
    Ok(Settings::layers(settings)?.unset_keys())
}

/// The argument `name`, a duration given as seconds (a number) or as the settings write
/// it (`90s`, `10m`); `ConfigError` with the settings' text for a bad one.
fn duration(name: &str, value: &Bound<'_, PyAny>) -> PyResult<std::time::Duration> {
    match value.extract::<f64>() {
        Ok(secs) => bronze::Duration::from_secs_f64(secs),
        Err(_) => value.extract::<String>()?.parse(),
    }
    .map(|d| d.0)
    .map_err(|e| ConfigError::new_err(format!("{name}: {e}")))
}

/// Bytes in a size written as the settings take it (`512MB`, `2GiB`, a number of bytes);
/// `ValueError` with the settings' text for a bad one.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    text.parse::<bronze::Size>()
        .map(|s| s.0)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

#[pymodule]
fn _bronze(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BronzeError", py.get_type::<BronzeError>())?;
    m.add("BatchBusy", py.get_type::<BatchBusy>())?;
    m.add("InvalidBatchId", py.get_type::<InvalidBatchId>())?;
    m.add("InvalidLandingPath", py.get_type::<InvalidLandingPath>())?;
    m.add("NoDataFiles", py.get_type::<NoDataFiles>())?;
    m.add("BatchChanging", py.get_type::<BatchChanging>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("TableError", py.get_type::<TableError>())?;
    m.add("NoSuchTable", py.get_type::<NoSuchTable>())?;
    m.add("AlreadyLoaded", py.get_type::<AlreadyLoaded>())?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(ingest, m)?)?;
    m.add_function(wrap_pyfunction!(pending, m)?)?;
    m.add_function(wrap_pyfunction!(status, m)?)?;
    m.add_function(wrap_pyfunction!(ingest_pending, m)?)?;
    m.add_function(wrap_pyfunction!(run_batches, m)?)?;
    m.add_function(wrap_pyfunction!(health, m)?)?;
    m.add_function(wrap_pyfunction!(history, m)?)?;
    m.add_function(wrap_pyfunction!(report_html, m)?)?;
    m.add_function(wrap_pyfunction!(optimize, m)?)?;
    m.add_function(wrap_pyfunction!(vacuum, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(maintain, m)?)?;
    m.add_function(wrap_pyfunction!(report_exit_code, m)?)?;
    m.add_function(wrap_pyfunction!(report_summary, m)?)?;
    m.add_function(wrap_pyfunction!(result_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(resolved_settings, m)?)?;
    m.add_function(wrap_pyfunction!(unset_settings, m)?)?;
    Ok(())
}
