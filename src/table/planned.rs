//! Commits to tables with features deltalake's commit refuses but bronze's writes honour
//! ([`super::writable`] says which): row tracking, domain metadata (liquid clustering
//! keeps its columns there), identity columns while no column is one, and the legacy
//! writer features (constraints, invariants, generated columns, the change data feed)
//! while nothing in the table uses them.
//!
//! Such a commit is planned for one version and put there only if absent
//! ([`super::put::put_operation`], which runs no deltalake protocol check): row tracking
//! gives every new file `baseRowId` above the table's high-water mark and
//! `defaultRowCommitVersion` = the commit's version, and advances the mark in the
//! `delta.rowTracking` domain, so a commit that lost its version to another writer is
//! never retried with the same bytes. An append is planned again for the next free
//! version (unless the winner changed the schema or protocol); a commit that removes
//! files fails with a conflict that the write plans again from the table's new version
//! ([`super::is_replannable_conflict`]). Every other writer's domains are left as they
//! are: bronze's commits name only `delta.rowTracking`.

use deltalake::DeltaTableError;
use deltalake::kernel::Action;
use deltalake::kernel::transaction::{CommitConflictError, TransactionError};

/// The domain where row tracking keeps its high-water mark.
pub(crate) const ROW_TRACKING_DOMAIN: &str = "delta.rowTracking";

/// The domain where liquid clustering keeps its columns.
pub(crate) const CLUSTERING_DOMAIN: &str = "delta.clustering";

/// The commit tag that says whether the rows a commit copied kept their row ids.
const PRESERVED_TAG: &str = "delta.rowTracking.preserved";

/// What a commit on a table must do beyond deltalake's own commit (see the module's
/// doc), read from its snapshot ([`Duties::read`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Duties {
    /// Whether deltalake's commit refuses the table: commits take [`commit_planned`].
    pub(crate) planned: bool,
    /// Row tracking (supported and not suspended): the high-water mark of the row ids
    /// assigned so far (`-1`: none).
    pub(crate) row_ids: Option<i64>,
    /// Row tracking is enabled: commits say whether copied rows kept their ids.
    pub(crate) row_tracking_enabled: bool,
    /// Row tracking's materialized columns, which rows a commit copies keep their ids
    /// and commit versions in.
    pub(crate) materialized: Option<super::row_ids::Materialized>,
    /// Liquid clustering's columns (logical names; nested ones joined by `.`).
    pub(crate) clustering: Option<Vec<String>>,
    /// The same as the domain names them: physical paths.
    pub(crate) clustering_paths: Vec<Vec<String>>,
    /// Column mapping: the physical names and field ids data files use.
    pub(crate) mapping: Option<super::mapping::Mapping>,
    /// In-commit timestamps are enabled: the in-commit timestamp (ms) of the snapshot's
    /// commit, which every commit's own must exceed.
    pub(crate) last_commit_timestamp: Option<i64>,
    /// The table's CHECK constraints, which every row written must meet.
    pub(crate) constraints: Vec<super::constraints::Constraint>,
}

