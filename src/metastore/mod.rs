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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
