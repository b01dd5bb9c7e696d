//! After a run: the tables it created or widened registered in the catalog of
//! `[metastore]`. A catalog that is down or refuses fails no load: the tables not
//! registered are in the report (exit code 1), and `bronze register` catches up.

use super::context::Context;
use crate::batch::BatchKey;
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
/// given columns; each once.
pub(super) fn to_register(writes: &[TableWrite]) -> Vec<TableName> {
    let mut tables: Vec<TableName> = writes
        .iter()
        .filter(|w| matches!(&w.result, Ok(c) if c.version == 0 || !w.added.is_empty()))
        .map(|w| w.table.clone())
        .collect();
    tables.sort();
    tables.dedup();
    tables
}

/// Registers `tables` in the catalog of `[metastore]` (nothing without one), in the
/// database of the batch's `landing_path`; each table that was not registered, with why.
#[cfg(feature = "glue")]
fn register_tables(ctx: &Context, tables: &[TableName], landing_path: &str) -> Vec<String> {
    let Some(cfg) = &ctx.config.metastore else {
        return Vec::new();
    };
    if tables.is_empty() {
        return Vec::new();
    }
    let m = crate::maintenance::Maintenance::new(&ctx.catalog);
    let database = cfg.database.as_deref().map_or_else(
        || ctx.catalog.schema().to_string(),
        |t| crate::metastore::database_for(t, landing_path),
    );
    let said = |table: &TableName, why: &str| format!("{database}.{table}: {why}");
    let registrar = match crate::metastore::Registrar::connect(&m, cfg, database.clone()) {
        Ok(r) => r,
        Err(e) => return tables.iter().map(|t| said(t, &e.to_string())).collect(),
    };
    tables
        .iter()
        .filter_map(|t| {
            let done = registrar.register(t.as_str());
            done.result.err().map(|why| said(t, &why))
        })
        .collect()
}

/// Without the `glue` feature no catalog is reachable: every table is unregistered.
#[cfg(not(feature = "glue"))]
fn register_tables(ctx: &Context, tables: &[TableName], _: &str) -> Vec<String> {
    match &ctx.config.metastore {
        None => Vec::new(),
        Some(_) => tables
            .iter()
            .map(|t| format!("{t}: this build has no catalog client (the `glue` feature)"))
            .collect(),
    }
}
