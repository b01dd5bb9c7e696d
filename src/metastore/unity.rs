//! Unity Catalog's REST API (`/api/2.1/unity-catalog`): each table registered as an
//! EXTERNAL DELTA table at its folder, its columns from the Delta schema (Spark's type
//! strings, the schema's own field JSON), its schema created when missing. A table whose
//! columns changed is updated through the Delta API's `set-columns` where the server has
//! it, else kept as it is (engines read a Delta table's columns from its log); an entry
//! is never dropped.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Registered, TableEntry, columns};
use crate::error::{Error, Result};

/// A Unity Catalog server.
pub struct Unity {
    client: reqwest::Client,
    /// `<url>/api/2.1/unity-catalog`.
    api: String,
    /// `api` without credentials, for errors.
    shown: String,
    token: Option<String>,
}

/// An error the server answered with (`error_code`, message), or a failure to reach it.
#[derive(Debug)]
struct Refused {
    status: u16,
    code: String,
    message: String,
}

impl Refused {
    fn not_found(&self) -> bool {
        self.status == 404 || self.code.ends_with("NOT_FOUND")
    }

    fn already_exists(&self) -> bool {
        self.status == 409 || self.code.ends_with("ALREADY_EXISTS")
    }

    /// Not reached (status 0), throttled or failing: worth another attempt.
    fn transient(&self) -> bool {
        self.status == 0 || self.status == 429 || self.status >= 500
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            0 => write!(f, "{}", self.message),
            s => write!(f, "HTTP {s} {}: {}", self.code, self.message),
        }
    }
}

