//! The tables a run created or widened, registered in the catalog of `[metastore]`.
//! Before the run's record is written each is recorded as not registered yet
//! ([`crate::metastore::pending`]), so a run that dies before it registers them leaves
//! them to the next; once the run is recorded the catalog hears of them, with those
//! earlier runs left unregistered in the same databases. A catalog that is down or
//! refuses fails no load: the tables not registered are in the report (exit code 1) and
//! stay recorded for the next run, or `bronze register`.

use super::context::Context;
use crate::batch::BatchKey;
use crate::maintenance::Maintenance;
use crate::metastore::pending::{Pending, Unregistered};
use crate::naming::TableName;
use crate::run_control::TableWrite;

/// A database a run registers in, and the landing path it is the database of.
#[derive(Clone, Debug)]
pub(super) struct Database {
    landing_path: String,
    name: String,
}

/// Records each table of `writes` a catalog must hear of ([`tables_to_register`]) as not
/// registered yet, in the database of each of the batch `key`'s landing paths (one
/// database when the setting names no `{source}`/`{entity}`); the run's databases
/// (none without `[metastore]`). Called before the run's record is written.
pub(super) fn to_register(ctx: &Context, writes: &[TableWrite], key: &BatchKey) -> Vec<Database> {
    let Some(cfg) = &ctx.config.metastore else {
        return Vec::new();
    };
    let databases = databases(ctx, cfg, key);
    let tables = tables_to_register(cfg, writes);
    if tables.is_empty() {
        return databases;
    }
    let m = Maintenance::new(&ctx.catalog);
    let Ok((store, dir)) = m.schema_folder() else {
        return databases;
    };
    let pending = Pending::new(store, &dir);
    let earlier = m.block_on(pending.list()).unwrap_or_default();
    for db in &databases {
        for (table, version) in &tables {
            let record = Unregistered {
                database: db.name.clone(),
                table: table.to_string(),
                landing_path: db.landing_path.clone(),
                reason: "not registered yet: the run that created or widened it ended before it registered it".into(),
                since_micros: crate::batch::now_micros(),
                version: *version,
            };
            let before = earlier
                .iter()
                .find(|u| u.database == db.name && u.table == table.as_str());
            // Not recorded (the store refused): the run registers it all the same, and
            // records it if that fails.
            let _ = m.block_on(pending.record(record, before));
        }
    }
    databases
}

/// The database of each of the batch `key`'s landing paths; one when the setting names
/// no `{source}`/`{entity}`.
fn databases(ctx: &Context, cfg: &crate::config::MetastoreConfig, key: &BatchKey) -> Vec<Database> {
    let mut paths: Vec<&str> = key.landing_paths.iter().map(String::as_str).collect();
    if !cfg
        .database
        .as_deref()
        .is_some_and(crate::metastore::is_template)
    {
        paths.truncate(1);
    }
    if paths.is_empty() {
        paths.push("");
    }
    paths
        .into_iter()
        .map(|path| Database {
            landing_path: path.to_string(),
            name: cfg.database.as_deref().map_or_else(
                || ctx.catalog.schema().to_string(),
                |t| crate::metastore::database_for(t, path),
            ),
        })
        .collect()
}

/// The tables of `writes` a catalog must hear of, with the version the run committed:
/// created by the run (version 0) or given columns; each once. bronze's own tables only
/// with `own_tables`, and then `_run_control` with the first tables a run creates.
fn tables_to_register(
    cfg: &crate::config::MetastoreConfig,
    writes: &[TableWrite],
) -> Vec<(TableName, u64)> {
    let mut tables: Vec<(TableName, u64)> = writes
        .iter()
        .filter_map(|w| match &w.result {
            Ok(c) if c.version == 0 || !w.added.is_empty() => Some((w.table.clone(), c.version)),
            _ => None,
        })
        .filter(|(t, _)| cfg.own_tables || !crate::naming::is_own_table(t.as_str()))
        .collect();
    let created = writes
        .iter()
        .any(|w| matches!(&w.result, Ok(c) if c.version == 0));
    if cfg.own_tables && created {
        tables.push((TableName::system(crate::naming::RUN_CONTROL_TABLE), 0));
    }
    tables.sort();
    tables.dedup_by(|a, b| a.0 == b.0);
    tables
}

/// Registers the tables recorded as not registered in the run's `databases` (its own
/// new or widened ones among them, [`to_register`]); each table that is still not
/// registered, with why, and its record kept for the next run. Called once the run is
/// recorded: a slow catalog delays no record.
pub(super) fn register_new(ctx: &Context, databases: &[Database]) -> Vec<String> {
    let Some(cfg) = &ctx.config.metastore else {
        return Vec::new();
    };
    if databases.is_empty() {
        return Vec::new();
    }
    let m = Maintenance::new(&ctx.catalog);
    let said = |u: &Unregistered, why: &str| format!("{}.{}: {why}", u.database, u.table);
    let pending = match m.schema_folder() {
        Ok((store, dir)) => Pending::new(store, &dir),
        Err(e) => {
            return vec![format!(
                "{}: {}",
                databases[0].name,
                crate::error::chain(&e)
            )];
        }
    };
    let records = records_of(&m, &pending, databases);
    if records.is_empty() {
        return Vec::new();
    }
    let registrar = match crate::metastore::Registrar::connect(&m, cfg) {
        Ok(r) => r,
        Err(e) => {
            let why = crate::error::chain(&e);
            return records.iter().map(|u| said(u, &why)).collect();
        }
    };
    records
        .iter()
        .filter_map(|u| {
            let done = registrar.register(&u.database, &u.table);
            let why = note(&m, &pending, u, done)?;
            Some(said(u, &why))
        })
        .collect()
}

/// Why the table of record `u` is not registered after `done` (`None`: it is), its
/// record deleted once it is registered, else rewritten with why.
fn note(
    m: &Maintenance<'_>,
    pending: &Pending,
    u: &Unregistered,
    done: crate::metastore::TableRegistration,
) -> Option<String> {
    let why = match done.result {
        Ok(_) => {
            let version = done.version.unwrap_or(u.version);
            // A record that cannot be deleted now is by the table's next registration.
            let _ = m.block_on(pending.clear(&u.database, &u.table, version));
            return None;
        }
        Err(why) => why,
    };
    let record = Unregistered {
        reason: why.clone(),
        ..u.clone()
    };
    Some(match m.block_on(pending.record(record, Some(u))) {
        Ok(()) => why,
        Err(e) => format!("{why} (and not recorded for the next run: {e}; run `bronze register`)"),
    })
}

/// The records of tables not registered in the run's `databases`; a record whose table
/// is no longer in the lakehouse is deleted.
fn records_of(m: &Maintenance<'_>, pending: &Pending, databases: &[Database]) -> Vec<Unregistered> {
    let mut records: Vec<Unregistered> = m
        .block_on(pending.list())
        .unwrap_or_default()
        .into_iter()
        .filter(|u| databases.iter().any(|d| d.name == u.database))
        .collect();
    if records.is_empty() {
        return records;
    }
    let Ok(present) = m.tables() else {
        return records;
    };
    records.retain(|u| {
        let kept = present.contains(&u.table);
        if !kept {
            let _ = m.block_on(pending.clear(&u.database, &u.table, u64::MAX));
        }
        kept
    });
    records
}
