//! AWS Glue's Data Catalog over its JSON API (`POST /` with `X-Amz-Target:
//! AWSGlue.<Op>`), each request signed with SigV4 by credentials of AWS's usual provider
//! chain (environment, profile, web identity, instance role).

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use serde_json::{Value, json};

use super::columns::Column;
use super::{Registered, TableEntry};
use crate::error::{Error, Result};

/// A Glue Data Catalog of one region (or an endpoint that serves its API).
pub struct Glue {
    client: reqwest::Client,
    endpoint: String,
    region: String,
    credentials: SharedCredentialsProvider,
}

/// AWS keys given as settings rather than found by the provider chain.
#[derive(Clone)]
pub struct StaticKeys {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, for temporary credentials.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for StaticKeys {
    /// The key id only: secrets are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StaticKeys({}, ***)", self.access_key_id)
    }
}

/// An error Glue answered with: its type (`EntityNotFoundException`) and message.
#[derive(Debug)]
struct Refused {
    kind: String,
    message: String,
}

impl Refused {
    /// Not reached, throttled or failing on Glue's side: worth another attempt.
    fn transient(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "Unreachable"
                | "ThrottlingException"
                | "InternalServiceException"
                | "OperationTimeoutException"
        ) || self.kind.starts_with("HTTP 5")
            || self.kind == "HTTP 429 Too Many Requests"
    }
}

impl Glue {
    /// The catalog of `region`, at `endpoint` when given (else Glue's own), each request
    /// bounded by `timeout`; signed with `keys` when given (the lakehouse's own
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`), else with AWS's provider chain.
    pub async fn connect(
        region: &str,
        endpoint: Option<&str>,
        timeout: Duration,
        keys: Option<StaticKeys>,
    ) -> Result<Glue> {
        let credentials = match keys {
            Some(k) => SharedCredentialsProvider::new(aws_credential_types::Credentials::new(
                k.access_key_id,
                k.secret_access_key,
                k.session_token,
                None,
                "bronze-storage-options",
            )),
            None => aws_config::defaults(aws_config::BehaviorVersion::latest())
                .region(aws_config::Region::new(region.to_string()))
                .load()
                .await
                .credentials_provider()
                .ok_or_else(|| Error::Config {
                    name: "metastore",
                    reason: "no AWS credentials found for Glue: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile (AWS_PROFILE) or a role".into(),
                })?,
        };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| glue_error("", format!("cannot build an HTTP client: {e}")))?;
        Ok(Glue {
            client,
            endpoint: endpoint.map_or_else(
                || format!("https://glue.{region}.amazonaws.com/"),
                str::to_string,
            ),
            region: region.to_string(),
            credentials,
        })
    }

    /// Registers `entry`: its database created when missing, the table created, or its
    /// columns updated when they differ; a table of that name at another location (or not
    /// a Delta table) is refused, naming both.
    pub async fn register(&self, entry: &TableEntry) -> Result<Registered> {
        let named = |e: Refused| match e.transient() {
            true => Error::MetastoreUnreachable {
                catalog: "glue",
                reason: format!("{}: {}: {}", self.endpoint, e.kind, e.message),
            },
            false => glue_error(&entry.qualified(), format!("{}: {}", e.kind, e.message)),
        };
        match self
            .call("GetDatabase", json!({"Name": entry.database}))
            .await
        {
            Ok(_) => {}
            Err(e) if e.kind == "EntityNotFoundException" => {
                let input = json!({"DatabaseInput": {"Name": entry.database}});
                match self.call("CreateDatabase", input).await {
                    Ok(_) => {}
                    Err(e) if e.kind == "AlreadyExistsException" => {}
                    Err(e) => return Err(named(e)),
                }
            }
            Err(e) => return Err(named(e)),
        }
        let get = json!({"DatabaseName": entry.database, "Name": entry.name});
        let existing = match self.call("GetTable", get.clone()).await {
            Ok(found) => found.get("Table").cloned().unwrap_or(Value::Null),
            Err(e) if e.kind == "EntityNotFoundException" => {
                let create =
                    json!({"DatabaseName": entry.database, "TableInput": table_input(entry)});
                match self.call("CreateTable", create).await {
                    Ok(_) => return Ok(Registered::Created),
                    // Another worker's create, or this one's on an attempt that timed
                    // out after Glue took it: read back and compared below.
                    Err(e) if e.kind == "AlreadyExistsException" => {
                        let found = self.call("GetTable", get).await.map_err(named)?;
                        found.get("Table").cloned().unwrap_or(Value::Null)
                    }
                    Err(e) => return Err(named(e)),
                }
            }
            Err(e) => return Err(named(e)),
        };
        check_same_table(entry, &existing)?;
        if columns_of(&existing) == entry.columns.iter().map(glue_column).collect::<Vec<_>>() {
            return Ok(Registered::Unchanged);
        }
        let update =
            json!({"DatabaseName": entry.database, "TableInput": updated_input(&existing, entry)});
        self.call("UpdateTable", update).await.map_err(named)?;
        Ok(Registered::Updated)
    }

    /// Calls operation `op` with `body` in up to [`super::ATTEMPTS`] attempts (another
    /// only when the last was [`Refused::transient`]); Glue's answer, or the error it
    /// refused with (a transport failure as `kind` `Unreachable`).
    async fn call(&self, op: &str, body: Value) -> std::result::Result<Value, Refused> {
        let mut attempt = 1;
        loop {
            match self.attempt(op, &body).await {
                Err(e) if e.transient() && attempt < super::ATTEMPTS => {
                    super::pause_before_retry(attempt).await;
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    async fn attempt(&self, op: &str, body: &Value) -> std::result::Result<Value, Refused> {
        let unreachable = |message: String| Refused {
            kind: "Unreachable".into(),
            message,
        };
        let body = serde_json::to_vec(body).map_err(|e| unreachable(e.to_string()))?;
        let target = format!("AWSGlue.{op}");
        let headers = [
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target.as_str()),
        ];
        let signed = self
            .sign(&headers, &body)
            .await
            .map_err(|message| Refused {
                kind: "Credentials".into(),
                message,
            })?;
        let mut request = self.client.post(&self.endpoint).body(body);
        for (name, value) in headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .chain(signed)
        {
            request = request.header(name, value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable(format!("{} {op}: {e}", self.endpoint)))?;
        let status = response.status();
        let text = super::body_text(response)
            .await
            .map_err(|e| unreachable(format!("{} {op}: {e}", self.endpoint)))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        // `__type` may carry a namespace before `#` (awsJson1_1).
        let kind = value.get("__type").and_then(Value::as_str).map_or_else(
            || format!("HTTP {status}"),
            |t| t.rsplit('#').next().unwrap_or(t).to_string(),
        );
        let message = ["message", "Message"]
            .iter()
            .find_map(|k| value.get(*k).and_then(Value::as_str))
            .map_or_else(|| text.chars().take(300).collect(), str::to_string);
        Err(Refused { kind, message })
    }

    /// The SigV4 headers for a request with `headers` and `body` to the endpoint.
    async fn sign(
        &self,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::result::Result<Vec<(String, String)>, String> {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| format!("AWS credentials for Glue: {e}"))?;
        let identity = credentials.into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("glue")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| e.to_string())?
            .into();
        let request = SignableRequest::new(
            "POST",
            &self.endpoint,
            headers.iter().copied(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| e.to_string())?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| e.to_string())?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect())
    }
}

