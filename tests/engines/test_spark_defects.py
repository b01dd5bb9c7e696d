"""What Spark with Delta shows on bronze's tables, one test per defect it found: history,
streams and the change feed after OPTIMIZE, data skipping, INT96, VACUUM retention,
properties, blind appends."""

from __future__ import annotations

import datetime
import json
import os
import time
from pathlib import Path

from conftest import (
    bronze,
    canon,
    commit_infos,
    ingest,
    land,
    optimize_keeps_rows,
    rows_deltalake,
    rows_spark,
)


def topic_lines(topic: str, batch: str, payloads: list[dict]) -> list[dict]:
    return [
        {"topic": topic, "message_id": f"{batch}-{i}", "payload": p} for i, p in enumerate(payloads)
    ]


def test_history_stream_and_change_feed_read_past_a_bronze_optimize(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    ingest(lake, land(landing, "b1", topic_lines("t", "b1", [{"x": 1}])))
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    cdf_from = max(commit_infos(t)) + 1
    for b in ("b2", "b3"):
        ingest(lake, land(landing, b, topic_lines("t", b, [{"x": 2}, {"x": 3}])))
    bronze("optimize", "t", "--catalog", str(lake))
    infos = commit_infos(t)
    assert infos[max(infos)]["operation"] == "OPTIMIZE"

    history = spark.sql(f"DESCRIBE HISTORY delta.`{t}`").collect()
    assert [r["operation"] for r in history][0] == "OPTIMIZE"
    assert history[0]["operationMetrics"]["numAddedBytes"].isdigit()

    detail = spark.sql(f"DESCRIBE DETAIL delta.`{t}`").collect()[0]
    assert detail["numFiles"] == 1

    stream = (
        spark.readStream.format("delta")
        .option("startingVersion", 0)
        .load(str(t))
        .writeStream.format("memory")
        .queryName("bronze_t_stream")
        .start()
    )
    try:
        stream.processAllAvailable()
        streamed = sorted(r["_id"] for r in spark.table("bronze_t_stream").collect())
    finally:
        stream.stop()
    assert streamed == sorted(["b1-0", "b2-0", "b2-1", "b3-0", "b3-1"])

    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", cdf_from)
        .load(str(t))
        .collect()
    )
    inserted = sorted(r["_id"] for r in changes if r["_change_type"] == "insert")
    assert inserted == ["b2-0", "b2-1", "b3-0", "b3-1"]