impl Duties {
    /// The duties of a commit on `t` at `snapshot`: none, without reading anything, for a
    /// table deltalake's commit accepts; otherwise the domains are read from the log.
    pub(crate) async fn read(
        t: &deltalake::DeltaTable,
        snapshot: &deltalake::table::state::DeltaTableState,
    ) -> Result<Duties, DeltaTableError> {
        use buoyant_kernel::table_features::TableFeature;
        use deltalake::kernel::transaction::PROTOCOL;

        // From the table's own features, whatever deltalake's commit accepts.
        let config = snapshot.snapshot().table_configuration();
        let props = config.table_properties();
        let row_tracking = config.is_feature_supported(&TableFeature::RowTracking)
            && props.row_tracking_suspended != Some(true);
        let clustered = config.is_feature_supported(&TableFeature::ClusteredTable);
        let mapping = super::mapping::Mapping::of(snapshot)?;
        let refused = PROTOCOL.can_write_to(snapshot).is_err();
        let stamped = config.is_feature_enabled(&TableFeature::InCommitTimestamp);
        // A constraint bronze does not evaluate refused the table before any write.
        let constraints =
            super::constraints::of_properties(&props.unknown_properties).unwrap_or_default();
        if !refused && !row_tracking && !clustered && mapping.is_none() && !stamped {
            return Ok(Duties {
                constraints,
                ..Duties::default()
            });
        }
        let last_commit_timestamp = match stamped {
            true => Some(commit_timestamp(t, snapshot.version()).await?),
            false => None,
        };
        let mut duties = Duties {
            planned: true,
            row_ids: None,
            row_tracking_enabled: row_tracking && props.enable_row_tracking == Some(true),
            materialized: super::row_ids::Materialized::of(snapshot),
            clustering: None,
            clustering_paths: Vec::new(),
            mapping,
            last_commit_timestamp,
            constraints,
        };
        if !row_tracking && !clustered {
            return Ok(duties);
        }
        let (mark, columns) = read_domains(t, snapshot.version()).await?;
        if row_tracking {
            duties.row_ids = Some(row_id_mark(mark.as_deref())?);
        }
        if clustered {
            duties.set_clustering(columns.as_deref());
        }
        Ok(duties)
    }

    /// Liquid clustering's columns, from the configuration of its domain (`None`: no
    /// domain), which names physical columns: their paths, and their logical names
    /// (statistics are asked by logical name).
    fn set_clustering(&mut self, domain: Option<&str>) {
        self.clustering_paths = domain.map(clustering_paths).unwrap_or_default();
        let physical: Vec<String> = self.clustering_paths.iter().map(|p| p.join(".")).collect();
        let logical = physical
            .into_iter()
            .map(|c| match &self.mapping {
                Some(m) => m.logical_name(&c).unwrap_or(c),
                None => c,
            })
            .collect();
        self.clustering = Some(logical);
    }

    /// Fails when a row of `batches` violates one of the table's CHECK constraints, as
    /// Spark fails such a write: nothing is written.
    pub(crate) fn check_rows(
        &self,
        batches: &[arrow::array::RecordBatch],
    ) -> Result<(), DeltaTableError> {
        use arrow::array::Array as _;
        let total: usize = batches.iter().map(|b| b.num_rows()).sum();
        for b in batches {
            let found = super::constraints::violation(&self.constraints, b)?;
            let Some(v) = found else {
                continue;
            };
            let id = b
                .column_by_name(crate::naming::ID)
                .and_then(|c| c.as_any().downcast_ref::<arrow::array::StringArray>())
                .filter(|c| c.is_valid(v.first))
                .map(|c| format!(" (the first: `_id` {})", c.value(v.first)))
                .unwrap_or_default();
            return Err(DeltaTableError::Generic(format!(
                "CHECK constraint `{}` ({}) is false or null for {} of the {total} rows to \
                 write{id}; as Spark does, nothing was written: fix the rows and rerun the \
                 batch, or drop the constraint (`ALTER TABLE … DROP CONSTRAINT {}`)",
                v.name, v.text, v.rows, v.name
            )));
        }
        Ok(())
    }

