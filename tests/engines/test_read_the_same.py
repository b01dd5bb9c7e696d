"""Every table of a lakehouse bronze loaded, optimized, Z-ordered, vacuumed, checkpointed
and reran into, read by Spark with Delta and by the Delta Kernel for Java at every
version: the rows Python deltalake reads, the types docs/types.md gives; history, detail
and a stream work on each table, and Spark's data skipping uses bronze's Z-order."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import (
    FIXTURE_BATCHES,
    bronze,
    canon,
    ingest,
    kernel_read,
    land,
    rows_deltalake,
    rows_kernel,
    rows_spark,
    tables,
    versions,
)

HINTS = [
    "--column-type", "/amount=decimal(18,2)",
    "--column-type", "/placed/at=timestamp",
    "--column-type", "/day=date",
    "--column-type", "/legs/*/at=timestamp",
]


def typed_lines(batch: str, extra: bool) -> list[dict]:
    lines = [
        {"topic": "order", "message_id": f"{batch}-1", "payload": {
            "amount": 12.5, "placed": {"at": "2026-01-15T12:00:00+02:00"}, "day": "2026-01-15",
            "legs": [{"at": "2026-01-15T05:30:00.123456-04:30", "venue": "XAMS"}], "note": "zoé ✓"}},
        {"topic": "order", "message_id": f"{batch}-2", "payload": {
            "amount": "-0.01", "placed": {"at": "1999-12-31T23:59:59Z"}, "day": "1999-12-31"}},
    ]
    if extra:
        # A new field: the schema evolves.
        lines.append({"topic": "order", "message_id": f"{batch}-3", "payload": {
            "amount": 1, "day": "2000-02-29", "channel": {"kind": "api", "retries": 2}}})
    return lines


def trade_lines(n: int) -> list[dict]:
    """`n` trades over 100 symbols, the symbols spread over the batch."""
    return [
        {"topic": "trade", "message_id": f"z-{i}", "payload": {
            "symbol": f"S{(i * 37) % 100:03d}", "px": round(10 + (i % 97) * 0.5, 2), "qty": i % 13}}
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("same")
    lake, landing = root / "lake", root / "landing"
    first, second = sorted(FIXTURE_BATCHES.iterdir())
    ingest(lake, first, ok=(1,))  # its corrupt lines: exit 1
    ingest(lake, land(landing, "t1", typed_lines("t1", False)), *HINTS)
    ingest(lake, second, ok=(0, 1))
    bronze("optimize", "--all", "--catalog", str(lake))
    ingest(lake, land(landing, "t2", typed_lines("t2", True)), *HINTS)
    ingest(lake, second, ok=(0, 1))  # a rerun
    ingest(lake, land(landing, "z1", trade_lines(5000)))
    bronze("vacuum", "--all", "--catalog", str(lake))
    ingest(lake, first, ok=(1,))  # a rerun
    bronze("optimize", "trade", "--zorder", "symbol", "--target-size", "4KB", "--catalog", str(lake))
    bronze("checkpoint", "--all", "--catalog", str(lake))
    return lake


def test_spark_and_the_kernel_read_every_table_at_every_version_as_deltalake_does(spark, lake: Path) -> None:
    requests = [(t, v) for t in tables(lake) for v in versions(t)]
    assert len(tables(lake)) >= 10 and len(requests) >= 40, requests
    kernel = kernel_read(requests)
    mismatches = []
    for (t, v), k in zip(requests, kernel):
        expected = rows_deltalake(t, v)
        if rows_spark(spark, t, v) != expected:
            mismatches.append(f"spark {t.name}@{v}")
        if rows_kernel(k) != expected:
            mismatches.append(f"kernel {t.name}@{v}")
    assert not mismatches, mismatches


def test_typed_columns_have_their_types_in_spark_and_the_kernel(spark, lake: Path) -> None:
    order = lake / "bronze" / "order"
    types = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(str(order)).schema.fields}
    assert (types["placed__at"], types["day"], types["amount"]) == ("timestamp", "date", "decimal(18,2)")
    kernel = {f["name"]: f["type"] for f in kernel_read([(order, None)])[0]["schema"]}
    assert (kernel["placed__at"], kernel["day"], kernel["amount"]) == ("timestamp", "date", "Decimal(18, 2)")
    rows = rows_spark(spark, order, where="_batch_id = 't1'")
    assert sorted((r["placed__at"], r["day"], r["amount"]) for r in rows) == sorted([
        (946684799000000, "1999-12-31", "-0.01"),
        (1768471200000000, "2026-01-15", "12.50"),
    ])


def test_history_detail_and_a_stream_work_on_every_table(spark, lake: Path) -> None:
    for t in tables(lake):
        history = spark.sql(f"DESCRIBE HISTORY delta.`{t}`").collect()
        assert [r["version"] for r in history] == sorted(versions(t), reverse=True), t.name
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{t}`").collect()[0]
        assert detail["format"] == "delta" and detail["numFiles"] >= 1, t.name
        name = f"stream_{t.name.strip('_')}"
        query = (
            spark.readStream.format("delta")
            .option("startingVersion", 0)
            # A rerun replaces rows: a stream of appends skips those commits, as Spark's
            # own streams over tables with updates do.
            .option("skipChangeCommits", "true")
            .load(str(t))
            .writeStream.format("memory")
            .queryName(name)
            .start()
        )
        try:
            query.processAllAvailable()
            streamed = spark.table(name).collect()
        finally:
            query.stop()
        now = spark.read.format("delta").load(str(t))
        if "_id" in now.columns:
            ids = {r["_id"] for r in now.select("_id").collect()}
            assert ids <= {r["_id"] for r in streamed}, t.name
        else:
            assert len(streamed) >= 1, t.name


def test_spark_skips_files_by_bronzes_z_order(spark, lake: Path) -> None:
    trade = lake / "bronze" / "trade"
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        total = spark.sql(f"DESCRIBE DETAIL delta.`{trade}`").collect()[0]["numFiles"]
        symbol = "S042"
        df = spark.read.format("delta").load(str(trade)).where(f"symbol = '{symbol}'")
        rows = df.collect()
        read = _files_read(df)
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    assert rows and all(r["symbol"] == symbol for r in rows)
    assert total >= 3 and 1 <= read < total, (read, total)
    assert canon(len(rows)) == len([r for r in rows_deltalake(trade) if r["symbol"] == symbol])


def _files_read(df) -> int:
    """The files Spark's scan of `df` (run) read: its scan's `numFiles` metric."""
    plan = df._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.size()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numFiles"):
            total += metrics.apply("numFiles").value()
    return total
