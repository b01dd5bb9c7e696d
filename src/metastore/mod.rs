//! Bronze's tables registered in the catalogs engines look tables up in: a Hive Metastore
//! ([`hive`], over Thrift), AWS Glue's Data Catalog ([`glue`]) and Unity Catalog
//! ([`unity`]), each as an external Delta table at its folder, with its columns.

pub mod columns;
#[cfg(feature = "glue")]
pub mod glue;
pub mod hive;
pub mod pending;
pub(crate) mod thrift;
pub mod unity;

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
    /// The table version they are of.
    pub version: u64,
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
    /// Registered at the same location with other columns, which are left as they are:
    /// an entry another engine made without columns (Spark's and Trino's placeholder
    /// `col array<string>`), or a catalog that cannot update them. Engines read a Delta
    /// table's columns from its log.
    Kept,
}

/// Whether two table locations name the same folder: a trailing `/` aside, and
/// `file:///p` the same as `file:/p` (as Hadoop's `Path`, so a Hive Metastore, writes it).
pub(crate) fn same_location(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let s = s.trim_end_matches('/');
        match s.strip_prefix("file:///") {
            Some(rest) => format!("file:/{rest}"),
            None => s.to_string(),
        }
    };
    norm(a) == norm(b)
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
    /// The table version registered (`None` when the table could not be read).
    pub version: Option<u64>,
}

/// The database of a batch from landing path `source/entity`: `template` with
/// `{source}` and `{entity}` replaced by those folder names as catalogs take a name
/// (lower case; a character other than a letter, a digit or `_` as `_`), so
/// `main.bronze_{entity}` stays `catalog.schema` whatever the folder is called.
pub fn database_for(template: &str, landing_path: &str) -> String {
    let (source, entity) = landing_path.split_once('/').unwrap_or((landing_path, ""));
    let name = |s: &str| -> String {
        s.chars()
            .map(|c| match c.is_ascii_alphanumeric() {
                true => c.to_ascii_lowercase(),
                false => '_',
            })
            .collect()
    };
    template
        .replace("{source}", &name(source))
        .replace("{entity}", &name(entity))
}

/// Attempts of a request that finds its catalog unreachable (a connection refused, reset
/// or timed out; HTTP 429 or 5xx), 1 s then 2 s apart, each bounded by `timeout` of
/// `[metastore]`. Once a catalog is unreachable a run tries none of its other tables (it
/// records them for the next run).
pub const ATTEMPTS: u32 = 3;

/// The pause before attempt `attempt` (from 1) again: 1 s, 2 s, ….
pub(crate) async fn pause_before_retry(attempt: u32) {
    let seconds = 1_u64 << attempt.saturating_sub(1).min(5);
    tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
}

/// The most of a catalog's HTTP answer read (they are a few KiB).
const MAX_BODY: usize = 8 << 20;

