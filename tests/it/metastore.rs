//! Tables registered in AWS Glue's Data Catalog (moto's server), read back through boto3
//! with the parameters Athena, Spark and Trino look for; and in Apache Hive's standalone
//! metastore 3.1.3 (`scripts/hive_metastore.sh`), read back through Hive's own client
//! (`scripts/jvm/HmsRead.java`).

use std::time::Duration;

use bronze::metastore::glue::{Glue, StaticKeys};
use bronze::metastore::{Registered, TableEntry, columns};

use crate::cloud::{Emulator, emulator_command, free_port, moto, python, start};

fn entry(location: &str, fields: serde_json::Value) -> TableEntry {
    TableEntry {
        database: "bronze_events".into(),
        name: "quote".into(),
        location: location.into(),
        columns: columns::columns(&serde_json::json!({"type": "struct", "fields": fields}))
            .unwrap(),
        version: 0,
    }
}

fn field(name: &str, ty: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": name, "type": ty, "nullable": true, "metadata": {}})
}

#[test]
fn a_table_is_registered_in_glue_once_and_its_columns_follow_its_schema() {
    let moto = moto();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let keys = StaticKeys {
        access_key_id: "a".into(),
        secret_access_key: "b".into(),
        session_token: None,
    };
    let glue = rt
        .block_on(Glue::connect(
            "us-east-1",
            Some(&moto.endpoint),
            Duration::from_secs(10),
            Some(keys),
        ))
        .unwrap();
    let location = "s3://lake/bronze/quote";
    let first = entry(
        location,
        serde_json::json!([field("_id", "string".into()), field("px", "double".into())]),
    );
    assert_eq!(
        rt.block_on(glue.register(&first)).unwrap(),
        Registered::Created
    );
    assert_eq!(
        rt.block_on(glue.register(&first)).unwrap(),
        Registered::Unchanged
    );
    let nested = serde_json::json!({"type": "array", "elementType": "long", "containsNull": true});
    let wider = entry(
        &format!("{location}/"),
        serde_json::json!([
            field("_id", "string".into()),
            field("px", "double".into()),
            field("legs", nested)
        ]),
    );
    // Another tool's parameter on the entry survives the update of its columns.
    python(
        r#"
import sys, boto3
glue = boto3.client("glue", endpoint_url=sys.argv[1], aws_access_key_id="a",
                    aws_secret_access_key="b", region_name="us-east-1")
t = glue.get_table(DatabaseName="bronze_events", Name="quote")["Table"]
t["Parameters"]["owner_team"] = "risk"
keep = ["Name", "TableType", "Parameters", "StorageDescriptor", "PartitionKeys"]
glue.update_table(DatabaseName="bronze_events", TableInput={k: t[k] for k in keep if k in t})
"#,
        &[&moto.endpoint],
    );
    assert_eq!(
        rt.block_on(glue.register(&wider)).unwrap(),
        Registered::Updated
    );
    let elsewhere = entry(
        "s3://other/bronze/quote",
        serde_json::json!([field("_id", "string".into())]),
    );
    let err = rt
        .block_on(glue.register(&elsewhere))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bronze_events.quote"), "{err}");
    assert!(
        err.contains(location) && err.contains("s3://other/bronze/quote"),
        "{err}"
    );
    let table = python(
        r#"
import json, sys, boto3
glue = boto3.client("glue", endpoint_url=sys.argv[1], aws_access_key_id="a",
                    aws_secret_access_key="b", region_name="us-east-1")
t = glue.get_table(DatabaseName="bronze_events", Name="quote")["Table"]
sd = t["StorageDescriptor"]
print(json.dumps({"type": t["TableType"], "params": t["Parameters"], "location": sd["Location"],
                  "columns": [[c["Name"], c["Type"]] for c in sd["Columns"]],
                  "path": sd["SerdeInfo"]["Parameters"]["path"]}))
"#,
        &[&moto.endpoint],
    );
    let table: serde_json::Value = serde_json::from_str(table.trim()).unwrap();
    assert_eq!(table["type"], "EXTERNAL_TABLE");
    assert_eq!(table["params"]["table_type"], "DELTA");
    assert_eq!(table["params"]["spark.sql.sources.provider"], "delta");
    assert_eq!(table["params"]["owner_team"], "risk", "kept by the update");
    // The update kept the entry's own location (the same folder).
    assert_eq!(table["location"], location);
    assert_eq!(table["path"], location);
    assert_eq!(
        table["columns"],
        serde_json::json!([
            ["_id", "string"],
            ["px", "double"],
            ["legs", "array<bigint>"]
        ])
    );
}