    /// `stats` with the clustering columns added: the protocol asks statistics of them in
    /// every file a clustered table adds.
    pub(crate) fn stats_columns(
        &self,
        mut stats: super::shape::StatsColumns,
        schema: &arrow::datatypes::Schema,
    ) -> super::shape::StatsColumns {
        use buoyant_kernel::table_properties::DataSkippingNumIndexedCols;
        let Some(clustering) = self.clustering.as_ref().filter(|c| !c.is_empty()) else {
            return stats;
        };
        stats.clustering = self.clustering_paths.clone();
        let mut columns = match (stats.columns.take(), stats.num_indexed) {
            (Some(columns), _) => columns,
            (None, DataSkippingNumIndexedCols::AllColumns) => return stats,
            // The writer's own count of leaves covers them, nested ones too (a list of
            // names would not: the writer matches it against leaf names only).
            (None, DataSkippingNumIndexedCols::NumColumns(n))
                if clustering
                    .iter()
                    .all(|c| first_leaves(schema, n as usize).contains(c)) =>
            {
                return stats;
            }
            (None, DataSkippingNumIndexedCols::NumColumns(n)) => {
                first_leaf_columns(schema, n as usize)
            }
        };
        for c in clustering {
            if !columns.contains(c) {
                columns.push(c.clone());
            }
        }
        stats.columns = Some(columns);
        stats
    }
}

/// The first `n` leaf columns of `schema` (a materialized row-tracking column left out),
/// nested ones as `a.b`: the columns the writer keeps statistics of for
/// `dataSkippingNumIndexedCols = n`.
fn first_leaves(schema: &arrow::datatypes::Schema, n: usize) -> Vec<String> {
    fn leaves(prefix: &str, f: &arrow::datatypes::Field, out: &mut Vec<String>) {
        let name = match prefix {
            "" => f.name().clone(),
            p => format!("{p}.{}", f.name()),
        };
        match f.data_type() {
            arrow::datatypes::DataType::Struct(fields) => {
                fields.iter().for_each(|c| leaves(&name, c, out));
            }
            _ => out.push(name),
        }
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        if !f.metadata().contains_key(super::row_ids::MATERIALIZED) {
            leaves("", f, &mut out);
        }
    }
    out.truncate(n);
    out
}

/// The top-level columns of `schema` whose first leaf is among its first `n` leaves
/// (Delta's `dataSkippingNumIndexedCols`), as names.
fn first_leaf_columns(schema: &arrow::datatypes::Schema, n: usize) -> Vec<String> {
    fn leaves(t: &arrow::datatypes::DataType) -> usize {
        match t {
            arrow::datatypes::DataType::Struct(fields) => fields
                .iter()
                .map(|f| leaves(f.data_type()))
                .sum::<usize>()
                .max(1),
            _ => 1,
        }
    }
    let mut seen = 0;
    let mut out = Vec::new();
    // A materialized row-tracking column gets none (as Spark writes it).
    let materialized =
        |f: &&arrow::datatypes::FieldRef| f.metadata().contains_key(super::row_ids::MATERIALIZED);
    for f in schema.fields().iter().filter(|f| !materialized(f)) {
        if seen >= n {
            break;
        }
        out.push(f.name().clone());
        seen += leaves(f.data_type());
    }
    out
}

/// The `delta.rowTracking` and `delta.clustering` domains' configurations at `version`
/// of `t`, read with the kernel (deltalake reads no `delta.*` domain).
async fn read_domains(
    t: &deltalake::DeltaTable,
    version: u64,
) -> Result<(Option<String>, Option<String>), DeltaTableError> {
    let mut root = t.table_url().clone();
    if !root.path().ends_with('/') {
        root.set_path(&format!("{}/", root.path()));
    }
    let engine = t.log_store().engine(None);
    // On a blocking thread, as delta-rs runs the kernel: its engine blocks on the
    // runtime for object store reads.
    tokio::task::spawn_blocking(move || {
        let snapshot = buoyant_kernel::Snapshot::builder_for(root)
            .at_version(version)
            .build(engine.as_ref())?;
        let mark = snapshot.get_domain_metadata_internal(ROW_TRACKING_DOMAIN, engine.as_ref())?;
        let columns = snapshot.get_domain_metadata_internal(CLUSTERING_DOMAIN, engine.as_ref())?;
        Ok::<_, buoyant_kernel::Error>((mark, columns))
    })
    .await
    .map_err(|e| DeltaTableError::Generic(format!("reading the table's domains: {e}")))?
    .map_err(|e| DeltaTableError::Generic(format!("reading the table's domains: {e}")))
}