/// `response`'s body as text, its first [`MAX_BODY`] bytes at most.
pub(crate) async fn body_text(mut response: reqwest::Response) -> reqwest::Result<String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_BODY {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The environment variable Unity Catalog's token is read from when `token_env` names
/// none.
pub const DEFAULT_TOKEN_ENV: &str = "DATABRICKS_TOKEN";

/// A catalog client.
enum Catalog {
    #[cfg(feature = "glue")]
    Glue(glue::Glue),
    Hive(hive::Hive),
    Unity(unity::Unity),
}

impl Catalog {
    /// Reaches the catalog `cfg` names; `m`'s storage options give Glue its keys.
    fn connect(
        m: &crate::maintenance::Maintenance<'_>,
        cfg: &crate::config::MetastoreConfig,
    ) -> crate::Result<Catalog> {
        use crate::config::MetastoreKind;
        match cfg.kind {
            MetastoreKind::Hive => Ok(Catalog::Hive(hive::Hive::new(
                cfg.uri.as_deref().unwrap_or_default(),
                cfg.timeout,
            )?)),
            MetastoreKind::Unity => {
                let var = cfg.token_env.as_deref().unwrap_or(DEFAULT_TOKEN_ENV);
                let token = std::env::var(var).ok().filter(|t| !t.is_empty());
                if token.is_none() && cfg.token_env.is_some() {
                    return Err(crate::Error::Config {
                        name: "metastore",
                        reason: format!(
                            "token_env names {var}, which is not set: export the Unity Catalog token as {var}"
                        ),
                    });
                }
                Ok(Catalog::Unity(unity::Unity::new(
                    cfg.uri.as_deref().unwrap_or_default(),
                    token,
                    cfg.timeout,
                )?))
            }
            #[cfg(feature = "glue")]
            MetastoreKind::Glue => {
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
                Ok(Catalog::Glue(m.block_on(glue::Glue::connect(
                    &region,
                    cfg.endpoint.as_deref(),
                    cfg.timeout,
                    keys,
                ))?))
            }
            #[cfg(not(feature = "glue"))]
            MetastoreKind::Glue => {
                let _ = m;
                Err(crate::Error::Config {
                    name: "metastore",
                    reason: "this build has no Glue client (build with the `glue` feature)".into(),
                })
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            #[cfg(feature = "glue")]
            Catalog::Glue(_) => "glue",
            Catalog::Hive(_) => "hive",
            Catalog::Unity(_) => "unity",
        }
    }

    /// A table's folder as this catalog's engines name it: Hadoop's `s3a://` is `s3://`
    /// to Athena, Glue, EMR and Unity Catalog; a Hive Metastore keeps the lakehouse's own
    /// scheme.
    fn location(&self, location: String) -> String {
        match (self, location.strip_prefix("s3a://")) {
            (Catalog::Hive(_), _) | (_, None) => location.clone(),
            (_, Some(rest)) => format!("s3://{rest}"),
        }
    }

    async fn register(&self, entry: &TableEntry) -> crate::Result<Registered> {
        match self {
            #[cfg(feature = "glue")]
            Catalog::Glue(g) => g.register(entry).await,
            Catalog::Hive(h) => h.register(entry).await,
            Catalog::Unity(u) => u.register(entry).await,
        }
    }
}

/// Tables registered, one after the other, in the catalog a
/// [`crate::config::MetastoreConfig`] names.
pub struct Registrar<'a, 'm> {
    m: &'a crate::maintenance::Maintenance<'m>,
    catalog: Catalog,
    /// Why the catalog is unreachable, once a table found it so: the other tables are
    /// not tried.
    down: std::cell::RefCell<Option<String>>,
}

impl<'a, 'm> Registrar<'a, 'm> {
    /// Reaches the catalog `cfg` names for `m`'s tables. Glue's credentials: the storage
    /// options' `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, else AWS's provider
    /// chain.
    pub fn connect(
        m: &'a crate::maintenance::Maintenance<'m>,
        cfg: &crate::config::MetastoreConfig,
    ) -> crate::Result<Self> {
        let catalog = Catalog::connect(m, cfg)?;
        Ok(Registrar {
            m,
            catalog,
            down: std::cell::RefCell::new(None),
        })
    }

    /// How the catalog registers `table` in `database`: its folder and its columns (from
    /// its current schema); a table a catalog owns is refused.
    fn entry(&self, database: &str, table: &str) -> crate::Result<TableEntry> {
        let refuse = |reason: String| crate::Error::Metastore {
            catalog: self.catalog.name(),
            table: format!("{database}.{table}"),
            reason,
        };
        let owned = |f: &str| {
            refuse(format!(
                "its protocol has `{f}`: a catalog owns its commits, and registering its folder as an external table would bypass that catalog"
            ))
        };
        let found = match self.m.table_for_catalog(table) {
            Ok(found) => found,
            // The Delta kernel opens a catalog-managed table only through its catalog.
            Err(e) if crate::error::chain(&e).contains("catalog-managed") => {
                return Err(owned("catalogManaged"));
            }
            Err(e) => return Err(e),
        };
        if let Some(f) = found
            .features
            .iter()
            .find(|f| matches!(f.as_str(), "catalogManaged" | "catalogOwned-preview"))
        {
            return Err(owned(f));
        }
        let schema = &found.schema;
        let columns = columns::columns(schema).ok_or_else(|| {
            refuse(format!(
                "its Delta schema is not a struct of fields: {schema}"
            ))
        })?;
        Ok(TableEntry {
            database: database.to_string(),
            name: table.to_string(),
            location: self.catalog.location(found.location),
            columns,
            version: found.version,
        })
    }

    /// Registers `table` in `database` of the catalog (not tried once the catalog was
    /// found unreachable).
    pub fn register(&self, database: &str, table: &str) -> TableRegistration {
        let entry = self.entry(database, table);
        let version = entry.as_ref().ok().map(|e| e.version);
        let result = entry.and_then(|entry| {
            let down = self.down.borrow().clone();
            if let Some(why) = down {
                return Err(crate::Error::Metastore {
                    catalog: self.catalog.name(),
                    table: entry.qualified(),
                    reason: format!("not tried: {why}"),
                });
            }
            let done = self.m.block_on(self.catalog.register(&entry));
            if let Err(e @ crate::Error::MetastoreUnreachable { .. }) = &done {
                *self.down.borrow_mut() = Some(e.to_string());
            }
            done
        });
        TableRegistration {
            database: database.to_string(),
            table: table.to_string(),
            result: result.map_err(|e| crate::error::chain(&e)),
            version,
        }
    }
}

/// `bronze register`: every table of `m`'s lakehouse registered in the one database of
/// `cfg`, each as an external Delta table at its folder; with a database template, the
/// tables runs recorded as not registered, each in its database. A table that could not
/// be registered is said in its result, the others are still registered; the records of
/// those registered are deleted.
pub fn register_all(
    m: &crate::maintenance::Maintenance<'_>,
    cfg: &crate::config::MetastoreConfig,
) -> crate::Result<Vec<TableRegistration>> {
    let (store, dir) = m.schema_folder()?;
    let pending = pending::Pending::new(store, &dir);
    let database = cfg
        .database
        .clone()
        .unwrap_or_else(|| m.schema().to_string());
    let todo: Vec<(String, String)> = if is_template(&database) {
        let recorded = m.block_on(pending.list())?;
        if recorded.is_empty() {
            return Err(crate::Error::Config {
                name: "metastore",
                reason: format!(
                    "database {database:?} is a template over the batch's landing path, and no run left a table unregistered: to register every table, name one database (--metastore-database bronze)"
                ),
            });
        }
        recorded
            .into_iter()
            .map(|u| (u.database, u.table))
            .collect()
    } else {
        m.tables()?
            .into_iter()
            .filter(|t| cfg.own_tables || !crate::naming::is_own_table(t))
            .map(|t| (database.clone(), t))
            .collect()
    };
    let registrar = Registrar::connect(m, cfg)?;
    let done: Vec<TableRegistration> = todo.iter().map(|(d, t)| registrar.register(d, t)).collect();
    for r in &done {
        if let (Ok(_), Some(v)) = (&r.result, r.version) {
            m.block_on(pending.clear(&r.database, &r.table, v))?;
        }
    }
    Ok(done)
}

/// Whether database setting `database` is a template over `{source}` and `{entity}`.
pub fn is_template(database: &str) -> bool {
    database.contains("{source}") || database.contains("{entity}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_database_template_takes_the_landing_path_s_folders_as_names() {
        let db = |t, p| super::database_for(t, p);
        assert_eq!(db("bronze_{entity}", "feed/events"), "bronze_events");
        assert_eq!(
            db("{source}_{entity}", "Feed-EU/v1.events"),
            "feed_eu_v1_events"
        );
        assert_eq!(db("main.bronze_{entity}", "s/a.b"), "main.bronze_a_b");
        assert_eq!(db("bronze", "s/e"), "bronze");
    }
}
