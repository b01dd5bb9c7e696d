"""`bronze` from Python: the fixture batches, reruns, results, errors, progress and the GIL."""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
import threading
import time
from pathlib import Path

import pytest

import bronze
from conftest import FIRST, LANDING, SECOND, add, expected, table_rows


def test_the_fixture_batches_load_with_the_expected_rows(catalog: Path) -> None:
    first = bronze.ingest(FIRST, catalog)
    assert first.rows == expected(FIRST)
    assert first.exit_code == 1  # corrupt lines kept in _corrupt_records
    assert first.corrupt_lines == 4 and len(first.corrupt) == 4
    assert first.invariant_ok, first.invariant
    second = bronze.ingest(str(SECOND), str(catalog))
    # A batch without corrupt lines still reports `_corrupt_records` (0 rows written).
    assert {t: n for t, n in second.rows.items() if n} == expected(SECOND)
    assert table_rows(catalog) == add(expected(FIRST), expected(SECOND))


def test_a_rerun_replaces_the_batch_rows(catalog: Path) -> None:
    bronze.ingest(FIRST, catalog)
    before = table_rows(catalog)
    again = bronze.ingest(FIRST, catalog)
    assert again.rows == expected(FIRST)
    assert table_rows(catalog) == before


def test_the_report_has_every_field_of_the_cli_json(catalog: Path) -> None:
    report = bronze.ingest(FIRST, catalog)
    fields = {f.name for f in dataclasses.fields(bronze.Report)}
    # Built strictly from the extension's JSON (an unknown or missing key raises), so the
    # dataclass and `--json` agree; spot-check nested records and values.
    assert {"tables", "run_control", "invariant", "invariant_ok", "stage_seconds", "elapsed"} <= fields
    assert isinstance(report.tables["trade"], bronze.TableOutcome)
    assert all(isinstance(r, bronze.RunControlRow) for r in report.run_control)
    # One row per table written, and one for the batch as a whole.
    assert {r.table for r in report.run_control} == set(expected(FIRST)) | {"(batch)"}
    assert report.batch == "market/events/batch_id=2026-04-05_001"
    assert report.elapsed > 0 and report.files_read == 20
    with pytest.raises(TypeError, match="unknown"):
        bronze.from_json(bronze.Folder, json.dumps({"path": "p", "landing_path": "a/b", "files": 1, "extra": 2}))


def test_errors_are_exceptions_of_their_kind(tmp_path: Path, catalog: Path) -> None:
    with pytest.raises(bronze.StorageError, match="nowhere"):
        bronze.ingest(tmp_path / "nowhere" / "batch_id=1", catalog)
    bad = tmp_path / "src" / "ent" / "batch_id=a b"
    bad.mkdir(parents=True)
    with pytest.raises(bronze.InvalidBatchId, match="a batch id is 1 to"):
        bronze.ingest(bad, catalog)
    empty = tmp_path / "src" / "ent" / "batch_id=empty"
    empty.mkdir(parents=True)
    with pytest.raises(bronze.NoDataFiles):
        bronze.ingest(empty, catalog)
    with pytest.raises(bronze.ConfigError, match="memory_budget"):
        bronze.ingest(FIRST, catalog, memory_budget="lots")
    with pytest.raises(bronze.ConfigError, match="unknown field"):
        bronze.ingest(FIRST, catalog, config={"no_such_setting": 1})
    with pytest.raises(bronze.ConfigError, match="unknown scheme|not supported|scheme"):
        bronze.ingest(FIRST, "ftp://example.com/lake")
    with pytest.raises(bronze.NoSuchTable):
        bronze.history("no_such_table", bronze.ingest(FIRST, catalog) and catalog)
    assert issubclass(bronze.BatchBusy, bronze.BronzeError)


def test_every_setting_of_bronze_toml_is_a_keyword_argument(catalog: Path) -> None:
    # A section as a dict, a file's key as a keyword; `config=`'s schema is not overridden.
    report = bronze.ingest(
        FIRST, catalog, config={"schema": "raw"}, envelope={"topic_field": "topic"}, flatten={"max_depth": 8}
    )
    assert report.tables["trade"].rows_written == expected(FIRST)["trade"]
    assert table_rows(catalog, "raw") == expected(FIRST)
    with pytest.raises(bronze.ConfigError, match="`flatten.max_depth`"):
        bronze.ingest(FIRST, catalog, flatten={"max_depth": "deep"})
    with pytest.raises(bronze.ConfigError, match="unknown field `no_such_setting`"):
        bronze.ingest(FIRST, catalog, no_such_setting=1)
    with pytest.raises(bronze.ConfigError, match=r"write e\.g\. http://pushgateway:9091"):
        bronze.ingest(FIRST, catalog, metrics_push="pushgateway:9091")


