//! After a run: the tables it created or widened registered in the catalog of
//! `[metastore]`. A catalog that is down or refuses fails no load: the tables not
//! registered are in the report (exit code 1), and `bronze register` catches up.

use super::context::Context;
use crate::batch::BatchKey;
use crate::metastore::pending::Unregistered;
use crate::naming::TableName;
use crate::run_control::TableWrite;

/// Registers `tables` (the run's new or widened ones, [`to_register`]) in the catalog
/// of `[metastore]`, once in the database of each of the batch `key`'s landing paths
/// (one database when the setting names no `{source}`/`{entity}`); each table that was
/// not registered, with why. Called once the run is recorded: a slow catalog delays no
/// record.
pub(super) fn register_new(ctx: &Context, tables: &[TableName], key: &BatchKey) -> Vec<String> {
    let mut databases: Vec<&str> = key.landing_paths.iter().map(String::as_str).collect();
    let per_path = ctx
        .config
        .metastore
        .as_ref()
        .and_then(|m| m.database.as_deref());
    if !per_path.is_some_and(|t| t.contains("{source}") || t.contains("{entity}")) {
        databases.truncate(1);
    }
    if databases.is_empty() {
        databases.push("");
    }
    databases
        .into_iter()
        .flat_map(|path| register_tables(ctx, tables, path))
        .collect()
}

/// The tables of `writes` a catalog must hear of: created by the run (version 0) or
/// given columns; each once (none without `[metastore]`). bronze's own tables only with
/// `own_tables`, and then `_run_control` with the first tables a run creates.
pub(super) fn to_register(ctx: &Context, writes: &[TableWrite]) -> Vec<TableName> {
    let Some(cfg) = &ctx.config.metastore else {
        return Vec::new();
    };
    let own_tables = cfg.own_tables;
    let mut tables: Vec<TableName> = writes
        .iter()
        .filter(|w| matches!(&w.result, Ok(c) if c.version == 0 || !w.added.is_empty()))
        .filter(|w| own_tables || !crate::naming::is_own_table(w.table.as_str()))
        .map(|w| w.table.clone())
        .collect();
    let created = writes
        .iter()
        .any(|w| matches!(&w.result, Ok(c) if c.version == 0));
    if own_tables && created {
        tables.push(TableName::system(crate::naming::RUN_CONTROL_TABLE));
    }
    tables.sort();
    tables.dedup();
    tables
}

/// Registers `tables` in the catalog of `[metastore]` (nothing without one), in the
/// database of the batch's `landing_path`, with the tables earlier runs could not register
/// there ([`crate::metastore::pending`]); each table that is still not registered, with
/// why, and recorded for the next run.
fn register_tables(ctx: &Context, tables: &[TableName], landing_path: &str) -> Vec<String> {
    use crate::metastore::pending::Pending;
    let Some(cfg) = &ctx.config.metastore else {
        return Vec::new();
    };
    let m = crate::maintenance::Maintenance::new(&ctx.catalog);
    let database = cfg.database.as_deref().map_or_else(
        || ctx.catalog.schema().to_string(),
        |t| crate::metastore::database_for(t, landing_path),
    );
    let said = |table: &str, why: &str| format!("{database}.{table}: {why}");
    let pending = match m.schema_folder() {
        Ok((store, dir)) => Pending::new(store, &dir),
        Err(e) => {
            return tables
                .iter()
                .map(|t| said(t.as_str(), &crate::error::chain(&e)))
                .collect();
        }
    };
    let earlier = earlier_records(&m, &pending, &database);
    let mut todo: Vec<&str> = tables.iter().map(TableName::as_str).collect();
    todo.extend(earlier.iter().map(|u| u.table.as_str()));
    todo.sort_unstable();
    todo.dedup();
    if todo.is_empty() {
        return Vec::new();
    }
    let results: Vec<(&str, Result<(), String>)> =
        match crate::metastore::Registrar::connect(&m, cfg, database.clone()) {
            Ok(r) => todo
                .iter()
                .map(|t| (*t, r.register(t).result.map(|_| ())))
                .collect(),
            Err(e) => todo
                .iter()
                .map(|t| (*t, Err(crate::error::chain(&e))))
                .collect(),
        };
    let records = Records {
        m: &m,
        pending: &pending,
        database: &database,
        landing_path,
        earlier: &earlier,
    };
    results
        .into_iter()
        .filter_map(|(table, result)| Some(said(table, &records.note(table, result)?)))
        .collect()
}

/// The records of one database's tables not registered ([`crate::metastore::pending`]).
struct Records<'a> {
    m: &'a crate::maintenance::Maintenance<'a>,
    pending: &'a crate::metastore::pending::Pending,
    database: &'a str,
    landing_path: &'a str,
    /// Those earlier runs wrote.
    earlier: &'a [Unregistered],
}

impl Records<'_> {
    /// Why `table` is not registered after `result` (`None`: it is), its record for the
    /// next run written (or deleted once it is registered).
    fn note(&self, table: &str, result: Result<(), String>) -> Option<String> {
        let why = match result {
            Ok(()) => {
                // A record that cannot be deleted now is by the table's next registration.
                let _ = self.m.block_on(self.pending.clear(self.database, table));
                return None;
            }
            Err(why) => why,
        };
        let record = Unregistered {
            database: self.database.to_string(),
            table: table.to_string(),
            landing_path: self.landing_path.to_string(),
            reason: why.clone(),
            since_micros: crate::batch::now_micros(),
        };
        let before = self.earlier.iter().find(|u| u.table == table);
        Some(match self.m.block_on(self.pending.record(record, before)) {
            Ok(()) => why,
            Err(e) => {
                format!("{why} (and not recorded for the next run: {e}; run `bronze register`)")
            }
        })
    }
}

/// The records of tables of `database` earlier runs could not register; a record whose
/// table is no longer in the lakehouse is deleted.
fn earlier_records(
    m: &crate::maintenance::Maintenance<'_>,
    pending: &crate::metastore::pending::Pending,
    database: &str,
) -> Vec<crate::metastore::pending::Unregistered> {
    let mut earlier: Vec<_> = m
        .block_on(pending.list())
        .unwrap_or_default()
        .into_iter()
        .filter(|u| u.database == database)
        .collect();
    if earlier.is_empty() {
        return earlier;
    }
    let Ok(present) = m.tables() else {
        return earlier;
    };
    earlier.retain(|u| {
        let kept = present.contains(&u.table);
        if !kept {
            let _ = m.block_on(pending.clear(database, &u.table));
        }
        kept
    });
    earlier
}
