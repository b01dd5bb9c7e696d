//! A Hive Metastore (Thrift, `thrift://host:9083`), the catalog open-source Spark, Trino
//! and EMR share: each table registered as an external Delta table the way Spark with
//! Delta and Trino register one (provider `delta`, its folder as the SerDe's `path` and
//! the location), its columns in Hive's types.

use std::time::{Duration, SystemTime};

use super::thrift::{Connection, Struct, Value};
use super::{Registered, TableEntry};
use crate::error::{Error, Result};

/// The schema Spark with Delta stores for a Delta table (Spark reads the real one from
/// the table's log): `spark.sql.sources.schema`.
const EMPTY_SPARK_SCHEMA: &str = r#"{"type":"struct","fields":[]}"#;

/// A Hive Metastore, at one address or several (tried in turn, as Hive's own client does
/// with `hive.metastore.uris`).
pub struct Hive {
    addresses: Vec<String>,
    timeout: Duration,
}

/// Why a call did not succeed: the exception the metastore declared (its field id in the
/// result and its message), one of the server's own (an unknown method, an internal
/// error), or a failure to reach it.
#[derive(Debug)]
enum Refused {
    Declared(i16, String),
    Failed(String),
    Unreachable(String),
}

impl Refused {
    fn message(&self) -> String {
        match self {
            Refused::Declared(_, m) | Refused::Failed(m) | Refused::Unreachable(m) => m.clone(),
        }
    }
}

impl Hive {
    /// The metastore at `uri`: `thrift://host:port` (port 9083 when not given), or
    /// several, comma-separated, tried in turn; each call bounded by `timeout`.
    pub fn new(uri: &str, timeout: Duration) -> Result<Hive> {
        let addresses = uri
            .split(',')
            .map(|one| {
                let one = one.trim();
                let rest = one.strip_prefix("thrift://").ok_or_else(|| Error::Config {
                    name: "metastore",
                    reason: format!(
                        "the Hive Metastore's uri {one:?} is not thrift://host:port (thrift://127.0.0.1:9083)"
                    ),
                })?;
                let authority = rest.trim_end_matches('/');
                Ok(match authority.rsplit_once(':') {
                    Some((_, port)) if port.parse::<u16>().is_ok() => authority.to_string(),
                    _ => format!("{authority}:9083"),
                })
            })
            .collect::<Result<Vec<String>>>()?;
        Ok(Hive { addresses, timeout })
    }

    /// Registers `entry`: its database created when missing, the table created, or its
    /// columns replaced when they differ (an entry another engine made with a placeholder
    /// column is kept as it is); a table of that name at another location (or not a
    /// Delta table) is refused, naming both. A connection that fails is opened again, in
    /// [`super::ATTEMPTS`] attempts in all.
    pub async fn register(&self, entry: &TableEntry) -> Result<Registered> {
        let mut attempt = 1;
        loop {
            match self.register_once(entry).await {
                Err(Refused::Unreachable(e)) if attempt >= super::ATTEMPTS => {
                    return Err(self.unreachable(format!("{e} ({attempt} attempts)")));
                }
                Err(Refused::Unreachable(_)) => super::pause_before_retry(attempt).await,
                Err(e) => return Err(hive_error(&entry.qualified(), e.message())),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(done)) => return Ok(done),
            }
            attempt += 1;
        }
    }

    /// One attempt of [`Hive::register`], on one connection.
    async fn register_once(&self, entry: &TableEntry) -> Result<Result<Registered>, Refused> {
        let mut c = self.connect().await?;
        ensure_database(&mut c, &entry.database).await?;
        // Twice at most: a table another worker created between the lookup and the
        // create is then read back and compared.
        for _ in 0..2 {
            let existing = match get_table(&mut c, entry).await? {
                Some(t) => t,
                None => match create_table(&mut c, entry).await {
                    Ok(()) => return Ok(Ok(Registered::Created)),
                    Err(Refused::Declared(1, _)) => continue,
                    Err(e) => return Err(e),
                },
            };
            if let Err(e) = check_same_table(entry, &existing) {
                return Ok(Err(e));
            }
            let cols = existing.get_struct(7).and_then(|sd| sd.get(1));
            if cols.is_some_and(|c| same_columns(c, entry)) {
                return Ok(Ok(Registered::Unchanged));
            }
            if cols.is_some_and(is_placeholder) {
                return Ok(Ok(Registered::Kept));
            }
            alter_table(&mut c, entry, existing).await?;
            return Ok(Ok(Registered::Updated));
        }
        Ok(Err(hive_error(
            &entry.qualified(),
            "was created and dropped again while being registered: run `bronze register`".into(),
        )))
    }

    /// A connection to the first address that takes one.
    async fn connect(&self) -> Result<Connection, Refused> {
        let mut failures = Vec::new();
        for address in &self.addresses {
            match Connection::open(address, self.timeout).await {
                Ok(c) => return Ok(c),
                Err(e) => failures.push(e),
            }
        }
        Err(Refused::Unreachable(failures.join("; ")))
    }

    fn unreachable(&self, reason: String) -> Error {
        let at: Vec<String> = self
            .addresses
            .iter()
            .map(|a| format!("thrift://{a}"))
            .collect();
        Error::MetastoreUnreachable {
            catalog: "hive",
            reason: format!("{}: {reason}", at.join(",")),
        }
    }
}

