"""Spark turns a feature on (on a bronze table, or on a table Spark created); bronze loads
a new batch and reruns an old one; Spark reads the table and checks its own invariants."""

from __future__ import annotations

from pathlib import Path

from conftest import (
    bronze,
    commit_infos,
    ingest,
    kernel_read,
    land,
    optimize_keeps_rows,
    rows_deltalake,
    rows_kernel,
    rows_spark,
)


def batch(landing: Path, batch_id: str, topic: str, payloads: list[dict]) -> Path:
    lines = [{"topic": topic, "message_id": f"{batch_id}-{i}", "payload": p} for i, p in enumerate(payloads)]
    return land(landing, batch_id, lines)


def per_batch(spark, table: Path, column: str = "_batch_id") -> dict[str, int]:
    rows = spark.read.format("delta").load(str(table)).groupBy(column).count().collect()
    return {r[column]: r["count"] for r in rows}


def test_in_commit_timestamps_take_batches_and_reruns(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    b1 = batch(landing, "b1", "t", [{"x": 1}, {"x": 2}])
    ingest(lake, b1)
    ingest(lake, batch(landing, "b2", "t", [{"x": 3}]))
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')")
    enabled = max(commit_infos(t))
    ingest(lake, batch(landing, "b3", "t", [{"x": 4}]))
    after_b3 = max(commit_infos(t))
    ingest(lake, b1)  # a rerun
    bronze("optimize", "t", "--catalog", str(lake))
    infos = commit_infos(t)
    stamped = [infos[v].get("inCommitTimestamp") for v in sorted(infos) if v >= enabled]
    assert all(isinstance(s, int) for s in stamped), stamped
    assert stamped == sorted(stamped) and len(set(stamped)) == len(stamped), stamped
    assert all(infos[v]["timestamp"] == infos[v]["inCommitTimestamp"] for v in infos if v > enabled)
    # Spark reads the stamps: its history and time travel by timestamp.
    history = {r["version"]: r["timestamp"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{t}`").collect()}
    assert sorted(history) == sorted(infos)
    at = history[after_b3].strftime("%Y-%m-%d %H:%M:%S.%f")
    old = spark.read.format("delta").option("timestampAsOf", at).load(str(t))
    assert sorted(r["x"] for r in old.collect()) == [1, 2, 3, 4]
    assert per_batch(spark, t) == {"b1": 2, "b2": 1, "b3": 1}
    assert rows_spark(spark, t) == rows_deltalake(t)


def test_type_widening_takes_batches_reruns_and_optimize(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    # A bronze table whose decimal Spark widens.
    ours = lake / "bronze" / "ours"
    hint = ["--column-type", "/amt=decimal(10,2)"]
    b1 = batch(landing, "b1", "ours", [{"amt": "12345678.91"}, {"amt": "-0.01"}])
    ingest(lake, b1, *hint)
    spark.sql(f"ALTER TABLE delta.`{ours}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"ALTER TABLE delta.`{ours}` ALTER COLUMN amt TYPE DECIMAL(14,2)")
    wide = ["--column-type", "/amt=decimal(14,2)"]
    ingest(lake, batch(landing, "b2", "ours", [{"amt": "123456789012.34"}]), *wide)
    ingest(lake, b1, *wide)  # a rerun
    amounts = sorted(str(r["amt"]) for r in spark.read.format("delta").load(str(ours)).collect())
    assert amounts == sorted(["12345678.91", "-0.01", "123456789012.34"])
    assert per_batch(spark, ours) == {"b1": 2, "b2": 1}

    # A table Spark created with an INT column it widens to BIGINT: bronze's batches and
    # its OPTIMIZE over Spark's INT files.
    theirs = lake / "bronze" / "theirs"
    spark.sql(f"CREATE TABLE delta.`{theirs}` (n INT) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"INSERT INTO delta.`{theirs}` VALUES (1)")
    spark.sql(f"INSERT INTO delta.`{theirs}` VALUES (2)")
    spark.sql(f"ALTER TABLE delta.`{theirs}` ALTER COLUMN n TYPE BIGINT")
    ingest(lake, batch(landing, "b3", "theirs", [{"n": 5_000_000_000}]))
    bronze("optimize", "theirs", "--catalog", str(lake))
    assert sorted(r["n"] for r in spark.read.format("delta").load(str(theirs)).collect()) == [1, 2, 5_000_000_000]
    # Python deltalake (1.6) does not read type widening yet: the Kernel is the other reader.
    for t in (ours, theirs):
        assert rows_spark(spark, t) == rows_kernel(kernel_read([(t, None)])[0])


def test_an_id_mapped_table_with_a_map_column_takes_batches_and_optimize(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "m"
    spark.sql(
        f"CREATE TABLE delta.`{t}` (id INT, m MAP<STRING, INT>, s STRUCT<a: INT, b: STRING>) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'id')"
    )
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, map('a', 1), named_struct('a', 1, 'b', 'x'))")
    spark.sql(f"INSERT INTO delta.`{t}` VALUES (2, map('b', 2, 'c', 3), named_struct('a', 2, 'b', 'y'))")
    spark.sql(f"ALTER TABLE delta.`{t}` RENAME COLUMN id TO ident")
    optimize_keeps_rows(spark, lake, "m")
    ingest(lake, batch(landing, "b1", "m", [{"ident": 3}]))
    ingest(lake, batch(landing, "b1", "m", [{"ident": 4}]))  # a rerun
    got = sorted((r["ident"], r["m"]) for r in spark.read.format("delta").load(str(t)).collect())
    assert got == [(1, {"a": 1}), (2, {"b": 2, "c": 3}), (4, None)]


def test_column_mapping_renames_and_drops_take_batches_and_a_renamed_lineage_column_is_refused(
    spark, tmp_path: Path
) -> None:
    # `name` mode turned on in a bronze table; `id` mode (which Spark sets only at create)
    # in a table Spark created with a bronze table's columns and rows.
    for mode in ("name", "id"):
        lake, landing = tmp_path / mode / "lake", tmp_path / mode / "landing"
        t = lake / "bronze" / "t"
        b1 = batch(landing, "b1", "t", [{"a": 1, "b": "x"}])
        if mode == "name":
            ingest(lake, b1)
            spark.sql(
                f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
                "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
            )
        else:
            scratch = tmp_path / mode / "scratch"
            ingest(scratch, b1)
            spark.sql(
                f"CREATE TABLE delta.`{t}` USING delta TBLPROPERTIES ('delta.columnMapping.mode' = 'id') "
                f"AS SELECT * FROM delta.`{scratch / 'bronze' / 't'}`"
            )
        spark.sql(f"ALTER TABLE delta.`{t}` RENAME COLUMN a TO a_renamed")
        spark.sql(f"ALTER TABLE delta.`{t}` DROP COLUMN b")
        ingest(lake, batch(landing, "b2", "t", [{"a": 2, "b": "y"}]))
        ingest(lake, b1)  # a rerun
        # A renamed payload column keeps taking its field (its `bronze.path`, which Spark's
        # CTAS keeps too); a dropped one comes back as a new column.
        got = spark.read.format("delta").load(str(t))
        rows = sorted((r["_batch_id"], r["a_renamed"], r["b"]) for r in got.collect())
        assert rows == [("b1", 1, "x"), ("b2", 2, "y")], (mode, rows)
        assert rows_spark(spark, t) == rows_deltalake(t)
        assert rows_spark(spark, t) == rows_kernel(kernel_read([(t, None)])[0])

    # One of bronze's own columns renamed (under bronze's physical names in `name` mode,
    # Spark's `col-<uuid>` ones in `id` mode) or dropped: the next batch is refused before
    # any write, naming it.
    for mode, change, named in [
        ("name", "RENAME COLUMN _line TO _line_renamed", "_line_renamed"),
        ("id", "RENAME COLUMN _line TO _line_renamed", "`_line` dropped or renamed"),
        ("id", "RENAME COLUMN _line_renamed TO _line", None),
        ("id", "DROP COLUMN _source_file", "`_source_file` dropped or renamed"),
    ]:
        t = tmp_path / mode / "lake" / "bronze" / "t"
        spark.sql(f"ALTER TABLE delta.`{t}` {change}")
        if named is None:
            continue
        before = max(commit_infos(t))
        landing = tmp_path / mode / "landing"
        refused = ingest(tmp_path / mode / "lake", batch(landing, "b3", "t", [{"a": 3}]), ok=(2,))
        said = refused.stdout + refused.stderr
        assert "`_line`" in said or "`_source_file`" in said, said
        assert named in said and "no table of the batch was written" in said, said
        assert max(commit_infos(t)) == before


def test_check_constraints_are_evaluated_on_bronzes_rows_and_others_refused_by_name(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    b1 = batch(landing, "b1", "t", [{"x": 1, "name": "ab"}])
    ingest(lake, b1)
    checks = {
        "positive": "x > 0",
        "lineage": "_batch_id IS NOT NULL AND _topic = 't'",
        "listed": "x IN (1, 2, 3, -1) OR x BETWEEN 10 AND 20",
        "named": "name LIKE 'a%' AND length(name) <= 5",
        "cast": "CAST(x AS STRING) <> '13'",
    }
    for name, check in checks.items():
        spark.sql(f"ALTER TABLE delta.`{t}` ADD CONSTRAINT {name} CHECK ({check})")
    ingest(lake, batch(landing, "b2", "t", [{"x": 2, "name": "abc"}, {"x": 15, "name": "a"}]))
    ingest(lake, b1)  # a rerun
    assert per_batch(spark, t) == {"b1": 1, "b2": 2}

    versions_before = max(commit_infos(t))
    for payloads, constraint in [
        ([{"x": -1, "name": "ab"}], "positive"),
        ([{"x": 5, "name": "ab"}], "listed"),
        ([{"x": 2}], "named"),  # no name: null, which fails a constraint as false does
        ([{"x": 13, "name": "a"}], "cast"),
    ]:
        # Each of these rows fails the one constraint named, and only it.
        failed = ingest(lake, batch(landing, "b3", "t", payloads), ok=(2,))
        said = failed.stdout + failed.stderr
        assert f"`{constraint}`" in said, said
        # Spark's own verdict on the same rows: the constraint is false or null.
        values = ", ".join(f"(CAST({p['x']} AS BIGINT), CAST({repr(p['name']) if 'name' in p else 'NULL'} AS STRING))" for p in payloads)
        verdict = spark.sql(
            f"SELECT coalesce({checks[constraint]}, false) AS ok "
            f"FROM (SELECT *, 'b3' AS _batch_id, 't' AS _topic FROM VALUES {values} AS v(x, name))"
        ).collect()
        assert not all(r["ok"] for r in verdict), (constraint, payloads)
    assert max(commit_infos(t)) == versions_before
    assert per_batch(spark, t) == {"b1": 1, "b2": 2}

    # An expression bronze does not evaluate: the batch is refused by its name.
    spark.sql(f"ALTER TABLE delta.`{t}` ADD CONSTRAINT odd CHECK (reverse(name) IS NOT NULL OR x > 0)")
    refused = ingest(lake, batch(landing, "b4", "t", [{"x": 3, "name": "ab"}]), ok=(2,))
    said = refused.stdout + refused.stderr
    assert "`odd`" in said and "reverse" in said, said


def test_deletion_vectors_spark_wrote_take_batches_and_reruns(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    ingest(lake, batch(landing, "b0", "t", [{"x": 0}]))
    spark.sql(f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(
        f"INSERT INTO delta.`{t}` SELECT _id || '-copy', 'spark', _landing_path, _topic, _source_file, _line, "
        f"_loaded_at, x FROM delta.`{t}`"
    )
    b1 = batch(landing, "b1", "t", [{"x": i} for i in range(4)])
    ingest(lake, b1)
    ingest(lake, batch(landing, "b2", "t", [{"x": i} for i in range(4)]))
    # b0, b1, b2 and Spark's row in one file: a rerun rewrites it row by row.
    bronze("optimize", "t", "--catalog", str(lake))
    spark.sql(f"DELETE FROM delta.`{t}` WHERE _id IN ('b1-0', 'b2-0')")
    spark.sql(f"UPDATE delta.`{t}` SET x = 100 WHERE _id IN ('b1-1', 'b2-1')")
    assert any("deletionVector" in a for a in _log_lines(t)), "Spark wrote deletion vectors"
    ingest(lake, batch(landing, "b3", "t", [{"x": 7}]))
    ingest(lake, b1)  # a rerun: its rows come back as loaded
    got = spark.read.format("delta").load(str(t)).collect()
    assert len({r["_id"] for r in got}) == len(got), sorted(r["_id"] for r in got)
    rows = {r["_id"]: r["x"] for r in got}
    assert rows == {
        "b0-0": 0, "b0-0-copy": 0,
        "b1-0": 0, "b1-1": 1, "b1-2": 2, "b1-3": 3,
        "b2-1": 100, "b2-2": 2, "b2-3": 3,
        "b3-0": 7,
    }, rows
    assert rows_spark(spark, t) == rows_deltalake(t)
    assert rows_spark(spark, t) == rows_kernel(kernel_read([(t, None)])[0])


def _log_lines(t: Path) -> list[str]:
    return [line for p in sorted((t / "_delta_log").glob("*.json")) for line in p.read_text().splitlines()]