impl Unity {
    /// The server at `url` (`http://host:8080`), each request bounded by `timeout`;
    /// `token` sent as a bearer token when given.
    pub fn new(url: &str, token: Option<String>, timeout: Duration) -> Result<Unity> {
        let base = url.trim_end_matches('/');
        let api = match base.ends_with("/api/2.1/unity-catalog") {
            true => base.to_string(),
            false => format!("{base}/api/2.1/unity-catalog"),
        };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| unity_error("", format!("cannot build an HTTP client: {e}")))?;
        // Where errors say it is: without a user or password the URL may carry.
        let shown = match url::Url::parse(&api) {
            Ok(mut u) => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.to_string()
            }
            Err(_) => api.clone(),
        };
        Ok(Unity {
            client,
            api,
            shown,
            token,
        })
    }

    /// Registers `entry` (its database is `catalog.schema`): the schema created when
    /// missing, the table created, or its columns replaced when they differ; a table of
    /// that name at another location, not EXTERNAL or not DELTA is refused, naming both.
    pub async fn register(&self, entry: &TableEntry) -> Result<Registered> {
        let full = entry.qualified();
        let named = |e: Refused| self.error(&full, e);
        let (catalog, schema) = entry.database.split_once('.').ok_or_else(|| {
            unity_error(
                &full,
                "Unity Catalog's database is `catalog.schema` (--metastore-database main.bronze_{entity})".into(),
            )
        })?;
        self.ensure_schema(catalog, schema, &full).await?;
        for _ in 0..2 {
            let existing = match self.get_table(&full).await.map_err(named)? {
                Some(t) => t,
                None => {
                    let create = Some(create_table(entry, catalog, schema));
                    match self.call("POST", "/tables", create).await {
                        Ok(_) => return Ok(Registered::Created),
                        Err(e) => {
                            // Another worker's create between the two calls (some servers
                            // answer a second table at one folder with 400, not 409).
                            if self.get_table(&full).await.is_ok_and(|t| t.is_some()) {
                                continue;
                            }
                            return Err(named(e));
                        }
                    }
                }
            };
            check_same_table(entry, &existing)?;
            if same_columns(&existing, entry) {
                return Ok(Registered::Unchanged);
            }
            return match self
                .replace_columns(entry, catalog, schema, &existing)
                .await
            {
                Ok(true) => Ok(Registered::Updated),
                Ok(false) => Ok(Registered::Kept),
                Err(e) => Err(named(e)),
            };
        }
        Err(unity_error(
            &full,
            "was created and dropped again while being registered: run `bronze register`".into(),
        ))
    }

    /// The registered table `full` (`catalog.schema.table`); `None` when there is none.
    async fn get_table(&self, full: &str) -> std::result::Result<Option<Value>, Refused> {
        match self.call("GET", &format!("/tables/{full}"), None).await {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn ensure_schema(&self, catalog: &str, schema: &str, full: &str) -> Result<()> {
        let named = |e: Refused| self.error(full, e);
        match self
            .call("GET", &format!("/schemas/{catalog}.{schema}"), None)
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if e.not_found() => {}
            Err(e) => return Err(named(e)),
        }
        let body = json!({"name": schema, "catalog_name": catalog,
                          "comment": "Bronze tables, registered by bronze"});
        match self.call("POST", "/schemas", Some(body)).await {
            Ok(_) => Ok(()),
            Err(e) if e.already_exists() => Ok(()),
            Err(e) if e.not_found() || e.code.starts_with("CATALOG") => Err(unity_error(
                full,
                format!(
                    "{e}: create catalog `{catalog}` first (with its storage root); bronze creates schemas, not catalogs"
                ),
            )),
            Err(e) => Err(named(e)),
        }
    }

    /// The columns of registered table `existing` replaced by `entry`'s through the
    /// Delta API's `set-columns` (the entry checked by its `table_id`); `false` when the
    /// server has no such API. The entry is never dropped: its grants, tags and id stay.
    async fn replace_columns(
        &self,
        entry: &TableEntry,
        catalog: &str,
        schema: &str,
        existing: &Value,
    ) -> std::result::Result<bool, Refused> {
        let fields: Vec<Value> = entry.columns.iter().map(|c| c.field.clone()).collect();
        let uuid = existing["table_id"].as_str().unwrap_or_default();
        let update = json!({
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-columns",
                         "columns": {"type": "struct", "fields": fields}}],
        });
        let path = format!(
            "/delta/v1/catalogs/{catalog}/schemas/{schema}/tables/{}",
            entry.name
        );
        match self.call("POST", &path, Some(update)).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.status, 404 | 405 | 501) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sends `method path` with `body` in up to [`super::ATTEMPTS`] attempts (another
    /// only when the last was [`Refused::transient`]); the answer's JSON, or why there is
    /// none.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> std::result::Result<Value, Refused> {
        let mut attempt = 1;
        loop {
            match self.attempt(method, path, body.as_ref()).await {
                Err(e) if e.transient() && attempt < super::ATTEMPTS => {
                    super::pause_before_retry(attempt).await;
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    async fn attempt(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::result::Result<Value, Refused> {
        let url = format!("{}{path}", self.api);
        let unreachable = |e: reqwest::Error| Refused {
            status: 0,
            code: String::new(),
            message: format!("{method} {}{path}: {}", self.shown, e.without_url()),
        };
        let verb = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut request = self.client.request(verb, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = super::body_text(response).await.map_err(unreachable)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        // `error_code` as the API specifies it; `errorCode` as some servers send it.
        let code = ["error_code", "errorCode"]
            .iter()
            .find_map(|k| value[*k].as_str())
            .unwrap_or_default();
        Err(Refused {
            status: status.as_u16(),
            code: code.to_string(),
            message: value["message"]
                .as_str()
                .map_or_else(|| text.chars().take(300).collect(), str::to_string),
        })
    }

    /// `e` as the error of table `full`: [`Error::MetastoreUnreachable`] when it is
    /// [`Refused::transient`].
    fn error(&self, full: &str, e: Refused) -> Error {
        match e.transient() {
            true => Error::MetastoreUnreachable {
                catalog: "unity",
                reason: format!("{}: {e}", self.shown),
            },
            false => unity_error(full, e.to_string()),
        }
    }
}

/// The `CreateTable` request of `entry`.
fn create_table(entry: &TableEntry, catalog: &str, schema: &str) -> Value {
    json!({
        "name": entry.name,
        "catalog_name": catalog,
        "schema_name": schema,
        "table_type": "EXTERNAL",
        "data_source_format": "DELTA",
        "storage_location": entry.location,
        "comment": "Loaded by bronze",
        "columns": column_infos(entry),
    })
}

/// `entry`'s columns as `ColumnInfo`s: Spark's type string (`type_text`), the Delta
/// schema's field as JSON (`type_json`), `type_name`, precision and scale of decimals.
fn column_infos(entry: &TableEntry) -> Vec<Value> {
    entry
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let t = &c.field["type"];
            let mut info = json!({
                "name": c.name,
                "type_text": columns::spark_type(t).unwrap_or_else(|| c.hive_type.clone()),
                "type_json": c.field.to_string(),
                "type_name": columns::type_name(t),
                "position": i,
                "nullable": c.field["nullable"].as_bool().unwrap_or(true),
            });
            if let Some((p, s)) = columns::decimal_precision_scale(t) {
                info["type_precision"] = p.into();
                info["type_scale"] = s.into();
            }
            info
        })
        .collect()
}

/// Whether registered table `t` has `entry`'s columns: the same names, and the same Delta
/// types in their `type_json` (servers write `type_text` in Spark's or in Delta's words).
fn same_columns(t: &Value, entry: &TableEntry) -> bool {
    let registered = t["columns"].as_array().map_or(&[][..], Vec::as_slice);
    registered.len() == entry.columns.len()
        && registered.iter().zip(&entry.columns).all(|(r, c)| {
            let field: Value = r["type_json"]
                .as_str()
                .and_then(|j| serde_json::from_str(j).ok())
                .unwrap_or(Value::Null);
            r["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(&c.name))
                && field["type"] == c.field["type"]
        })
}

/// Refuses a registered table that is not `entry`'s: another location, not EXTERNAL (a
/// catalog-managed table), or not DELTA.
fn check_same_table(entry: &TableEntry, t: &Value) -> Result<()> {
    let location = t["storage_location"].as_str().unwrap_or_default();
    if !super::same_location(location, &entry.location) {
        return Err(unity_error(
            &entry.qualified(),
            format!(
                "is registered at {location}, not at {}: drop that entry, or register this lakehouse under another schema (`database` of [metastore])",
                entry.location
            ),
        ));
    }
    let kind = t["table_type"].as_str().unwrap_or_default();
    let format = t["data_source_format"].as_str().unwrap_or_default();
    if kind != "EXTERNAL" || format != "DELTA" {
        return Err(unity_error(
            &entry.qualified(),
            format!(
                "is registered at {location} as a {kind} {format} table, not an EXTERNAL DELTA one: the catalog owns it, and bronze registers only tables it writes itself"
            ),
        ));
    }
    Ok(())
}

fn unity_error(table: &str, reason: String) -> Error {
    Error::Metastore {
        catalog: "unity",
        table: table.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> TableEntry {
        let schema = json!({"type": "struct", "fields": [
            {"name": "_id", "type": "string", "nullable": false, "metadata": {}},
            {"name": "px", "type": "decimal(10,2)", "nullable": true, "metadata": {}},
            {"name": "at", "type": "timestamp_ntz", "nullable": true, "metadata": {}}]});
        TableEntry {
            database: "main.bronze".into(),
            name: "quote".into(),
            location: "s3://lake/bronze/quote".into(),
            columns: columns::columns(&schema).unwrap(),
            version: 0,
        }
    }

    #[test]
    fn columns_carry_spark_s_types_and_the_delta_field() {
        let infos = column_infos(&entry());
        assert_eq!(infos[0]["type_text"], "string");
        assert_eq!(infos[0]["nullable"], false);
        assert_eq!(infos[1]["type_name"], "DECIMAL");
        assert_eq!(
            (
                infos[1]["type_precision"].clone(),
                infos[1]["type_scale"].clone()
            ),
            (json!(10), json!(2))
        );
        assert_eq!(infos[2]["type_text"], "timestamp_ntz");
        let field: Value = serde_json::from_str(infos[2]["type_json"].as_str().unwrap()).unwrap();
        assert_eq!(field, entry().columns[2].field);
        assert_eq!(infos[2]["position"], 2);
    }

    #[test]
    fn a_registered_table_is_compared_by_location_kind_and_delta_types() {
        let registered = json!({
            "table_type": "EXTERNAL", "data_source_format": "DELTA",
            "storage_location": "s3://lake/bronze/quote/",
            // As a server stores them after the Delta API's set-columns: Delta's words.
            "columns": column_infos(&entry()).into_iter().map(|mut c| {
                c["type_text"] = json!("long-ish");
                c
            }).collect::<Vec<_>>(),
        });
        assert!(check_same_table(&entry(), &registered).is_ok());
        assert!(same_columns(&registered, &entry()));
        let mut wider = entry();
        wider.columns.push(wider.columns[0].clone());
        assert!(!same_columns(&registered, &wider));
        let mut managed = registered.clone();
        managed["table_type"] = json!("MANAGED");
        let e = check_same_table(&entry(), &managed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MANAGED") && e.contains("main.bronze.quote"),
            "{e}"
        );
        let mut elsewhere = registered;
        elsewhere["storage_location"] = json!("s3://other/quote");
        let e = check_same_table(&entry(), &elsewhere)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("s3://other/quote") && e.contains("s3://lake/bronze/quote"),
            "{e}"
        );
    }
}