/// `bronze register` into moto's Glue at `endpoint`, database `database`, with the
/// emulator's keys, over `lake`.
fn register_cmd(
    endpoint: &str,
    database: &str,
    lake: &crate::util::TempLake,
) -> std::process::Output {
    crate::util::bronze_cli()
        .args([
            "register",
            "--metastore",
            "glue",
            "--metastore-region",
            "us-east-1",
        ])
        .args([
            "--metastore-endpoint",
            endpoint,
            "--metastore-database",
            database,
        ])
        .args(["--storage-option", "AWS_ACCESS_KEY_ID=a"])
        .args(["--storage-option", "AWS_SECRET_ACCESS_KEY=b"])
        .arg("--catalog")
        .arg(lake.catalog())
        .output()
        .unwrap()
}

/// `bronze register` over a lakehouse: every table in Glue at its folder with the
/// table's columns, then again with nothing to do.
#[test]
fn bronze_register_registers_every_table_once() {
    let moto = moto();
    let lake = crate::util::TempLake::new();
    lake.load("2026-04-05_001");
    let register = || register_cmd(&moto.endpoint, "bronze_market", &lake);
    let out = register();
    let said = crate::util::said(&out);
    assert!(out.status.success(), "{said}");
    let (own, tables): (Vec<String>, Vec<String>) = lake
        .all_tables()
        .into_iter()
        .partition(|t| t.starts_with('_'));
    assert!(!own.is_empty() && !tables.is_empty());
    for t in &tables {
        assert!(
            said.contains(&format!("bronze_market.{t}: created")),
            "{t}: {said}"
        );
    }
    for t in &own {
        assert!(
            !said.contains(&format!("bronze_market.{t}:")),
            "{t}: {said}"
        );
    }
    // The same from `[metastore]` of a settings file.
    let config = lake.catalog().join("bronze.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\nAWS_ACCESS_KEY_ID = \"a\"\nAWS_SECRET_ACCESS_KEY = \"b\"\n\n[metastore]\nkind = \"glue\"\nregion = \"us-east-1\"\nendpoint = \"{}\"\ndatabase = \"bronze_market\"\nown_tables = true\n",
            moto.endpoint
        ),
    )
    .unwrap();
    let out = crate::util::bronze_cli()
        .args([
            "register",
            "--config",
            config.to_str().unwrap(),
            "--catalog",
        ])
        .arg(lake.catalog())
        .output()
        .unwrap();
    let again = crate::util::said(&out);
    assert_eq!(
        again.matches(": unchanged").count(),
        tables.len(),
        "{again}"
    );
    // With `own_tables`, bronze's own tables too.
    for t in &own {
        assert!(
            again.contains(&format!("bronze_market.{t}: created")),
            "{t}: {again}"
        );
    }
    // Without a catalog, or with a database per landing path: refused, saying why.
    let template = [
        "--metastore",
        "glue",
        "--metastore-region",
        "r",
        "--metastore-database",
        "b_{entity}",
    ];
    for (extra, says) in [
        (&[][..], "no catalog to register in"),
        (&template[..], "name one database"),
    ] {
        let out = crate::util::bronze_cli()
            .arg("register")
            .args(extra)
            .arg("--catalog")
            .arg(lake.catalog())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", crate::util::said(&out));
        assert!(
            crate::util::said(&out).contains(says),
            "{}",
            crate::util::said(&out)
        );
    }
    let listed = python(
        r#"
import json, sys, boto3
glue = boto3.client("glue", endpoint_url=sys.argv[1], aws_access_key_id="a",
                    aws_secret_access_key="b", region_name="us-east-1")
ts = glue.get_tables(DatabaseName="bronze_market")["TableList"]
print(json.dumps({t["Name"]: [t["StorageDescriptor"]["Location"], [c["Name"] for c in t["StorageDescriptor"]["Columns"]]] for t in ts}))
"#,
        &[&moto.endpoint],
    );
    let listed: serde_json::Value = serde_json::from_str(listed.trim()).unwrap();
    for t in &tables {
        let location = listed[t][0].as_str().unwrap();
        assert!(location.ends_with(&format!("/bronze/{t}")), "{location}");
        let columns: Vec<String> = listed[t][1]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        assert_eq!(columns, lake.columns(t), "{t}");
    }
}

