//! Tables registered in AWS Glue's Data Catalog (moto's server), read back through boto3
//! with the parameters Athena, Spark and Trino look for.

use std::time::Duration;

use bronze::metastore::glue::{Glue, StaticKeys};
use bronze::metastore::{Registered, TableEntry, columns};

use crate::cloud::{moto, python};

fn entry(location: &str, fields: serde_json::Value) -> TableEntry {
    TableEntry {
        database: "bronze_events".into(),
        name: "quote".into(),
        location: location.into(),
        columns: columns::columns(&serde_json::json!({"type": "struct", "fields": fields}))
            .unwrap(),
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
    let tables = lake.all_tables();
    for t in &tables {
        assert!(
            said.contains(&format!("bronze_market.{t}: created")),
            "{t}: {said}"
        );
    }
    // The same from `[metastore]` of a settings file.
    let config = lake.catalog().join("bronze.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\nAWS_ACCESS_KEY_ID = \"a\"\nAWS_SECRET_ACCESS_KEY = \"b\"\n\n[metastore]\nkind = \"glue\"\nregion = \"us-east-1\"\nendpoint = \"{}\"\ndatabase = \"bronze_market\"\n",
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
        (&template[..], "names one database"),
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
    // `bronze register` catches up.
    let out = register_cmd(&moto.endpoint, "bronze_events", &lake);
    assert!(out.status.success(), "{}", crate::util::said(&out));
    assert!(crate::util::said(&out).contains("bronze_events.ev: updated"));
    assert_eq!(columns(), lake.columns("ev"));
}