def test_a_held_lease_raises_batch_busy(catalog: Path) -> None:
    """A run paused inside its progress callback holds the batch's lease; a second run of
    the same batch from another thread meanwhile gets BatchBusy (the CLI's exit 3)."""
    inside, release = threading.Event(), threading.Event()

    def hold(stage: str, done: int, total: int) -> None:
        if stage == "parse" and not inside.is_set():
            inside.set()
            release.wait(60)

    first: dict[str, bronze.Report] = {}
    worker = threading.Thread(target=lambda: first.setdefault("r", bronze.ingest(FIRST, catalog, progress=hold)))
    worker.start()
    try:
        assert inside.wait(60)
        with pytest.raises(bronze.BatchBusy, match="lease"):
            bronze.ingest(FIRST, catalog)
    finally:
        release.set()
        worker.join(60)
    assert first["r"].rows == expected(FIRST)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_progress_is_reported_per_stage(catalog: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    bronze.ingest(FIRST, catalog, progress=lambda *p: seen.append(p))
    parse = [p for p in seen if p[0] == "parse"]
    write = [p for p in seen if p[0] == "write"]
    assert seen[0] == ("discover", 20, 20)
    assert sorted(d for _, d, _ in parse) == list(range(1, 21))
    # Called from several worker threads: the events arrive in any order.
    assert write and max(d for _, d, _ in write) == max(t for _, _, t in write)
    # A callback that raises does not stop the run (progress is advisory).
    def broken(*_: object) -> None:
        raise RuntimeError("display gone")

    assert bronze.ingest(FIRST, catalog, progress=broken).rows == expected(FIRST)


def test_progress_true_shows_tqdm_bars(catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bronze.ingest(FIRST, catalog, progress=True)
    err = capsys.readouterr().err
    assert "parsing files" in err and "writing tables" in err


def test_the_gil_is_released_while_a_batch_loads(tmp_path: Path, catalog: Path) -> None:
    """Another Python thread runs while the extension works: its ticks fall inside the
    native call. Holding the GIL through the call would leave none there (a thread
    holding it in native code never hands it over). Timed around the extension's own
    function, so the package's Python code around it (which does hand the GIL over every
    few milliseconds) is outside the window."""
    big = tmp_path / "src" / "big" / "batch_id=big"
    big.mkdir(parents=True)
    for copy in range(40):
        for f in FIRST.glob("*.jsonl"):
            shutil.copy(f, big / f"{copy:02d}-{f.name}")
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        settings = bronze._settings(catalog, threads=1)
        start = time.monotonic()
        bronze._bronze.ingest([str(big)], settings, None)
        end = time.monotonic()
    finally:
        done.set()
        ticker.join()
    assert end - start > 0.05, "the batch loaded too fast to tell"
    inside = [t for t in ticks if start + 0.01 < t < end - 0.01]
    assert len(inside) > 5, f"{len(inside)} ticks in a {end - start:.2f}s call"


def test_pending_status_and_the_backlog(tmp_path: Path, catalog: Path) -> None:
    landing = tmp_path / "landing"
    shutil.copytree(LANDING, landing)
    assert [b.batch_id for b in bronze.pending(landing, catalog)] == ["2026-04-05_001", "2026-04-06_001"]
    (entity,) = bronze.status(landing, catalog)
    assert (entity.landing_path, entity.pending, entity.loaded) == ("market/events", 2, 0)
    outcomes = bronze.ingest_pending(landing, catalog, max_batches=1)
    assert [(o.batch.batch_id, o.status) for o in outcomes] == [("2026-04-05_001", "loaded")]
    assert outcomes[0].report is not None and outcomes[0].report.rows == expected(FIRST)
    rest = bronze.ingest_pending(landing, catalog)
    assert [(o.batch.batch_id, o.status) for o in rest] == [("2026-04-06_001", "loaded")]
    assert bronze.pending(landing, catalog) == []
    (entity,) = bronze.status(landing, catalog)
    assert (entity.pending, entity.loaded) == (0, 2)


def test_variant_payloads_from_python(tmp_path: Path, catalog: Path) -> None:
    from deltalake import DeltaTable

    batch = tmp_path / "feed" / "events" / "batch_id=v1"
    batch.mkdir(parents=True)
    lines = [
        {"topic": "ev", "message_id": "1", "payload": {"Sym": "A", "legs": [{"k": 1}]}},
        {"topic": "q", "message_id": "2", "payload": {"doc": {"legs": [1, 2]}, "legs": [{"k": 2}]}},
    ]
    (batch / "part-0.jsonl").write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    report = bronze.ingest(batch, catalog, topics={"ev": {"payload": "variant"}}, column_types={"q:/doc": "variant"})
    assert report.exit_code == 0, report
    # `ev` kept whole in `payload`; `q`'s `doc` kept whole, its other array a child table.
    assert {t for t, n in report.rows.items() if n} == {"ev", "q", "legs"}
    for table, column in [("ev", "payload"), ("q", "doc")]:
        dt = DeltaTable(str(catalog / "bronze" / table))
        fields = {f["name"]: f["type"] for f in json.loads(dt.schema().to_json())["fields"]}
        assert fields[column] == "variant", fields
        assert "variantType" in (dt.protocol().reader_features or []), dt.protocol()
    assert "legs" not in fields and "doc__legs" not in fields
    assert DeltaTable(str(catalog / "bronze" / "legs")).to_pyarrow_table().num_rows == 1


def test_maintenance_from_python(catalog: Path) -> None:
    bronze.ingest(FIRST, catalog)
    bronze.ingest(FIRST, catalog)  # a replace: a second file in each table
    health = {h.table: h for h in bronze.health(catalog)}
    assert health["trade"].files == 1 or health["trade"].files == 2
    history = bronze.history("trade", catalog)
    assert [h.version for h in history] == [1, 0]
    (optimized,) = bronze.optimize(catalog, "trade")
    assert optimized.files_after <= optimized.files_before
    (ckpt,) = bronze.checkpoint(catalog, ["trade"])
    assert ckpt.table == "trade" and ckpt.version == optimized.version
    (vac,) = bronze.vacuum(catalog, "trade", dry_run=True)
    assert vac.dry_run
    # The report page: one data point per batch run in each batch chart.
    page = bronze.report(catalog, html=catalog.parent / "report.html")
    assert (catalog.parent / "report.html").read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>") and 'data-chart="rows" data-points="2"' in page
    assert history[0].action == "replace" and history[0].rows_removed == history[0].rows_added
    table = bronze.to_arrow(bronze.health(catalog))
    assert table.num_rows == len(health) and "small_files" in table.column_names
    assert table_rows(catalog)["trade"] == expected(FIRST)["trade"]


def test_maintain_from_python_within_its_bounds(catalog: Path) -> None:
    for _ in range(11):  # versions 0..10; the loads checkpointed at 9 (interval 10)
        bronze.ingest(FIRST, catalog)
    tables = {h.table for h in bronze.health(catalog)}
    with pytest.raises(bronze.ConfigError, match="168"):
        bronze.maintain(catalog, retain_hours=1)
    with pytest.raises(bronze.ConfigError, match="not a duration"):
        bronze.maintain(catalog, max_duration="soon")
    nothing = bronze.maintain(catalog, max_duration=0)
    assert nothing.tables == [] and sorted(nothing.not_reached) == sorted(tables)
    first = bronze.maintain(catalog, max_tables=2)
    assert len(first.tables) == 2 and len(first.not_reached) == len(tables) - 2
    rest = bronze.maintain(catalog, max_duration="1h")
    assert rest.not_reached == [] and rest.failed_tables == {}
    trade = next(t for t in first.tables + rest.tables if t.table == "trade")
    assert trade.checkpoint is None and trade.optimize is None  # nothing due: 1 file, 1 commit since
    assert trade.vacuum is not None and trade.vacuum.files == []  # all younger than 168 h
    again = bronze.maintain(catalog, max_duration=datetime.timedelta(hours=1))
    assert {t.table for t in again.tables} == tables
    forced = bronze.maintain(catalog, retain_hours=0, force=True)
    trade = next(t for t in forced.tables if t.table == "trade")
    assert trade.vacuum is not None and len(trade.vacuum.files) == 10  # the files 10 reruns replaced
    assert table_rows(catalog)["trade"] == expected(FIRST)["trade"]


def test_the_extension_can_be_loaded_late_into_any_interpreter() -> None:
    """The extension's jemalloc is built with `disable_initial_exec_tls`: the library asks
    for no static TLS (the ELF flag `STATIC_TLS`, which jemalloc's default build sets), so
    `dlopen` into a running interpreter never fails with "cannot allocate memory in
    static TLS block". And it is jemalloc (its prefixed symbols are there)."""
    import subprocess

    from bronze import _bronze

    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    flags = subprocess.run([readelf, "-d", _bronze.__file__], capture_output=True, text=True, check=True).stdout
    assert "(FLAGS)" in flags and "STATIC_TLS" not in flags, flags
    assert b"jemalloc_bg_thd" in Path(_bronze.__file__).read_bytes()


def test_ingest_pending_with_batches_in_flight(tmp_path: Path, catalog: Path) -> None:
    from conftest import make_landing

    made = make_landing(tmp_path / "landing" / "src", ["a", "b"], 2)
    outcomes = bronze.ingest_pending(tmp_path / "landing", catalog, max_in_flight=2)
    assert sorted((o.batch.landing_path, o.batch.batch_id, o.status) for o in outcomes) == sorted(
        (f"src/{e}", b, "loaded") for e, b in made
    )
    assert table_rows(catalog) == {t: 4 * n for t, n in expected(FIRST).items()}