/// `rowIdHighWaterMark` of a `delta.rowTracking` configuration (Databricks adds other
/// keys beside it).
pub(crate) fn high_water_mark(configuration: &str) -> Option<i64> {
    serde_json::from_str::<serde_json::Value>(configuration).ok()?["rowIdHighWaterMark"].as_i64()
}

/// The columns of a `delta.clustering` configuration as paths (a nested column's field
/// names in order): `{"clusteringColumns":[["a"],["b","c"]]}` (Delta 3.2 and the
/// kernel) or the protocol's example form, a list of names.
fn clustering_paths(configuration: &str) -> Vec<Vec<String>> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(configuration) else {
        return Vec::new();
    };
    let Some(columns) = v["clusteringColumns"].as_array() else {
        return Vec::new();
    };
    columns
        .iter()
        .filter_map(|c| match c {
            serde_json::Value::String(s) => Some(vec![s.clone()]),
            serde_json::Value::Array(path) => path
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect(),
            _ => None,
        })
        .collect()
}

/// Rows of an add, from its statistics.
fn num_records(add: &deltalake::kernel::Add) -> Option<i64> {
    let stats = add.stats.as_deref()?;
    serde_json::from_str::<serde_json::Value>(stats).ok()?["numRecords"].as_i64()
}

/// `actions` as a commit at `version` writes them under `duties`: with row ids, each new
/// file's `baseRowId` above the high-water mark `mark` and its `defaultRowCommitVersion`
/// the version, then the domain with the new mark. Removes keep the fields the file's
/// add had (the caller took them from the snapshot).
fn with_row_ids(
    actions: &[Action],
    version: u64,
    mark: Option<i64>,
) -> Result<Vec<Action>, DeltaTableError> {
    let Some(mut mark) = mark else {
        return Ok(actions.to_vec());
    };
    let mut out = Vec::with_capacity(actions.len() + 1);
    let mut assigned = false;
    for action in actions {
        match action {
            Action::Add(add) if add.base_row_id.is_none() => {
                let rows = num_records(add).ok_or_else(|| {
                    DeltaTableError::Generic(format!(
                        "data file {} has no row count in its statistics: row ids cannot be \
                         assigned",
                        add.path
                    ))
                })?;
                let mut add = add.clone();
                add.base_row_id = Some(mark + 1);
                add.default_row_commit_version = Some(version as i64);
                mark += rows;
                assigned = true;
                out.push(Action::Add(add));
            }
            a => out.push(a.clone()),
        }
    }
    if assigned {
        out.push(Action::DomainMetadata(deltalake::kernel::DomainMetadata {
            domain: ROW_TRACKING_DOMAIN.to_string(),
            configuration: serde_json::json!({ "rowIdHighWaterMark": mark }).to_string(),
            removed: false,
        }));
    }
    Ok(out)
}

/// Refuses a commit of `actions` on `snapshot`'s table when bronze does not write the
/// table ([`super::writable::refusal`]: a feature it does not write, partitions, an
/// append-only table the commit would remove rows from), with nothing committed. Every
/// commit checks it: the up-front check of a batch leaves out some tables (a schema of
/// many tables, maintenance), and deltalake's own check is skipped on the planned path
/// and does not know partitions.
pub(crate) fn refuse_unwritable(
    snapshot: &deltalake::table::state::DeltaTableState,
    actions: &[Action],
) -> Result<(), DeltaTableError> {
    let data_removes = actions
        .iter()
        .any(|a| matches!(a, Action::Remove(r) if r.data_change));
    let removes = if data_removes {
        super::writable::Removes::Files
    } else {
        super::writable::Removes::Nothing
    };
    let config = snapshot.snapshot().table_configuration();
    match super::writable::refusal(config, removes) {
        Some(r) => Err(DeltaTableError::Generic(format!(
            "the table has {}: {}; nothing was committed",
            r.feature, r.fix
        ))),
        None => Ok(()),
    }
}

