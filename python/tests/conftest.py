"""Shared helpers of the package's tests: the committed fixture batches, landing zones
built from them, and row counts read back with Python `deltalake` (not with bronze)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LANDING = REPO / "fixtures" / "landing"
EXPECTED = REPO / "fixtures" / "expected"
FIRST = LANDING / "market" / "events" / "batch_id=2026-04-05_001"
SECOND = LANDING / "market" / "events" / "batch_id=2026-04-06_001"


def expected(batch: Path) -> dict[str, int]:
    """Rows per table the fixture batch must produce (fixtures/expected)."""
    return json.loads((EXPECTED / f"{batch.name}.json").read_text())["tables"]


def table_rows(catalog: Path, schema: str = "bronze") -> dict[str, int]:
    """Rows per table of the catalog's schema, read with Python `deltalake`."""
    from deltalake import DeltaTable

    counts = {}
    for table in sorted((catalog / schema).iterdir()):
        if (table / "_delta_log").is_dir() and not table.name.startswith(("_tmp", "_bronze", "_run_control")):
            counts[table.name] = DeltaTable(str(table)).to_pyarrow_dataset().count_rows()
    return counts


def add(*counts: dict[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for table, n in c.items():
            total[table] = total.get(table, 0) + n
    return total


def make_landing(root: Path, entities: list[str], batches: int, source: Path = FIRST) -> list[tuple[str, str]]:
    """A landing zone `root/<entity>/batch_id=2026-05-DD_001` per entity (`source/name`),
    each batch a copy of a fixture batch; returns (landing path, batch id) pairs."""
    made = []
    for entity in entities:
        for day in range(1, batches + 1):
            batch_id = f"2026-05-{day:02d}_001"
            shutil.copytree(source, root / entity / f"batch_id={batch_id}")
            made.append((entity, batch_id))
    return made


def kill_once(marker: Path):
    """A progress callback that kills its Python worker (SIGKILL: nothing flushed, no
    cleanup) once, after a batch's third table write: the batch is half committed."""

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "write" and done == 3:
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)

    return progress


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return tmp_path / "lakehouse"
