//! After a run: the tables it created or widened registered in the catalog of
//! `[metastore]`. A catalog that is down or refuses fails no load: the tables not
//! registered are in the report (exit code 1), and `bronze register` catches up.

use super::context::Context;
use crate::batch::BatchKey;
use crate::naming::TableName;
use crate::run_control::TableWrite;

/// Registers the tables `writes` created or widened ([`to_register`]) in the catalog of
/// `[metastore]`, in the database of the batch `key`'s (first) landing path; each table
/// that was not registered, with why.
pub(super) fn register_new(ctx: &Context, writes: &[TableWrite], key: &BatchKey) -> Vec<String> {
    let landing_path = key.landing_paths.first().map_or("", String::as_str);
    register_tables(ctx, &to_register(writes), landing_path)
}

/// The tables of `writes` a catalog must hear of: created by the run (version 0) or
/// given columns; each once.
fn to_register(writes: &[TableWrite]) -> Vec<TableName> {
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