/// How many versions an append follows other writers' commits before it gives up as a
/// conflict (its write plans again).
const MAX_FOLLOWED: u64 = 64;

/// Row tracking's high-water mark, from the configuration of its domain (`None`: no
/// domain, no row id assigned yet: `-1`).
fn row_id_mark(domain: Option<&str>) -> Result<i64, DeltaTableError> {
    match domain {
        Some(c) => high_water_mark(c).ok_or_else(|| {
            DeltaTableError::Generic(format!(
                "the table's `{ROW_TRACKING_DOMAIN}` domain has no readable \
                 rowIdHighWaterMark: {c}"
            ))
        }),
        None => Ok(-1),
    }
}

/// What a commit is planned on: table `t` at `snapshot`, under the `duties` read from it.
#[derive(Clone, Copy)]
pub(crate) struct PlannedOn<'a> {
    pub(crate) t: &'a deltalake::DeltaTable,
    pub(crate) snapshot: &'a deltalake::table::state::DeltaTableState,
    pub(crate) duties: &'a Duties,
}

/// A log entry to commit: its actions, the operation it records and its properties.
pub(crate) struct LogEntry {
    pub(crate) properties: deltalake::kernel::transaction::CommitProperties,
    pub(crate) actions: Vec<Action>,
    /// Whether the commit writes rows of files it removes again (their row ids kept only
    /// where the table materializes them).
    pub(crate) copies: bool,
    pub(crate) operation: deltalake::protocol::DeltaOperation,
}

/// Commits `entry` on `at`'s snapshot under its duties (see the module's doc): put at
/// the version after the snapshot's, an append planned again for the next free version
/// while the winners changed neither schema nor protocol. The version.
pub(crate) async fn commit_planned(
    at: PlannedOn<'_>,
    entry: LogEntry,
) -> Result<u64, DeltaTableError> {
    let PlannedOn {
        t,
        snapshot,
        duties,
    } = at;
    let log_store = t.log_store();
    let mut info = commit_info(duties, entry.copies);
    let appends_only = entry.actions.iter().all(|a| matches!(a, Action::Add(_)));
    let mut version = snapshot.version() + 1;
    let mut winners = Winners {
        row_id_mark: duties.row_ids,
        commit_timestamp: duties.last_commit_timestamp,
    };
    loop {
        if version > snapshot.version() + MAX_FOLLOWED {
            return Err(conflict(CommitConflictError::ConcurrentAppend));
        }
        let planned = with_row_ids(&entry.actions, version, winners.row_id_mark)?;
        if let Some(last) = winners.commit_timestamp {
            // The commit's time, which Spark reads as such (history, time travel): now,
            // or 1 ms after the previous commit's when this clock is behind it, so the
            // timestamps grow with the versions as the protocol asks.
            let at = chrono::Utc::now().timestamp_millis().max(last + 1);
            info.insert("timestamp".to_string(), at.into());
            info.insert("inCommitTimestamp".to_string(), at.into());
        }
        let operation = entry.operation.clone();
        let put = super::put::put_operation(
            &log_store,
            version,
            entry.properties.clone(),
            planned,
            operation,
            &info,
        );
        if put.await? {
            return Ok(version);
        }
        if !appends_only {
            return Err(conflict(CommitConflictError::ConcurrentAppend));
        }
        version = winners.follow(&log_store, version).await?;
        tracing::debug!(
            version,
            "version taken by another writer; planned again for the next"
        );
    }
}

/// The `commitInfo` keys a planned commit sets: with row tracking enabled, whether the
/// rows it copies (`copies`) kept their ids.
fn commit_info(duties: &Duties, copies: bool) -> serde_json::Map<String, serde_json::Value> {
    let mut info = serde_json::Map::new();
    if duties.row_tracking_enabled {
        // Copies keep their ids in the materialized columns (`super::row_ids`).
        let lost = copies && duties.materialized.is_none();
        let preserved = if lost { "false" } else { "true" };
        info.insert(
            "tags".to_string(),
            serde_json::json!({ PRESERVED_TAG: preserved }),
        );
    }
    info
}