/// Whether registered columns `cols` are the placeholder Spark with Delta and Trino
/// register a Delta table with (`col array<string>`): they keep the columns in the log.
fn is_placeholder(cols: &Value) -> bool {
    match cols.items() {
        [Value::Struct(f)] => {
            f.get_str(1).as_deref() == Some("col")
                && f.get_str(2).as_deref() == Some("array<string>")
        }
        _ => false,
    }
}

/// Calls `method`; the result's value (field 0, absent for `void`), or the exception it
/// declared.
async fn call(c: &mut Connection, method: &str, args: Struct) -> Result<Option<Value>, Refused> {
    use super::thrift::CallError;
    let result = c.call(method, &args).await.map_err(|e| match e {
        CallError::Transport(m) => Refused::Unreachable(m),
        CallError::Application(m) => Refused::Failed(m),
    })?;
    if let Some((id, Value::Struct(e))) = result.0.iter().find(|(id, _)| *id != 0) {
        let message = e.get_str(1).unwrap_or_default();
        return Err(Refused::Declared(*id, format!("{method}: {message}")));
    }
    Ok(result
        .0
        .into_iter()
        .find(|(id, _)| *id == 0)
        .map(|(_, v)| v))
}

async fn ensure_database(c: &mut Connection, name: &str) -> Result<(), Refused> {
    let get = Struct::default().with(1, Value::string(name));
    match call(c, "get_database", get).await {
        Ok(_) => Ok(()),
        // NoSuchObjectException.
        Err(Refused::Declared(1, _)) => {
            let database = Struct::default()
                .with(1, Value::string(name))
                .with(2, Value::string("Bronze tables, registered by bronze"))
                .with(4, Value::string_map([]));
            let create = Struct::default().with(1, Value::Struct(database));
            match call(c, "create_database", create).await {
                // AlreadyExistsException: another worker made it.
                Ok(_) | Err(Refused::Declared(1, _)) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The registered table of `entry`'s name; `None` when there is none.
async fn get_table(c: &mut Connection, entry: &TableEntry) -> Result<Option<Struct>, Refused> {
    let get = Struct::default()
        .with(1, Value::string(&entry.database))
        .with(2, Value::string(&entry.name));
    match call(c, "get_table", get).await {
        Ok(Some(Value::Struct(t))) => Ok(Some(t)),
        Ok(_) => Err(Refused::Unreachable(
            "get_table: no table in the reply".into(),
        )),
        // NoSuchObjectException is get_table's second.
        Err(Refused::Declared(2, _)) => Ok(None),
        Err(e) => Err(e),
    }
}

async fn create_table(c: &mut Connection, entry: &TableEntry) -> Result<(), Refused> {
    let create = Struct::default().with(1, Value::Struct(table(entry)));
    call(c, "create_table", create).await.map(|_| ())
}

/// Replaces the columns of registered table `existing` by `entry`'s: everything else
/// (what other tools set on it) sent back as it was read.
async fn alter_table(
    c: &mut Connection,
    entry: &TableEntry,
    mut existing: Struct,
) -> Result<(), Refused> {
    match existing.get_struct_mut(7) {
        Some(sd) => sd.set(1, columns(entry)),
        None => existing.set(7, Value::Struct(storage(entry))),
    }
    let alter = Struct::default()
        .with(1, Value::string(&entry.database))
        .with(2, Value::string(&entry.name))
        .with(3, Value::Struct(existing));
    call(c, "alter_table", alter).await.map(|_| ())
}

/// The `Table` of `entry` (Hive 3.1's field ids): an external table, provider `delta`,
/// located at its folder both as the storage location and as the SerDe's `path` (where
/// Spark and Trino read it), the formats Spark and Trino give a Delta table.
fn table(entry: &TableEntry) -> Struct {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX));
    let parameters = [
        ("EXTERNAL", "TRUE"),
        ("spark.sql.sources.provider", "delta"),
        ("spark.sql.partitionProvider", "catalog"),
        ("spark.sql.sources.schema", EMPTY_SPARK_SCHEMA),
        ("table_type", "DELTA"),
        // Keeps Hive 3 from listing the folder for statistics on create (Trino does too).
        ("numFiles", "-1"),
        ("totalSize", "-1"),
    ];
    Struct::default()
        .with(1, Value::string(&entry.name))
        .with(2, Value::string(&entry.database))
        .with(3, Value::string("bronze"))
        .with(4, Value::I32(now))
        .with(5, Value::I32(0))
        .with(6, Value::I32(0))
        .with(7, Value::Struct(storage(entry)))
        .with(8, Value::structs(Vec::new()))
        .with(9, Value::string_map(parameters))
        .with(12, Value::string("EXTERNAL_TABLE"))
}

/// The `StorageDescriptor` of `entry`.
fn storage(entry: &TableEntry) -> Struct {
    let serde = Struct::default()
        .with(1, Value::string(&entry.name))
        .with(
            2,
            Value::string("org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"),
        )
        .with(
            3,
            Value::string_map([
                ("path", entry.location.as_str()),
                ("serialization.format", "1"),
            ]),
        );
    Struct::default()
        .with(1, columns(entry))
        .with(2, Value::string(&entry.location))
        .with(
            3,
            Value::string("org.apache.hadoop.mapred.SequenceFileInputFormat"),
        )
        .with(
            4,
            Value::string("org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat"),
        )
        .with(5, Value::Bool(false))
        .with(6, Value::I32(-1))
        .with(7, Value::Struct(serde))
        .with(8, Value::strings([]))
        .with(9, Value::structs(Vec::new()))
        .with(10, Value::string_map([]))
}

/// `entry`'s columns as `list<FieldSchema>`.
fn columns(entry: &TableEntry) -> Value {
    Value::structs(
        entry
            .columns
            .iter()
            .map(|c| {
                Struct::default()
                    .with(1, Value::string(&c.name))
                    .with(2, Value::string(&c.hive_type))
            })
            .collect(),
    )
}

/// Whether registered columns `cols` are `entry`'s (the metastore keeps names and types
/// in lower case).
fn same_columns(cols: &Value, entry: &TableEntry) -> bool {
    let items = cols.items();
    items.len() == entry.columns.len()
        && items.iter().zip(&entry.columns).all(|(item, c)| {
            let Value::Struct(f) = item else { return false };
            let same = |id: i16, want: &str| {
                f.get_str(id)
                    .is_some_and(|got| got.eq_ignore_ascii_case(want))
            };
            same(1, &c.name) && same(2, &c.hive_type)
        })
}

/// Refuses a registered table that is not `entry`'s: another location, or not Delta.
fn check_same_table(entry: &TableEntry, table: &Struct) -> Result<()> {
    let sd = table.get_struct(7);
    let path = sd
        .and_then(|sd| sd.get_struct(7))
        .and_then(|serde| serde.get(3))
        .and_then(|p| p.map_get("path"));
    let location = path
        .or_else(|| sd.and_then(|sd| sd.get_str(2)))
        .unwrap_or_default();
    if !super::same_location(&location, &entry.location) {
        return Err(hive_error(
            &entry.qualified(),
            format!(
                "is registered at {location}, not at {}: drop that entry, or register this lakehouse under another database (`database` of [metastore])",
                entry.location
            ),
        ));
    }
    let provider = table
        .get(9)
        .and_then(|p| p.map_get("spark.sql.sources.provider"));
    if !provider.is_some_and(|p| p.eq_ignore_ascii_case("delta")) {
        return Err(hive_error(
            &entry.qualified(),
            format!(
                "is registered at {location} but not as a Delta table: drop that entry and register again"
            ),
        ));
    }
    Ok(())
}

fn hive_error(table: &str, reason: String) -> Error {
    Error::Metastore {
        catalog: "hive",
        table: table.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metastore::Column;

    fn entry() -> TableEntry {
        TableEntry {
            database: "bronze".into(),
            name: "quote".into(),
            location: "s3a://lake/bronze/quote".into(),
            columns: vec![Column {
                name: "Price".into(),
                hive_type: "decimal(10,2)".into(),
                field: serde_json::Value::Null,
            }],
            version: 0,
        }
    }

    #[test]
    fn a_registered_table_is_checked_by_its_serde_path_and_provider() {
        let t = table(&entry());
        assert!(check_same_table(&entry(), &t).is_ok());
        let cols = t.get_struct(7).and_then(|sd| sd.get(1)).unwrap();
        assert!(same_columns(cols, &entry()));
        let mut other = entry();
        other.location = "s3a://lake/elsewhere/quote".into();
        let e = check_same_table(&other, &t).unwrap_err().to_string();
        assert!(
            e.contains("s3a://lake/bronze/quote") && e.contains("elsewhere"),
            "{e}"
        );
        let mut widened = entry();
        widened.columns.push(Column {
            name: "sym".into(),
            hive_type: "string".into(),
            field: serde_json::Value::Null,
        });
        assert!(!same_columns(cols, &widened));
    }

    #[test]
    fn spark_s_placeholder_column_is_told_from_real_columns() {
        let col = |name: &str, t: &str| {
            Struct::default()
                .with(1, Value::string(name))
                .with(2, Value::string(t))
        };
        assert!(is_placeholder(&Value::structs(vec![col(
            "col",
            "array<string>"
        )])));
        assert!(!is_placeholder(&Value::structs(vec![col("col", "string")])));
        assert!(!is_placeholder(&Value::structs(vec![
            col("col", "array<string>"),
            col("b", "int")
        ])));
        assert!(!is_placeholder(&Value::structs(Vec::new())));
    }

    #[test]
    fn a_uri_names_host_and_port() {
        let at = |u: &str| Hive::new(u, Duration::from_secs(1)).map(|h| h.addresses.join(" "));
        assert_eq!(at("thrift://10.0.0.5:9999").unwrap(), "10.0.0.5:9999");
        assert_eq!(at("thrift://hms/").unwrap(), "hms:9083");
        assert_eq!(
            at("thrift://a:1, thrift://b").unwrap(),
            "a:1 b:9083",
            "hive.metastore.uris' list"
        );
        assert!(
            at("http://hms:9083")
                .unwrap_err()
                .to_string()
                .contains("thrift://")
        );
    }
}
