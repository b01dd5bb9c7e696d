"""The rest of the table features Spark turns on in a bronze table's life (or on a table
Spark created): each case has Spark turn it on, bronze load a new batch, rerun an old one
and optimize, then Spark read the table and check the feature's own invariant."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import bronze, commit_infos, ingest, kernel_create, kernel_read, rows_deltalake, rows_kernel, rows_spark
from test_spark_changes import batch, per_batch


def loaded(lake: Path, landing: Path, topic: str = "t") -> tuple[Path, Path]:
    """Table `topic` after batches b1 and b2 (two rows each); b1's folder."""
    b1 = batch(landing, "b1", topic, [{"x": 1, "s": "a"}, {"x": 2, "s": "b"}])
    ingest(lake, b1)
    ingest(lake, batch(landing, "b2", topic, [{"x": 3, "s": "c"}, {"x": 4, "s": "d"}]))
    return lake / "bronze" / topic, b1


def new_batch_rerun_optimize(lake: Path, landing: Path, b1: Path, topic: str = "t") -> None:
    ingest(lake, batch(landing, "b3", topic, [{"x": 5, "s": "e"}]))
    ingest(lake, b1)
    bronze("optimize", topic, "--catalog", str(lake))


def same_everywhere(spark, t: Path) -> None:
    assert rows_spark(spark, t) == rows_kernel(kernel_read([(t, None)])[0])


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_row_tracking_keeps_row_ids_through_optimize_and_reruns(spark, tmp_path: Path, mapping: str) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, b1 = loaded(lake, landing)
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    if mapping != "none":
        spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.columnMapping.mode' = '{mapping}')")

    def ids() -> dict[str, int]:
        df = spark.read.format("delta").load(str(t)).select("_id", "_metadata.row_id")
        return {r["_id"]: r["row_id"] for r in df.collect()}

    # One file holding b1 and b2, their ids taken from each file's base id and the row's
    # position: the rerun of b1 then copies b2's rows out of it.
    first = ids()
    bronze("optimize", "t", "--catalog", str(lake))
    assert ids() == first
    if mapping == "none":
        # A deletion vector on that file: the copy's positions count the deleted row.
        spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        spark.sql(f"DELETE FROM delta.`{t}` WHERE _id = 'b1-0'")
    before = ids()
    new_batch_rerun_optimize(lake, landing, b1)
    after = ids()
    assert len(set(after.values())) == len(after), after
    # b2's rows were only copied (rerun of b1, OPTIMIZE): they keep their ids; b1's rows
    # are new rows of the rerun.
    kept = [k for k in before if k.startswith("b2")]
    assert kept and {k: after[k] for k in kept} == {k: before[k] for k in kept}
    assert per_batch(spark, t) == {"b1": 2, "b2": len(kept), "b3": 1}
    # The copies say they kept the ids (Spark trusts a commit's row ids only then).
    tags = [i.get("tags", {}) for i in commit_infos(t).values() if i["operation"] == "OPTIMIZE"]
    assert tags and all(tag.get("delta.rowTracking.preserved") == "true" for tag in tags), tags
    same_everywhere(spark, t)


