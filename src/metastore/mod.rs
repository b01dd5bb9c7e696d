//! Bronze's tables registered in the catalogs engines look tables up in: AWS Glue's Data
//! Catalog ([`glue`]), as an external Delta table at its folder, with its columns.

pub mod columns;
#[cfg(feature = "glue")]
pub mod glue;

pub use columns::Column;

/// A table as a catalog registers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableEntry {
    /// The catalog's database (Glue, the Hive Metastore).
    pub database: String,
    /// The table's name there (bronze's own).
    pub name: String,
    /// The table's folder, as engines open it (`s3://bucket/lake/bronze/quote`).
    pub location: String,
    /// Its top-level columns, from its Delta schema.
    pub columns: Vec<Column>,
}

impl TableEntry {
    /// `database.name`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.database, self.name)
    }
}

/// What registering a table did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Registered {
    /// The catalog had no table of that name: created.
    Created,
    /// Registered at the same location, with other columns: its columns replaced.
    Updated,
    /// Registered at the same location with the same columns: left alone.
    Unchanged,
}

/// Whether two table locations name the same folder (a trailing `/` aside).
pub(crate) fn same_location(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// One table's registration by [`register_all`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct TableRegistration {
    /// The catalog's database.
    pub database: String,
    /// The table.
    pub table: String,
    /// What registering did, or why it could not.
    pub result: std::result::Result<Registered, String>,
}

/// Registers every table of `m`'s lakehouse in the catalog `cfg` names, each as an
/// external Delta table at its folder ([`glue::Glue::register`]); a table that could not
/// be registered is said in its result, the others are still registered. Credentials:
/// the storage options' `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, else AWS's
/// provider chain.
#[cfg(feature = "glue")]
pub fn register_all(
    m: &crate::maintenance::Maintenance<'_>,
    cfg: &crate::config::MetastoreConfig,
) -> crate::Result<Vec<TableRegistration>> {
    let database = cfg
        .database
        .clone()
        .unwrap_or_else(|| m.schema().to_string());
    if database.contains("{source}") || database.contains("{entity}") {
        return Err(crate::Error::Config {
            name: "metastore",
            reason: format!(
                "database {database:?} is a template over the batch's landing path: registering a whole lakehouse names one database (--metastore-database bronze)"
            ),
        });
    }
    let keys = match (
        m.storage_option("AWS_ACCESS_KEY_ID"),
        m.storage_option("AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(access_key_id), Some(secret_access_key)) => Some(glue::StaticKeys {
            access_key_id,
            secret_access_key,
            session_token: m.storage_option("AWS_SESSION_TOKEN"),
        }),
        _ => None,
    };
    let region = cfg.region.clone().unwrap_or_default();
    let glue = m.block_on(glue::Glue::connect(
        &region,
        cfg.endpoint.as_deref(),
        cfg.timeout,
        keys,
    ))?;
    let mut done = Vec::new();
    for table in m.tables()? {
        let result = m
            .table_entry(&table, &database)
            .and_then(|entry| m.block_on(glue.register(&entry)))
            .map_err(|e| e.to_string());
        done.push(TableRegistration {
            database: database.clone(),
            table,
            result,
        });
    }
    Ok(done)
}