/// The `TableInput` of a registered `table` (as GetTable returned it) with `entry`'s
/// columns: what other tools set on it (parameters, description, SerDe settings) kept.
fn updated_input(table: &Value, entry: &TableEntry) -> Value {
    // The keys of a `TableInput`: the rest of a `Table` is Glue's own (read only).
    const INPUT_KEYS: [&str; 12] = [
        "Name",
        "Description",
        "Owner",
        "LastAccessTime",
        "LastAnalyzedTime",
        "Retention",
        "StorageDescriptor",
        "PartitionKeys",
        "ViewOriginalText",
        "ViewExpandedText",
        "TableType",
        "Parameters",
    ];
    let mut input = serde_json::Map::new();
    for key in INPUT_KEYS {
        if let Some(v) = table.get(key) {
            input.insert(key.to_string(), v.clone());
        }
    }
    let columns: Vec<Value> = entry.columns.iter().map(glue_column).collect();
    match input
        .get_mut("StorageDescriptor")
        .and_then(Value::as_object_mut)
    {
        Some(sd) => {
            sd.insert("Columns".into(), Value::Array(columns));
        }
        None => return table_input(entry),
    }
    Value::Object(input)
}

/// The `TableInput` of `entry`: an external Delta table as Athena (`table_type`), Spark
/// and Trino (`spark.sql.sources.provider`, the SerDe's `path`) find one.
fn table_input(entry: &TableEntry) -> Value {
    json!({
        "Name": entry.name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "EXTERNAL": "TRUE",
            "table_type": "DELTA",
            "spark.sql.sources.provider": "delta",
            "spark.sql.partitionProvider": "catalog",
        },
        "PartitionKeys": [],
        "StorageDescriptor": {
            "Location": entry.location,
            "Columns": entry.columns.iter().map(glue_column).collect::<Vec<_>>(),
            "InputFormat": "org.apache.hadoop.mapred.SequenceFileInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat",
            "SerdeInfo": {
                "SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                "Parameters": {"path": entry.location, "serialization.format": "1"},
            },
            "Compressed": false,
            "NumberOfBuckets": -1,
        },
    })
}

fn glue_column(c: &Column) -> Value {
    json!({"Name": c.name, "Type": c.hive_type})
}

/// The columns of a table Glue returned, as [`glue_column`] writes them.
fn columns_of(table: &Value) -> Vec<Value> {
    table["StorageDescriptor"]["Columns"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| json!({"Name": c["Name"], "Type": c["Type"]}))
                .collect()
        })
        .unwrap_or_default()
}

/// Refuses a registered table that is not `entry`'s: another location, or not Delta.
fn check_same_table(entry: &TableEntry, table: &Value) -> Result<()> {
    let location = table["StorageDescriptor"]["Location"]
        .as_str()
        .unwrap_or("");
    if !super::same_location(location, &entry.location) {
        return Err(glue_error(
            &entry.qualified(),
            format!(
                "is registered at {location}, not at {}: drop that entry, or register this lakehouse under another database (`database` of [metastore])",
                entry.location
            ),
        ));
    }
    let provider = table["Parameters"]["spark.sql.sources.provider"].as_str();
    let table_type = table["Parameters"]["table_type"].as_str();
    let delta = |v: Option<&str>| v.is_some_and(|v| v.eq_ignore_ascii_case("delta"));
    if !delta(provider) && !delta(table_type) {
        return Err(glue_error(
            &entry.qualified(),
            format!(
                "is registered at {location} but not as a Delta table: drop that entry and register again"
            ),
        ));
    }
    Ok(())
}

fn glue_error(table: &str, reason: String) -> Error {
    Error::Metastore {
        catalog: "glue",
        table: table.to_string(),
        reason,
    }
}