/// A run registers the tables it creates and the columns it adds; with the catalog down
/// the batch still loads (exit 1, the table named in the report), and `bronze register`
/// catches up.
#[test]
fn runs_register_new_tables_and_columns_and_an_outage_loses_nothing() {
    let moto = moto();
    let lake = crate::util::TempLake::new();
    let landing = tempfile::tempdir().unwrap();
    let batch = |id: &str, payload: &str| {
        let dir = landing
            .path()
            .join("feed/events")
            .join(format!("batch_id={id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let line = format!(r#"{{"topic":"ev","message_id":"{id}","payload":{payload}}}"#);
        std::fs::write(dir.join("part-0.jsonl"), line).unwrap();
        dir
    };
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let ingest = |dir: &std::path::Path, endpoint: &str| {
        crate::util::bronze_cli()
            .args(["ingest", dir.to_str().unwrap(), "--json"])
            .args(["--metastore", "glue", "--metastore-region", "us-east-1"])
            .args([
                "--metastore-endpoint",
                endpoint,
                "--metastore-database",
                "bronze_{entity}",
            ])
            .args(["--metastore-timeout", "5s"])
            .args(["--storage-option", "AWS_ACCESS_KEY_ID=a"])
            .args(["--storage-option", "AWS_SECRET_ACCESS_KEY=b"])
            .arg("--catalog")
            .arg(lake.catalog())
            .output()
            .unwrap()
    };
    let columns = || {
        let out = python(
            r#"
import json, sys, boto3
glue = boto3.client("glue", endpoint_url=sys.argv[1], aws_access_key_id="a",
                    aws_secret_access_key="b", region_name="us-east-1")
t = glue.get_table(DatabaseName="bronze_events", Name="ev")["Table"]
print(json.dumps([c["Name"] for c in t["StorageDescriptor"]["Columns"]]))
"#,
            &[&moto.endpoint],
        );
        serde_json::from_str::<Vec<String>>(out.trim()).unwrap()
    };
    let out = ingest(&batch("b1", r#"{"a":1}"#), &moto.endpoint);
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    assert_eq!(columns(), lake.columns("ev"));
    let out = ingest(&batch("b2", r#"{"a":2,"b":"x"}"#), &moto.endpoint);
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    assert!(columns().contains(&"b".to_string()));
    // The catalog down: the batch loads, the report names what was not registered.
    let out = ingest(&batch("b3", r#"{"a":3,"c":2}"#), &closed);
    assert_eq!(out.status.code(), Some(1), "{}", crate::util::said(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let unregistered = report["unregistered"].as_array().unwrap();
    assert_eq!(unregistered.len(), 1, "{report}");
    assert!(
        unregistered[0]
            .as_str()
            .unwrap()
            .starts_with("bronze_events.ev: "),
        "{report}"
    );
    assert_eq!(lake.count("ev"), 3, "nothing lost");
    assert!(!columns().contains(&"c".to_string()));
    let status = || {
        let out = crate::util::bronze_cli()
            .args([
                "status",
                landing.path().to_str().unwrap(),
                "--json",
                "--catalog",
            ])
            .arg(lake.catalog())
            .output()
            .unwrap();
        let entities: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        entities[0]["unregistered"].clone()
    };
    let listed = status();
    assert_eq!(listed[0]["database"], "bronze_events", "{listed}");
    assert_eq!(listed[0]["table"], "ev", "{listed}");
    assert_eq!(listed[0]["landing_path"], "feed/events", "{listed}");
    // `bronze register` with the runs' template catches up with what they recorded, in
    // its database, and clears the record.
    let out = register_cmd(&moto.endpoint, "bronze_{entity}", &lake);
    assert!(out.status.success(), "{}", crate::util::said(&out));
    assert!(crate::util::said(&out).contains("bronze_events.ev: updated"));
    assert_eq!(columns(), lake.columns("ev"));
    assert_eq!(status(), serde_json::json!([]));
}

/// The folder of the JVM jars `scripts/test` copies from Maven Central.
fn jvm_dir() -> std::path::PathBuf {
    std::env::var_os("BRONZE_JVM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::util::repo().join(".emulators/jvm"))
}

/// Hive's standalone metastore on `port`, its Derby database in `dir`; stopped on drop.
fn hive_metastore(dir: &std::path::Path, port: u16) -> Emulator {
    let mut cmd = emulator_command(crate::util::repo().join("scripts/hive_metastore.sh"));
    cmd.arg(dir)
        .arg(port.to_string())
        .env("BRONZE_JVM", jvm_dir());
    start(
        cmd,
        "Started the new metaserver on port",
        format!("thrift://127.0.0.1:{port}"),
        true,
    )
}

/// Each request (`<database>\t<table>`, or `<database>` for its table names) answered
/// by Hive's own client (`scripts/jvm/HmsRead.java`).
fn hms_read(uri: &str, requests: &[&str]) -> Vec<serde_json::Value> {
    let jars = jvm_dir().join("hive/*");
    let mut child = std::process::Command::new("java")
        .arg("-cp")
        .arg(jars)
        .arg(crate::util::repo().join("scripts/jvm/HmsRead.java"))
        .arg(uri)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(requests.join("\n").as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        out.status.success() && answers.len() == requests.len(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    answers
}

/// A run registers its tables in a Hive Metastore as Spark and Trino register a Delta
/// table; with the metastore down the batch still loads (exit 1, `bronze status` names the
/// table), and the next run registers what the last one could not, then new topics and
/// columns as they come.
#[test]
fn runs_register_in_a_hive_metastore_and_the_next_run_catches_up_after_an_outage() {
    let lake = crate::util::TempLake::new();
    let landing = tempfile::tempdir().unwrap();
    let batch = |id: &str, topic: &str, payload: &str| {
        let dir = landing
            .path()
            .join("feed/events")
            .join(format!("batch_id={id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let line = format!(r#"{{"topic":"{topic}","message_id":"{id}","payload":{payload}}}"#);
        std::fs::write(dir.join("part-0.jsonl"), line).unwrap();
        dir
    };
    let port = free_port();
    let uri = format!("thrift://127.0.0.1:{port}");
    let ingest_cmd = |dir: &std::path::Path| {
        let mut cmd = crate::util::bronze_cli();
        cmd.args(["ingest", dir.to_str().unwrap(), "--json"])
            .args(["--metastore", "hive", "--metastore-uri", &uri])
            .args(["--metastore-database", "{source}_{entity}"])
            .args(["--metastore-timeout", "20s"])
            .arg("--catalog")
            .arg(lake.catalog());
        cmd
    };
    let ingest = |dir: &std::path::Path| ingest_cmd(dir).output().unwrap();
    let status = || {
        let out = crate::util::bronze_cli()
            .args(["status", landing.path().to_str().unwrap(), "--catalog"])
            .arg(lake.catalog())
            .output()
            .unwrap();
        crate::util::said(&out)
    };
    // The metastore not started yet: the port is closed.
    let out = ingest(&batch("b1", "ev", r#"{"a":1}"#));
    assert_eq!(out.status.code(), Some(1), "{}", crate::util::said(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let unregistered = report["unregistered"].to_string();
    assert!(unregistered.contains("feed_events.ev: "), "{report}");
    assert!(
        unregistered.contains(&format!("127.0.0.1:{port}")),
        "{report}"
    );
    assert_eq!(lake.count("ev"), 1, "nothing lost");
    let said = status();
    assert!(
        said.contains("table feed_events.ev not registered in the catalog"),
        "{said}"
    );
    let hms_dir = tempfile::tempdir().unwrap();
    let _hms = hive_metastore(hms_dir.path(), port);
    // The next run registers the table the last one could not, and the column it adds.
    let out = ingest(&batch("b2", "ev", r#"{"a":2,"b":"x"}"#));
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    assert!(!status().contains("not registered"), "{}", status());
    let location = url::Url::from_directory_path(lake.schema_dir().join("ev"))
        .unwrap()
        .to_string();
    let location = location.trim_end_matches('/');
    let got = &hms_read(&uri, &["feed_events\tev"])[0];
    assert_eq!(got["tableType"], "EXTERNAL_TABLE", "{got}");
    // The metastore keeps a location as Hadoop's `Path` writes it: `file:/tmp/…`.
    assert_eq!(
        got["location"],
        location.replacen("file:///", "file:/", 1),
        "{got}"
    );
    assert_eq!(got["serdePath"], location, "{got}");
    assert_eq!(got["parameters"]["spark.sql.sources.provider"], "delta");
    assert_eq!(got["parameters"]["EXTERNAL"], "TRUE");
    let names = |t: &serde_json::Value| -> Vec<String> {
        t["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c[0].as_str().unwrap().to_string())
            .collect()
    };
    let lower = |cs: Vec<String>| -> Vec<String> { cs.iter().map(|c| c.to_lowercase()).collect() };
    assert_eq!(names(got), lower(lake.columns("ev")));
    assert!(names(got).contains(&"b".to_string()));
    // Another tool's parameter on the entry.
    let set = hms_read(&uri, &["set\tfeed_events\tev\towner_team\trisk"]);
    assert_eq!(set[0]["parameters"]["owner_team"], "risk", "{set:?}");
    // A run killed after its commits, before it registers its new topic's table: the
    // table is recorded, and the next run registers it with its own new column.
    let mut killed = ingest_cmd(&batch("b3", "tr", r#"{"qty":[1,2]}"#));
    let out = killed
        .env("BRONZE_FAILPOINT", "before_drop_staging")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", crate::util::said(&out));
    assert_eq!(lake.count("tr"), 1, "committed before the kill");
    let said = status();
    assert!(
        said.contains("table feed_events.tr not registered in the catalog: not registered yet"),
        "{said}"
    );
    let out = ingest(&batch("b4", "ev", r#"{"a":4,"c":true}"#));
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    assert!(!status().contains("not registered"), "{}", status());
    let got = hms_read(&uri, &["feed_events", "feed_events\tev", "feed_events\ttr"]);
    assert_eq!(
        got[1]["parameters"]["owner_team"], "risk",
        "kept by the update: {got:?}"
    );
    let listed: Vec<&str> = got[0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in ["ev", "tr"] {
        assert!(listed.contains(&t), "{t}: {listed:?}");
    }
    assert_eq!(names(&got[1]), lower(lake.columns("ev")));
    assert!(names(&got[1]).contains(&"c".to_string()));
    assert_eq!(names(&got[2]), lower(lake.columns("tr")));
    // Another lakehouse's table of the same name: refused, both folders named.
    let other = crate::util::TempLake::new();
    let out = crate::util::bronze_cli()
        .args(["ingest", batch("o1", "ev", r#"{"a":1}"#).to_str().unwrap()])
        .args(["--metastore", "hive", "--metastore-uri", &uri])
        .args(["--metastore-database", "feed_events", "--catalog"])
        .arg(other.catalog())
        .output()
        .unwrap();
    let said = crate::util::said(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(location), "{said}");
    assert!(
        said.contains(other.schema_dir().join("ev").to_str().unwrap()),
        "{said}"
    );
    assert_eq!(other.count("ev"), 1, "the batch loads all the same");
}

/// Unity Catalog's REST API server (`olai-uc-server`, built by `scripts/test` into
/// .emulators/uc-server) on a free port, files under `root` allowed; stopped on drop.
fn uc_server(config_dir: &std::path::Path, root: &std::path::Path) -> Emulator {
    let bin = std::env::var_os("BRONZE_UC_SERVER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::util::repo().join(".emulators/uc-server/bin/uc-server"));
    assert!(
        bin.exists(),
        "{} missing: the Unity Catalog tests need the server `scripts/test` builds (cargo install olai-uc-server --features bin)",
        bin.display()
    );
    let config = config_dir.join("uc.yaml");
    std::fs::write(
        &config,
        format!(
            "local_storage:\n  allowed-roots: [{:?}]\n",
            root.to_str().unwrap()
        ),
    )
    .unwrap();
    let port = free_port();
    let mut cmd = emulator_command(bin);
    cmd.args([
        "serve",
        "-c",
        config.to_str().unwrap(),
        "--host",
        "127.0.0.1",
    ])
    .args(["--port", &port.to_string(), "--no-ui"])
    .env("RUST_LOG", "info")
    .env("NO_COLOR", "1");
    start(
        cmd,
        "Listening on",
        format!("http://127.0.0.1:{port}"),
        false,
    )
}

/// The catalog `main` over `root`, as a Databricks workspace has one: a storage
/// credential (its role is not checked), an external location over `root`, the catalog.
fn uc_catalog(url: &str, root: &std::path::Path) {
    python(
        r#"
import json, sys, urllib.request
api, root = sys.argv[1] + "/api/2.1/unity-catalog", sys.argv[2]
def post(path, body):
    req = urllib.request.Request(api + path, json.dumps(body).encode(), {"content-type": "application/json"})
    urllib.request.urlopen(req).read()
post("/credentials", {"name": "local", "purpose": "STORAGE",
                      "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/local"}})
post("/external-locations", {"name": "lake", "url": "file://" + root, "credential_name": "local"})
post("/catalogs", {"name": "main", "storage_root": "file://" + root + "/main"})
"#,
        &[url, root.to_str().unwrap()],
    );
}

/// Tables of schema `main.<schema>` read back through Unity Catalog's Python SDK
/// (`unitycatalog-client`): `{name: {id, type, format, location, columns: [[name,
/// type_text, type_name]]}}`. Each table is also validated as the SDK's `TableInfo` model.
fn uc_tables(url: &str, schema: &str) -> serde_json::Value {
    let out = python(
        r#"
import asyncio, json, sys
from unitycatalog.client import ApiClient, Configuration, TablesApi
from unitycatalog.client.models import TableInfo

async def main(url, schema):
    async with ApiClient(Configuration(host=url + "/api/2.1/unity-catalog")) as client:
        api = TablesApi(client)
        listed = json.loads(await (await api.list_tables_without_preload_content(
            catalog_name="main", schema_name=schema, max_results=50)).read())
        out = {}
        for t in listed.get("tables", []):
            raw = json.loads(await (await api.get_table_without_preload_content(t["full_name"])).read())
            # olai-uc-server sends created_at/updated_at as strings; the API says int64.
            for k in ("created_at", "updated_at"):
                if isinstance(raw.get(k), str):
                    raw[k] = int(raw[k])
            info = TableInfo.from_dict(raw)
            out[info.name] = {"id": info.table_id,
                              "type": info.table_type.value, "format": info.data_source_format.value,
                              "location": info.storage_location,
                              "columns": [[c.name, c.type_text, c.type_name.value] for c in info.columns or []]}
        print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"#,
        &[url, schema],
    );
    serde_json::from_str(out.trim()).unwrap()
}

/// A run registers its tables in Unity Catalog as EXTERNAL DELTA tables with their
/// columns (Spark's type strings); the next batch's new topic and new column appear there
/// too; a name registered at another folder is refused, naming both.
#[test]
fn runs_register_their_tables_in_unity_catalog_and_follow_new_topics_and_columns() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let uc = uc_server(config_dir.path(), &root_path);
    uc_catalog(&uc.endpoint, &root_path);
    let lake = crate::util::TempLake::at(root_path.join("lake"), "bronze");
    let landing = tempfile::tempdir().unwrap();
    let batch = |id: &str, topic: &str, payload: &str| {
        let dir = landing
            .path()
            .join("feed/events")
            .join(format!("batch_id={id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let line = format!(r#"{{"topic":"{topic}","message_id":"{id}","payload":{payload}}}"#);
        std::fs::write(dir.join("part-0.jsonl"), line).unwrap();
        dir
    };
    let ingest = |lake: &crate::util::TempLake, dir: &std::path::Path| {
        crate::util::bronze_cli()
            .args(["ingest", dir.to_str().unwrap(), "--json"])
            .args(["--metastore", "unity", "--metastore-uri", &uc.endpoint])
            .args(["--metastore-database", "main.bronze_{entity}"])
            .args(["--column-type", "ev:/doc=variant"])
            .args(["--column-type", "ev:/px=decimal(10,2)"])
            .arg("--catalog")
            .arg(lake.catalog())
            .output()
            .unwrap()
    };
    let out = ingest(
        &lake,
        &batch(
            "b1",
            "ev",
            r#"{"a":1,"px":1.25,"legs":[{"k":"x"}],"doc":{"n":[1,{"m":"é"}]}}"#,
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    let tables = uc_tables(&uc.endpoint, "bronze_events");
    let ev = &tables["ev"];
    assert_eq!(ev["type"], "EXTERNAL", "{tables}");
    assert_eq!(ev["format"], "DELTA", "{tables}");
    let location = url::Url::from_directory_path(lake.schema_dir().join("ev"))
        .unwrap()
        .to_string();
    assert_eq!(ev["location"], location.trim_end_matches('/'), "{tables}");
    let names = |t: &serde_json::Value| -> Vec<String> {
        t["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c[0].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(ev), lake.columns("ev"));
    let typed: Vec<(String, String)> = ev["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c[0].as_str().unwrap().into(), c[1].as_str().unwrap().into()))
        .collect();
    for (column, type_text, type_name) in [
        ("_id", "string", "STRING"),
        ("_line", "bigint", "LONG"),
        ("px", "decimal(10,2)", "DECIMAL"),
        ("doc", "variant", "VARIANT"),
    ] {
        let found = ev["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c[0] == column)
            .unwrap_or_else(|| panic!("{column}: {typed:?}"));
        assert_eq!(
            (found[1].as_str(), found[2].as_str()),
            (Some(type_text), Some(type_name)),
            "{column}"
        );
    }
    let id = ev["id"].clone();
    // The child table of `legs`.
    for t in lake.tables() {
        if !t.starts_with('_') {
            assert_eq!(names(&tables[&t]), lake.columns(&t), "{t}: {tables}");
        }
    }
    // A new topic and a new column.
    let out = ingest(&lake, &batch("b2", "tr", r#"{"qty":7}"#));
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    let out = ingest(&lake, &batch("b3", "ev", r#"{"a":3,"venue":"XETR"}"#));
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::said(&out));
    let tables = uc_tables(&uc.endpoint, "bronze_events");
    assert_eq!(names(&tables["tr"]), lake.columns("tr"));
    assert_eq!(names(&tables["ev"]), lake.columns("ev"));
    assert!(names(&tables["ev"]).contains(&"venue".to_string()));
    // Its columns updated in place (the Delta API's `set-columns`): the same entry.
    assert_eq!(tables["ev"]["id"], id, "{tables}");
    // Another lakehouse's table of the same name: refused, both folders named.
    let other = crate::util::TempLake::at(root_path.join("other"), "bronze");
    let out = ingest(&other, &batch("o1", "ev", r#"{"a":1}"#));
    let said = crate::util::said(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(location.trim_end_matches('/')), "{said}");
    assert!(said.contains("/other/bronze/ev"), "{said}");
    assert_eq!(other.count("ev"), 1, "the batch loads all the same");
}

/// A table a catalog owns (`catalogManaged` in its protocol) is never registered as an
/// external table at its folder: `bronze register` names the feature.
#[test]
fn a_catalog_managed_table_is_never_registered_as_an_external_one() {
    let lake = crate::util::TempLake::new();
    lake.load("2026-04-05_001");
    let log = lake.schema_dir().join("trade/_delta_log");
    let next = std::fs::read_dir(&log)
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".json")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap()
        + 1;
    let protocol = r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["catalogManaged","vacuumProtocolCheck"],"writerFeatures":["catalogManaged","inCommitTimestamp","vacuumProtocolCheck"]}}"#;
    let commit = log.join(format!("{next:020}.json"));
    std::fs::write(&commit, format!("{protocol}\n")).unwrap();
    let closed = format!("thrift://127.0.0.1:{}", free_port());
    let out = crate::util::bronze_cli()
        .args([
            "register",
            "--metastore",
            "hive",
            "--metastore-uri",
            &closed,
        ])
        .args(["--metastore-database", "bronze_market", "--catalog"])
        .arg(lake.catalog())
        .output()
        .unwrap();
    let said = crate::util::said(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    let line = said
        .lines()
        .find(|l| l.contains("bronze_market.trade"))
        .unwrap_or_default();
    assert!(line.contains("catalogManaged"), "{said}");
    // The lake's own checks on drop read every table as bronze wrote it.
    std::fs::remove_file(commit).unwrap();
}