def test_spark_skipping_finds_decimal_timestamp_and_string_values(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    long_text = "zoé " + "x" * 60
    payloads = [
        {"amt": "0.123456789012345678", "at": "2026-03-01T10:00:00.123456Z", "s": long_text + "b"},
        {"amt": "0.123456789012345679", "at": "2026-03-01T10:00:00.123457Z", "s": long_text + "a"},
    ]
    ingest(
        lake,
        land(landing, "b1", topic_lines("t", "b1", payloads)),
        "--column-type",
        "/amt=decimal(38,18)",
        "--column-type",
        "/at=timestamp",
    )
    t = lake / "bronze" / "t"
    queries = {
        "amt = 0.123456789012345678": ["b1-0"],
        "amt = 0.123456789012345679": ["b1-1"],
        "amt >= 0.123456789012345679": ["b1-1"],
        "amt <= 0.123456789012345678": ["b1-0"],
        "at = TIMESTAMP'2026-03-01 10:00:00.123457'": ["b1-1"],
        "at <= TIMESTAMP'2026-03-01 10:00:00.123456'": ["b1-0"],
        f"s = '{long_text}b'": ["b1-0"],
        f"s > '{long_text}a'": ["b1-0"],
    }
    for skipping in ("true", "false"):
        spark.conf.set("spark.databricks.delta.stats.skipping", skipping)
        try:
            for where, expected in queries.items():
                got = [r["_id"] for r in rows_spark(spark, t, where=where)]
                assert got == expected, f"{where} (skipping {skipping}): {got}"
        finally:
            spark.conf.unset("spark.databricks.delta.stats.skipping")


def test_int96_timestamps_spark_wrote_keep_their_values_through_bronze_optimize(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    t = lake / "bronze" / "scd"
    spark.sql(f"CREATE TABLE delta.`{t}` (id INT, valid_to TIMESTAMP) USING delta")
    # Spark's default timestamp type in Parquet is INT96.
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "INT96"
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, TIMESTAMP'9999-12-31 23:59:59')")
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (2, TIMESTAMP'2999-01-01 00:00:00')")
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (3, TIMESTAMP'1600-06-01 12:00:00.000001')")
    after = optimize_keeps_rows(spark, lake, "scd")
    assert [r["valid_to"] for r in after][:2] == [
        canon(datetime.datetime(9999, 12, 31, 23, 59, 59)),
        canon(datetime.datetime(2999, 1, 1)),
    ]


def test_vacuum_keeps_what_the_tables_own_retention_keeps(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    batch = land(landing, "b1", topic_lines("t", "b1", [{"x": 1}]))
    ingest(lake, batch)
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 30 days')")
    old_version = max(commit_infos(t))
    ingest(lake, batch)  # the rerun removes the first file
    # Ten days pass: the remove and the removed file are backdated by ten days.
    ten_days_ago = time.time() - 10 * 86400
    last = t / "_delta_log" / f"{max(commit_infos(t)):020d}.json"
    actions = [json.loads(line) for line in last.read_text().splitlines()]
    removed = [a["remove"]["path"] for a in actions if "remove" in a]
    assert removed
    for a in actions:
        if "remove" in a:
            a["remove"]["deletionTimestamp"] = int(ten_days_ago * 1000)
    last.write_text("".join(json.dumps(a) + "\n" for a in actions))
    for p in removed:
        os.utime(t / p, (ten_days_ago, ten_days_ago))

    spark_dry = spark.sql(f"VACUUM delta.`{t}` DRY RUN").collect()
    assert spark_dry == []
    out = bronze("vacuum", "t", "--catalog", str(lake)).stdout
    assert all((t / p).exists() for p in removed), out
    assert rows_spark(spark, t, version=old_version) == rows_deltalake(t, version=old_version)
    # Shorter than the table's retention: refused by name, unless forced.
    refused = bronze("vacuum", "t", "--retain", "200h", "--catalog", str(lake), ok=(2,))
    assert "delta.deletedFileRetentionDuration" in refused.stderr + refused.stdout


def test_a_table_spark_created_keeps_its_properties(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    theirs = lake / "bronze" / "theirs"
    spark.sql(f"CREATE TABLE delta.`{theirs}` (x BIGINT) USING delta")
    props = lambda p: {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{p}`").collect()}
    before = props(theirs)
    lines = topic_lines("theirs", "b1", [{"x": 1}]) + topic_lines("ours", "b1-ours", [{"x": 2}])
    ingest(lake, land(landing, "b1", lines))
    assert props(theirs) == before
    assert [r["x"] for r in spark.read.format("delta").load(str(theirs)).collect()] == [1]
    ours = props(lake / "bronze" / "ours")
    assert ours["delta.autoOptimize.autoCompact"] == "true"


def test_appends_are_blind_and_replaces_are_not(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    for b in ("b1", "b2"):
        ingest(lake, land(landing, b, topic_lines("t", b, [{"x": 1}])))
    ingest(lake, land(landing, "b1", topic_lines("t", "b1", [{"x": 5}])))  # a rerun
    history = {r["version"]: r for r in spark.sql(f"DESCRIBE HISTORY delta.`{t}`").collect()}
    blind = {v: bool(r["isBlindAppend"]) for v, r in history.items()}
    assert blind == {0: True, 1: True, 2: False}, blind