def test_change_data_feed_shows_a_batch_and_a_rerun(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, b1 = loaded(lake, landing)
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    start = spark.sql(f"DESCRIBE HISTORY delta.`{t}`").agg({"version": "max"}).collect()[0][0] + 1
    new_batch_rerun_optimize(lake, landing, b1)
    changes = spark.sql(f"SELECT _id, _change_type, _commit_version FROM table_changes_by_path('{t}', {start})")
    seen = sorted((r["_id"], r["_change_type"]) for r in changes.collect())
    assert seen == [
        ("b1-0", "delete"), ("b1-0", "insert"),
        ("b1-1", "delete"), ("b1-1", "insert"),
        ("b3-0", "insert"),
    ], seen
    same_everywhere(spark, t)


def test_v2_checkpoints_take_batches_and_bronzes_checkpoints(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, b1 = loaded(lake, landing)
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')")
    spark.sql(f"OPTIMIZE delta.`{t}`")
    new_batch_rerun_optimize(lake, landing, b1)
    bronze("maintain", "--catalog", str(lake))
    spark.sql(f"INSERT INTO delta.`{t}` (_id, _batch_id, _topic, _source_file, _line, _loaded_at, x) "
              "SELECT 'spark-1', 'spark', 't', 'f', 1, current_timestamp(), 9")
    assert per_batch(spark, t) == {"b1": 2, "b2": 2, "b3": 1, "spark": 1}
    assert rows_spark(spark, t) == rows_deltalake(t)
    same_everywhere(spark, t)


def test_append_only_takes_new_batches_and_refuses_a_rerun_by_name(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, b1 = loaded(lake, landing)
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    ingest(lake, batch(landing, "b3", "t", [{"x": 5, "s": "e"}]))
    refused = ingest(lake, b1, ok=(1, 2))
    assert "delta.appendOnly" in refused.stdout + refused.stderr
    assert per_batch(spark, t) == {"b1": 2, "b2": 2, "b3": 1}


def test_timestamp_ntz_and_variant_columns_spark_added_take_batches_and_keep_sparks_values(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, b1 = loaded(lake, landing)
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
    spark.sql(f"ALTER TABLE delta.`{t}` ADD COLUMNS (seen TIMESTAMP_NTZ, doc VARIANT)")
    spark.sql(f"UPDATE delta.`{t}` SET seen = TIMESTAMP_NTZ'2026-01-02 03:04:05', doc = parse_json('{{\"a\":1}}') "
              "WHERE _id = 'b2-0'")
    ingest(lake, batch(landing, "b3", "t", [{"x": 5, "seen": "2026-05-06T07:08:09"}, {"x": 6, "seen": "2026-05-06T07:08:09Z"}]))
    ingest(lake, b1)
    bronze("optimize", "t", "--catalog", str(lake))
    rows = {
        r["_id"]: (str(r["seen"]), r["doc"])
        for r in spark.sql(f"SELECT _id, seen, to_json(doc) AS doc FROM delta.`{t}`").collect()
    }
    # Spark's values survive bronze's rewrites; a time without a zone fills the column, one
    # with a zone (which the column cannot hold) is rescued whole.
    assert rows["b2-0"] == ("2026-01-02 03:04:05", '{"a":1}')
    assert rows["b3-0"] == ("2026-05-06 07:08:09", None)
    assert rows["b3-1"] == ("None", None)
    rescued = spark.sql(f"SELECT _rescued_data FROM delta.`{t}` WHERE _id = 'b3-1'").collect()[0][0]
    assert rescued == '{"/seen":"2026-05-06T07:08:09Z"}'
    assert per_batch(spark, t) == {"b1": 2, "b2": 2, "b3": 2}


def test_liquid_clustering_spark_turned_on_clusters_bronzes_files(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, b1 = loaded(lake, landing)
    spark.sql(f"ALTER TABLE delta.`{t}` CLUSTER BY (s)")
    new_batch_rerun_optimize(lake, landing, b1)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{t}`").collect()[0]
    assert detail["clusteringColumns"] == ["s"]
    metrics = spark.sql(f"OPTIMIZE delta.`{t}`").collect()[0]["metrics"]
    assert metrics["clusteringStats"] is not None
    assert per_batch(spark, t) == {"b1": 2, "b2": 2, "b3": 1}
    same_everywhere(spark, t)


def test_generated_and_identity_columns_of_a_spark_table_are_refused_by_name_before_any_write(
    spark, tmp_path: Path
) -> None:
    """Only a CREATE TABLE gives a table these (no ALTER adds them), so no bronze table
    gets them; bronze computes neither a generation expression nor identity values."""
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    lineage = (
        "_id STRING NOT NULL, _batch_id STRING, _landing_path STRING, _topic STRING, "
        "_source_file STRING, _line BIGINT, _loaded_at TIMESTAMP, x BIGINT"
    )
    for topic, column, feature in [
        ("g", "x2 BIGINT GENERATED ALWAYS AS (x * 2)", "a generated column"),
        ("i", "n BIGINT GENERATED ALWAYS AS IDENTITY", "an identity column"),
    ]:
        t = lake / "bronze" / topic
        spark.sql(f"CREATE TABLE delta.`{t}` ({lineage}, {column}) USING delta")
        before = sorted(p.name for p in (t / "_delta_log").iterdir())
        refused = ingest(lake, batch(landing, f"b-{topic}", topic, [{"x": 1}]), ok=(2,))
        said = refused.stdout + refused.stderr
        assert f"`{topic}` has {feature}" in said and "no table of the batch was written" in said, said
        assert sorted(p.name for p in (t / "_delta_log").iterdir()) == before


def test_a_table_the_kernel_created_takes_batches_reruns_and_optimize(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    kernel_create(
        t,
        "_id string!, _batch_id string!, _landing_path string, _topic string!, _source_file string!, "
        "_line long!, _loaded_at timestamp!, x long, s string",
    )
    b1 = batch(landing, "b1", "t", [{"x": 1, "s": "a"}, {"x": 2, "s": "b"}])
    ingest(lake, b1)
    new_batch_rerun_optimize(lake, landing, b1)
    rows = sorted((r["_id"], r["x"], r["s"]) for r in spark.read.format("delta").load(str(t)).collect())
    assert rows == [("b1-0", 1, "a"), ("b1-1", 2, "b"), ("b3-0", 5, "e")]
    assert rows_spark(spark, t) == rows_deltalake(t)
    same_everywhere(spark, t)


def test_files_in_sparks_legacy_calendar_copy_exactly_or_are_refused_by_name(spark, tmp_path: Path) -> None:
    """Spark 2 wrote dates and INT96 timestamps in the hybrid Julian calendar (Spark 3+
    still does under `…RebaseModeInWrite = LEGACY`) and marks such files. Values after
    1582-10-15 (dates) and 1900-01-01 (timestamps) read the same in both calendars."""
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    columns = (
        "_id STRING NOT NULL, _batch_id STRING, _landing_path STRING, _topic STRING, "
        "_source_file STRING, _line BIGINT, _loaded_at TIMESTAMP, valid_to TIMESTAMP"
    )
    row = "'{id}', 'spark', NULL, '{t}', 'f', 1, current_timestamp(), TIMESTAMP'{ts}'"
    keys = ["spark.sql.parquet.int96RebaseModeInWrite", "spark.sql.parquet.outputTimestampType"]
    saved = {k: spark.conf.get(k) for k in keys}
    spark.conf.set(keys[0], "LEGACY")
    spark.conf.set(keys[1], "INT96")
    try:
        for topic, ts in [("modern", "2999-01-01 00:00:00"), ("ancient", "1500-03-01 00:00:00")]:
            t = lake / "bronze" / topic
            spark.sql(f"CREATE TABLE delta.`{t}` ({columns}) USING delta")
            spark.sql(f"INSERT INTO delta.`{t}` VALUES ({row.format(id='s1', t=topic, ts=ts)})")
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)
    for topic in ("modern", "ancient"):
        ingest(lake, batch(landing, f"b-{topic}", topic, [{"valid_to": "2026-01-01T00:00:00Z"}]))
    modern = lake / "bronze" / "modern"
    before = rows_spark(spark, modern)
    bronze("optimize", "modern", "--catalog", str(lake))
    assert commit_infos(modern)[max(commit_infos(modern))]["operation"] == "OPTIMIZE"
    assert rows_spark(spark, modern) == before
    ancient = lake / "bronze" / "ancient"
    before = rows_spark(spark, ancient)
    refused = bronze("optimize", "ancient", "--catalog", str(lake), ok=(1, 2))
    said = refused.stdout + refused.stderr
    assert "legacy hybrid calendar" in said and ".parquet" in said and "`valid_to`" in said, said
    assert rows_spark(spark, ancient) == before


def test_iceberg_compat_is_refused_by_name_before_any_write(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t, _ = loaded(lake, landing)
    spark.sql(
        f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.enableIcebergCompatV2' = 'true')"
    )
    before = sorted(p.name for p in (t / "_delta_log").iterdir())
    refused = ingest(lake, batch(landing, "b3", "t", [{"x": 5}]), ok=(2,))
    said = refused.stdout + refused.stderr
    assert "icebergCompatV2" in said and "no table of the batch was written" in said, said
    assert sorted(p.name for p in (t / "_delta_log").iterdir()) == before


def test_clustering_columns_bronzes_rows_lack_have_statistics_in_its_files(spark, tmp_path: Path) -> None:
    """A table Spark clusters by a nested column and by one bronze's payloads never carry:
    every file bronze adds says they are null in all its rows (the protocol asks
    statistics of clustering columns in every file), so skipping and clustering work."""
    import json

    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    spark.sql(
        f"CREATE TABLE delta.`{t}` (_id STRING NOT NULL, _batch_id STRING, _landing_path STRING, _topic STRING, "
        "_source_file STRING, _line BIGINT, _loaded_at TIMESTAMP, x BIGINT, s STRUCT<k: STRING>, region STRING) "
        "USING delta CLUSTER BY (s.k, region)"
    )
    spark.sql(
        f"INSERT INTO delta.`{t}` VALUES ('z', 'spark', NULL, 't', 'f', 1, current_timestamp(), 1, "
        "named_struct('k', 'q'), 'eu')"
    )
    b1 = batch(landing, "b1", "t", [{"x": 1}, {"x": 2}])
    ingest(lake, b1)
    ingest(lake, b1)
    bronze("optimize", "t", "--catalog", str(lake))
    ours = [
        json.loads(json.loads(line)["add"]["stats"])
        for p in sorted((t / "_delta_log").glob("*.json"))
        for line in p.read_text().splitlines()
        if "add" in json.loads(line) and "delta-rs" in p.read_text()
    ]
    assert ours, "bronze added files"
    for stats in ours:
        only_b1 = stats["minValues"].get("_batch_id") == stats["maxValues"].get("_batch_id") == "b1"
        for nulls in (stats["nullCount"]["s"]["k"], stats["nullCount"]["region"]):
            assert nulls == stats["numRecords"] if only_b1 else nulls <= stats["numRecords"], stats
    rows = spark.sql(f"SELECT _id FROM delta.`{t}` WHERE s.k = 'q' AND region = 'eu'").collect()
    assert [r["_id"] for r in rows] == ["z"]
    spark.sql(f"OPTIMIZE delta.`{t}`")
    assert per_batch(spark, t) == {"b1": 2, "spark": 1}
