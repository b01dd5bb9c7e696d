"""A payload part hinted `variant` (`--column-type 'ev:/doc=variant'`), and a topic's whole
payloads (`--topic-payload ev=variant`), read back by the engines users run: Spark with Delta by SQL (`to_json`, `:` paths, `variant_get`) and
Python `deltalake`, value for value, numbers exact."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ingest, land

LINES = [
    {"topic": "ev", "message_id": "1", "payload": {"sym": "A", "doc": {
        "px": "PX", "Px": None, "legs": [1, 2, {"k": "é ✓"}], "n": {"deep": [[], {}]}}}},
    {"topic": "ev", "message_id": "2", "payload": {"sym": "B", "doc": "just text"}},
    {"topic": "ev", "message_id": "3", "payload": {"sym": "C"}},
]
# Exact decimals and big integers are written as literals json.dumps cannot make.
LINE_4 = ('{"topic":"ev","message_id":"4","payload":{"sym":"D","doc":{"price":1.10,'
          '"qty":123456789012345678901234567890,"ratio":6.02e23,"i":-7}}}')


def _load(tmp_path: Path) -> Path:
    batch = land(tmp_path / "landing", "v1", [*LINES, LINE_4])
    lake = tmp_path / "lake"
    ingest(lake, batch, "--column-type", "ev:/doc=variant")
    return lake / "bronze" / "ev"


def test_spark_reads_a_variant_column_bronze_wrote(spark, tmp_path: Path) -> None:
    table = _load(tmp_path)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW ev AS SELECT * FROM delta.`{table}`")
    types = {f.name: f.dataType.simpleString() for f in spark.table("ev").schema.fields}
    assert types["doc"] == "variant"
    rows = {r["_id"]: r for r in spark.sql(
        "SELECT _id, to_json(doc) AS j, doc:legs[2].k::string AS k,"
        " variant_get(doc, '$.price', 'decimal(10,2)') AS price,"
        " variant_get(doc, '$.qty', 'decimal(38,0)') AS qty,"
        " doc:ratio::double AS ratio, doc:i::int AS i FROM ev").collect()}
    assert json.loads(rows["1"]["j"]) == LINES[0]["payload"]["doc"]
    assert rows["1"]["k"] == "é ✓"
    assert json.loads(rows["2"]["j"]) == "just text"
    assert rows["3"]["j"] is None
    assert str(rows["4"]["price"]) == "1.10"
    assert str(rows["4"]["qty"]) == "123456789012345678901234567890"
    assert rows["4"]["ratio"] == 6.02e23
    assert rows["4"]["i"] == -7
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{table}`").collect()}
    assert props.get("delta.feature.variantType") == "supported", props


def test_spark_reads_a_topic_whose_payloads_bronze_kept_whole(spark, tmp_path: Path) -> None:
    """`--topic-payload ev=variant`: one `payload` column, no child tables."""
    batch = land(tmp_path / "landing", "p1", [*LINES, LINE_4])
    lake = tmp_path / "lake"
    ingest(lake, batch, "--topic-payload", "ev=variant")
    assert sorted(p.name for p in (lake / "bronze").iterdir() if not p.name.startswith("_")) == ["ev"]
    spark.sql(f"CREATE OR REPLACE TEMP VIEW evp AS SELECT * FROM delta.`{lake / 'bronze' / 'ev'}`")
    types = {f.name: f.dataType.simpleString() for f in spark.table("evp").schema.fields}
    assert [c for c in types if not c.startswith("_")] == ["payload"] and types["payload"] == "variant"
    rows = {r["_id"]: r for r in spark.sql(
        "SELECT _id, to_json(payload) AS j, payload:sym::string AS sym, payload:doc.legs[2].k::string AS k,"
        " variant_get(payload, '$.doc.qty', 'decimal(38,0)') AS qty FROM evp").collect()}
    for line in LINES:
        assert json.loads(rows[line["message_id"]]["j"]) == line["payload"]
    assert [rows[i]["sym"] for i in "1234"] == ["A", "B", "C", "D"]
    assert rows["1"]["k"] == "é ✓"
    assert str(rows["4"]["qty"]) == "123456789012345678901234567890"


def test_python_deltalake_reads_a_variant_column_bronze_wrote(tmp_path: Path) -> None:
    import deltalake

    table = _load(tmp_path)
    dt = deltalake.DeltaTable(str(table))
    protocol = dt.protocol()
    assert "variantType" in (protocol.reader_features or []), protocol
    data = dt.to_pyarrow_table()
    doc = data.column("doc")
    # A struct of the Variant's two binaries, one per row, null where the row has none.
    assert {f.name for f in doc.type} == {"metadata", "value"}
    ids = data.column("_id").to_pylist()
    assert doc[ids.index("3")].as_py() is None
    assert doc[ids.index("2")].as_py()["value"], "a value's bytes"


def test_a_table_spark_enabled_variant_on_takes_a_new_variant_column(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    first = land(tmp_path / "landing", "f1", [{"topic": "ev", "message_id": "1", "payload": {"sym": "A"}}])
    ingest(lake, first)
    table = lake / "bronze" / "ev"
    second = land(tmp_path / "landing", "f2", [
        {"topic": "ev", "message_id": "2", "payload": {"sym": "B", "doc": {"a": [1, {"b": None}]}}}])
    refused = ingest(lake, second, "--column-type", "ev:/doc=variant", ok=(2,))
    assert "delta.feature.variantType" in refused.stdout + refused.stderr
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.feature.variantType' = 'supported')")
    ingest(lake, second, "--column-type", "ev:/doc=variant")
    rows = {r["_id"]: r["j"] for r in spark.sql(
        f"SELECT _id, to_json(doc) AS j FROM delta.`{table}`").collect()}
    assert rows["1"] is None
    assert json.loads(rows["2"]) == {"a": [1, {"b": None}]}


def test_duckdb_reads_a_variant_column_bronze_wrote(tmp_path: Path) -> None:
    """DuckDB's own Delta reader (`delta_scan`, the extension scripts/test installs)."""
    import subprocess
    import sys

    from conftest import REPO

    table = _load(tmp_path)
    script = (
        "import glob, json, os, sys, duckdb, duckdb_extension_delta\n"
        "folder = os.path.dirname(duckdb_extension_delta.__file__)\n"
        "ext = glob.glob(os.path.join(folder, 'extensions', '*', 'delta.duckdb_extension'))[0]\n"
        "con = duckdb.connect(config={'allow_unsigned_extensions': 'true'})\n"
        "con.execute(f\"LOAD '{ext}'\")\n"
        "rows = con.execute(\"SELECT _id, typeof(doc), doc.legs[3].k::VARCHAR, doc.price::VARCHAR,"
        " doc.qty::VARCHAR FROM delta_scan(?) ORDER BY _id\", [sys.argv[1]]).fetchall()\n"
        "print(json.dumps(rows))\n"
    )
    delta = os.environ.get("BRONZE_DUCKDB_DELTA", str(REPO / ".emulators" / "duckdb-delta"))
    if not Path(delta, "duckdb_extension_delta").is_dir():
        pytest.fail(f"DuckDB's Delta reader is not installed in {delta}: run scripts/test, or set BRONZE_DUCKDB_DELTA")
    env = {**os.environ, "PYTHONPATH": delta}
    done = subprocess.run([sys.executable, "-c", script, str(table)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    rows = {r[0]: r[1:] for r in json.loads(done.stdout)}
    assert rows["1"][0] == "VARIANT"
    assert rows["1"][1] == "é ✓"
    assert rows["4"][2:] == ["1.10", "123456789012345678901234567890"]


def test_the_delta_kernel_for_java_does_not_read_variant_yet(tmp_path: Path) -> None:
    """README names it: the Kernel for Java 4.4 refuses the type, naming it."""
    from conftest import kernel_read

    result = kernel_read([(_load(tmp_path), None)])[0]
    assert "variant is not supported" in result.get("error", ""), result