/// What the commits of other writers a planned commit follows leave it to build on.
struct Winners {
    /// The row ids' high-water mark.
    row_id_mark: Option<i64>,
    /// With in-commit timestamps, the last commit's.
    commit_timestamp: Option<i64>,
}

impl Winners {
    /// Reads the winners' commits from `version` up to the next free version, which it
    /// gives; a conflict when one changed the table's schema or protocol.
    async fn follow(
        &mut self,
        log_store: &deltalake::logstore::LogStoreRef,
        mut version: u64,
    ) -> Result<u64, DeltaTableError> {
        while let Some(entry) = log_store.read_commit_entry(version).await? {
            let winner = Winner::of(&entry);
            if winner.changed_table {
                return Err(conflict(CommitConflictError::MetadataChanged));
            }
            if winner.row_id_mark.is_some() {
                self.row_id_mark = winner.row_id_mark;
            }
            if self.commit_timestamp.is_some() {
                self.commit_timestamp = Some(winner.commit_timestamp.ok_or_else(|| {
                    DeltaTableError::Generic(format!(
                        "version {version} has no inCommitTimestamp, which the table's \
                         in-commit timestamps ask of every commit"
                    ))
                })?);
            }
            version += 1;
        }
        Ok(version)
    }
}

/// The in-commit timestamp of `version` of `t`, read from its commit.
async fn commit_timestamp(t: &deltalake::DeltaTable, version: u64) -> Result<i64, DeltaTableError> {
    let entry = t.log_store().read_commit_entry(version).await?;
    entry
        .as_deref()
        .and_then(|e| Winner::of(e).commit_timestamp)
        .ok_or_else(|| {
            DeltaTableError::Generic(format!(
                "the table has in-commit timestamps enabled, but its version {version} has \
                 no inCommitTimestamp to follow"
            ))
        })
}

fn conflict(c: CommitConflictError) -> DeltaTableError {
    DeltaTableError::Transaction {
        source: TransactionError::CommitConflict(c),
    }
}

/// What a commit that took the version an append was planned for changed that the
/// append must follow.
#[derive(Default)]
struct Winner {
    /// It changed the schema, properties, protocol or clustering columns.
    changed_table: bool,
    /// The row-id high-water mark it set.
    row_id_mark: Option<i64>,
    /// Its in-commit timestamp.
    commit_timestamp: Option<i64>,
}

