"""`bronze.ray.ingest_pending` on a local Ray instance (2 CPUs): 2 entities x 4 batches,
a worker killed mid-batch and its task retried by Ray, every table's rows exact."""

from __future__ import annotations

from pathlib import Path

import pytest

import bronze
from conftest import FIRST, expected, kill_once, make_landing, table_rows

ray = pytest.importorskip("ray")


def test_a_backlog_over_ray_tasks_loads_each_batch_once(tmp_path: Path) -> None:
    import bronze.ray

    landing, catalog = tmp_path / "landing", tmp_path / "lakehouse"
    made = make_landing(landing / "market", ["trades", "quotes"], 4)
    marker = tmp_path / "killed"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outcomes = bronze.ray.ingest_pending(landing, catalog, progress=kill_once(marker))
    finally:
        ray.shutdown()
    assert marker.exists(), "no worker was killed"
    assert sorted((o.batch.landing_path, o.batch.batch_id) for o in outcomes) == sorted(
        (f"market/{e}", b) for e, b in made
    )
    assert {o.status for o in outcomes} <= {"loaded", "already_loaded"}
    assert table_rows(catalog) == {t: len(made) * n for t, n in expected(FIRST).items()}
    assert bronze.pending(landing, catalog) == []
