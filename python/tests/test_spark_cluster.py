"""`bronze.spark.ingest_pending` on a standalone cluster in one machine (Spark's
`local-cluster` master: a standalone master and two workers, each executor its own JVM
and Python workers), with a batch busy in another process meanwhile."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

import bronze
from conftest import FIRST, expected, make_landing, table_rows

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def cluster():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local-cluster[2,1,1024]")  # 2 workers, 1 core each
        .appName("bronze-tests-cluster")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def test_a_batch_held_elsewhere_is_a_busy_row_and_loads_next_time(cluster, tmp_path: Path) -> None:
    from bronze.spark import ingest_pending

    landing, catalog = tmp_path / "landing", tmp_path / "lakehouse"
    made = make_landing(landing / "market", ["trades", "quotes"], 3)
    held = landing / "market" / "quotes" / "batch_id=2026-05-02_001"

    # This (driver) process loads one batch and pauses inside it, holding its lease.
    inside, release = threading.Event(), threading.Event()

    def pause(stage: str, done: int, total: int) -> None:
        if stage == "parse" and not inside.is_set():
            inside.set()
            release.wait(120)

    holder = threading.Thread(target=lambda: bronze.ingest(held, catalog, progress=pause))
    holder.start()
    try:
        assert inside.wait(60)
        rows = {(r.landing_path, r.batch_id): r for r in ingest_pending(cluster, landing, catalog).collect()}
    finally:
        release.set()
        holder.join(120)

    status = {k: r.status for k, r in rows.items()}
    assert status[("market/quotes", "2026-05-02_001")] == "busy"
    assert "lease" in rows[("market/quotes", "2026-05-02_001")].reason
    # The entity's later batch waits; the other entity is not held back.
    assert status[("market/quotes", "2026-05-03_001")] == "waiting"
    assert status[("market/quotes", "2026-05-01_001")] == "loaded"
    assert all(status[("market/trades", f"2026-05-0{d}_001")] == "loaded" for d in (1, 2, 3))
    assert {r.task for r in rows.values()} == {0, 1}  # one task per entity

    # Next time: the held batch was loaded by its holder; the waiting one loads now.
    again = {r.batch_id: r.status for r in ingest_pending(cluster, landing, catalog).collect()}
    assert again == {"2026-05-03_001": "loaded"}
    assert table_rows(catalog) == {t: len(made) * n for t, n in expected(FIRST).items()}