impl Winner {
    fn of(entry: &[u8]) -> Winner {
        let mut w = Winner::default();
        for line in entry.split(|b| *b == b'\n') {
            let Ok(action) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            if action.get("metaData").is_some() || action.get("protocol").is_some() {
                w.changed_table = true;
            }
            let domain = &action["domainMetadata"];
            // New clustering columns ask statistics the append may not have.
            if domain["domain"].as_str() == Some(CLUSTERING_DOMAIN) {
                w.changed_table = true;
            }
            if domain["domain"].as_str() == Some(ROW_TRACKING_DOMAIN) {
                w.row_id_mark = domain["configuration"].as_str().and_then(high_water_mark);
            }
            if let Some(t) = action["commitInfo"]["inCommitTimestamp"].as_i64() {
                w.commit_timestamp = Some(t);
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(path: &str, rows: i64) -> Action {
        Action::Add(deltalake::kernel::Add {
            path: path.to_string(),
            stats: Some(format!(r#"{{"numRecords":{rows}}}"#)),
            data_change: true,
            ..Default::default()
        })
    }

    #[test]
    fn new_files_get_row_ids_above_the_mark_and_the_commits_version() {
        let removed = Action::Remove(deltalake::kernel::Remove {
            path: "old".into(),
            base_row_id: Some(3),
            default_row_commit_version: Some(1),
            data_change: true,
            ..Default::default()
        });
        let out = with_row_ids(&[removed.clone(), add("a", 10), add("b", 5)], 7, Some(9)).unwrap();
        let Action::Remove(r) = &out[0] else { panic!() };
        assert_eq!(
            (r.base_row_id, r.default_row_commit_version),
            (Some(3), Some(1))
        );
        let ids: Vec<_> = out[1..3]
            .iter()
            .map(|a| match a {
                Action::Add(a) => (a.base_row_id, a.default_row_commit_version),
                _ => panic!(),
            })
            .collect();
        assert_eq!(ids, [(Some(10), Some(7)), (Some(20), Some(7))]);
        let Action::DomainMetadata(d) = &out[3] else {
            panic!()
        };
        assert_eq!(d.domain, ROW_TRACKING_DOMAIN);
        assert_eq!(high_water_mark(&d.configuration), Some(24));
        // No row tracking: the actions as they are; a file without a row count refused.
        assert_eq!(with_row_ids(&[add("a", 1)], 7, None).unwrap().len(), 1);
        let no_stats = Action::Add(deltalake::kernel::Add::default());
        assert!(with_row_ids(&[no_stats], 1, Some(-1)).is_err());
    }

    #[test]
    fn domains_are_read_in_every_form_engines_write() {
        assert_eq!(
            high_water_mark(r#"{"rowIdHighWaterMark":9,"domainName":"delta.rowTracking"}"#),
            Some(9)
        );
        assert_eq!(high_water_mark("{}"), None);
        assert_eq!(
            clustering_paths(
                r#"{"clusteringColumns":[["year"],["a","b"]],"domainName":"delta.clustering"}"#
            ),
            [vec!["year"], vec!["a", "b"]]
        );
        assert_eq!(
            clustering_paths(r#"{"clusteringColumns":["id"]}"#),
            [["id"]]
        );
        assert!(clustering_paths("not json").is_empty());
        let w = Winner::of(
            b"{\"commitInfo\":{}}\n{\"domainMetadata\":{\"domain\":\"delta.rowTracking\",\"configuration\":\"{\\\"rowIdHighWaterMark\\\":41}\",\"removed\":false}}\n",
        );
        assert_eq!((w.changed_table, w.row_id_mark), (false, Some(41)));
        assert!(Winner::of(b"{\"metaData\":{}}").changed_table);
    }

    #[test]
    fn nested_clustering_columns_among_the_indexed_leaves_keep_the_writers_count() {
        use arrow::datatypes::{DataType, Field, Fields, Schema};
        let nested = Fields::from(vec![Field::new("k", DataType::Utf8, true)]);
        let schema = Schema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("s", DataType::Struct(nested), true),
            Field::new("c", DataType::Utf8, true),
        ]);
        let duties = Duties {
            clustering: Some(vec!["s.k".into()]),
            clustering_paths: vec![vec!["s".into(), "k".into()]],
            ..Default::default()
        };
        let mut stats = super::super::shape::StatsColumns::new_table();
        stats.num_indexed =
            buoyant_kernel::table_properties::DataSkippingNumIndexedCols::NumColumns(2);
        let stats = duties.stats_columns(stats, &schema);
        assert_eq!(stats.columns, None);
        assert_eq!(stats.clustering, [["s", "k"]]);
    }

    #[test]
    fn clustering_columns_get_statistics_beyond_the_indexed_ones() {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Schema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Utf8, true),
        ]);
        let duties = Duties {
            clustering: Some(vec!["c".into()]),
            ..Default::default()
        };
        let mut stats = super::super::shape::StatsColumns::new_table();
        stats.num_indexed =
            buoyant_kernel::table_properties::DataSkippingNumIndexedCols::NumColumns(1);
        let stats = duties.stats_columns(stats, &schema);
        assert_eq!(stats.columns, Some(vec!["a".to_string(), "c".to_string()]));
    }
}
