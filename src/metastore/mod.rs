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
#[cfg(feature = "glue")]
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

/// The database of a batch from landing path `source/entity`: `template` with
/// `{source}` and `{entity}` replaced.
pub fn database_for(template: &str, landing_path: &str) -> String {
    let (source, entity) = landing_path.split_once('/').unwrap_or((landing_path, ""));
    template
        .replace("{source}", source)
        .replace("{entity}", entity)
}

/// A lakehouse's tables registered, one after the other, in one database of the catalog
/// a [`crate::config::MetastoreConfig`] names.
#[cfg(feature = "glue")]
pub struct Registrar<'a, 'm> {
    m: &'a crate::maintenance::Maintenance<'m>,
    glue: glue::Glue,
    database: String,
}

#[cfg(feature = "glue")]
impl<'a, 'm> Registrar<'a, 'm> {
    /// Reaches the catalog `cfg` names for `m`'s tables, in `database`. Credentials: the
    /// storage options' `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, else AWS's
    /// provider chain.
    pub fn connect(
        m: &'a crate::maintenance::Maintenance<'m>,
        cfg: &crate::config::MetastoreConfig,
        database: String,
    ) -> crate::Result<Self> {
        let key = |k: &str| m.storage_option(k);
        let keys = match (key("AWS_ACCESS_KEY_ID"), key("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => Some(glue::StaticKeys {
                access_key_id,
                secret_access_key,
                session_token: key("AWS_SESSION_TOKEN"),
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
        Ok(Registrar { m, glue, database })
    }

    /// How the catalog registers `table`: its folder and its columns (from its current
    /// schema).
    fn entry(&self, table: &str) -> crate::Result<TableEntry> {
        let (location, schema) = self.m.table_location_and_schema(table)?;
        let columns = columns::columns(&schema).ok_or_else(|| crate::Error::Metastore {
            catalog: "glue",
            table: format!("{}.{table}", self.database),
            reason: format!("its Delta schema is not a struct of fields: {schema}"),
        })?;
        Ok(TableEntry {
            database: self.database.clone(),
            name: table.to_string(),
            location,
            columns,
        })
    }

    /// Registers `table` ([`glue::Glue::register`]).
    pub fn register(&self, table: &str) -> TableRegistration {
        let result = self
            .entry(table)
            .and_then(|entry| self.m.block_on(self.glue.register(&entry)))
            .map_err(|e| e.to_string());
        TableRegistration {
            database: self.database.clone(),
            table: table.to_string(),
            result,
        }
    }
}

/// Registers every table of `m`'s lakehouse in the catalog `cfg` names, each as an
/// external Delta table at its folder; a table that could not be registered is said in
/// its result, the others are still registered.
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
    let registrar = Registrar::connect(m, cfg, database)?;
    Ok(m.tables()?.iter().map(|t| registrar.register(t)).collect())
}
