"""Load batches of multi-topic JSON Lines files into Delta Lake bronze tables.

The Python face of the ``bronze`` CLI: the same engine (Rust, its own thread pool; the
GIL is released while it works), the same settings, the same results as ``--json``, as
dataclasses::

    import bronze

    report = bronze.ingest("landing/market/events/batch_id=2026-04-05_001", "lakehouse")
    print(report.summary(), report.rows)

Catalogs and landing folders may be local paths or object store URLs (``abfss://``,
``s3://``, ``gs://``…) with credentials in ``storage_options`` (the keys of
``--storage-option``) or the standard environment variables. ``bronze.spark`` spreads a
backlog of batches over Spark executors.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from . import _bronze
from ._bronze import (
    AlreadyLoaded,
    BatchBusy,
    BatchChanging,
    BronzeError,
    ConfigError,
    InvalidBatchId,
    InvalidLandingPath,
    NoDataFiles,
    NoSuchTable,
    StorageError,
    TableError,
)
from ._records import (
    Batch,
    Changed,
    CheckpointResult,
    CorruptLine,
    EntityStatus,
    Failure,
    FileStats,
    Folder,
    HistoryEntry,
    InProgress,
    LandingChange,
    MaintainedTable,
    MaintainReport,
    OptimizeResult,
    Outcome,
    Report,
    RunControlRow,
    TableHealth,
    TableOutcome,
    Unregistered,
    VacuumResult,
    from_json,
    to_arrow,
)

__version__ = _bronze.__version__

PathLike = Union[str, "os.PathLike[str]"]
#: ``progress``: a callable receiving ``(stage, done, total)`` (stage ``"discover"``,
#: ``"parse"`` or ``"write"``), called from worker threads; or ``True`` for a tqdm bar.
ProgressArg = Union[None, bool, Callable[[str, int, int], Any]]


class BatchFailed(BronzeError):
    """A batch ran to the end but a table could not be written (the CLI's exit code 2);
    ``report`` says which and why. Nothing of a failed table is committed; a rerun
    replaces the batch's rows."""

    def __init__(self, report: Report):
        failed = report.failed_tables
        reason = "; ".join(f"{t}: {o.error}" for t, o in failed.items()) or report.invariant
        super().__init__(f"batch {report.batch_id} failed: {reason}")
        self.report = report


#: Keys of ``[flatten]`` also taken as keyword arguments of their own:
#: ``column_types={"/amount": "decimal(18,2)", "trade:/ts": "timestamp"}``,
#: ``detect_types=["timestamp", "date"]`` (or ``"timestamp,date"``, as ``--detect-types``).
_FLATTEN_KEYS = ("column_types", "detect_types")


def _flatten_key(key: str, value: Any) -> Any:
    """The value of a ``[flatten]`` key given as its own keyword argument: ``column_types``
    a mapping, ``detect_types`` a list of types or one string of them separated by commas."""
    if key == "column_types":
        if not isinstance(value, Mapping):
            raise TypeError(f"column_types is a mapping of pointers to types, not {type(value).__name__}")
        return dict(value)
    if isinstance(value, str):
        return [t.strip() for t in value.split(",")]
    return list(value)


def _merge_flatten(given: Any, own: dict[str, Any]) -> Any:
    """``flatten={...}`` with the ``[flatten]`` keys given as their own keyword arguments
    over it: ``column_types`` merged pointer by pointer (the keyword argument's type wins
    for a pointer in both), ``detect_types`` replaced."""
    if not own:
        return given
    if not isinstance(given, Mapping):
        return own if given is None else given  # not a mapping: the Rust side names it
    merged = dict(given)
    for key, value in own.items():
        below = merged.get(key)
        if key == "column_types" and isinstance(below, Mapping):
            value = {**below, **value}
        merged[key] = value
    return merged


def _settings(catalog: Optional[PathLike], **kw: Any) -> str:
    """The JSON settings of the Rust side: the keyword arguments by their names in
    ``bronze.toml`` (``storage_options`` is its ``[storage]``; ``None`` values are left out;
    a duration may be a ``timedelta``), over ``config`` (a ``bronze.toml`` path as
    ``config_file``, or a dict of its keys)."""
    config = kw.pop("config", None)
    settings: dict[str, Any] = {} if catalog is None else {"catalog": os.fspath(catalog)}
    flatten: dict[str, Any] = {}
    if isinstance(config, Mapping):
        settings["config"] = dict(config)
    elif config is not None:
        settings["config_file"] = os.fspath(config)
    for key, value in kw.items():
        if value is None:
            continue
        if isinstance(value, datetime.timedelta):
            value = value.total_seconds()
        if key == "metrics_push":  # `[metrics] push_url`, the CLI's --metrics-push
            key, value = "metrics", {"push_url": value}
        if key in _FLATTEN_KEYS:  # `[flatten]` keys, the CLI's --column-type, --detect-types
            flatten[key] = _flatten_key(key, value)
            continue
        settings[key] = value
    if flatten:
        settings["flatten"] = _merge_flatten(settings.get("flatten"), flatten)
    if settings.get("storage_options") is not None:
        settings["storage_options"] = {str(k): str(v) for k, v in settings["storage_options"].items()}
    return json.dumps(settings)


class _Bars:
    """``progress=True``: one tqdm bar per stage."""

    def __init__(self) -> None:
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self._bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage == "discover":
            return
        bar = self._bars.get(stage)
        if bar is None:
            label = {"parse": "parsing files", "write": "writing tables"}.get(stage, stage)
            bar = self._bars[stage] = self._tqdm(total=total, desc=label, unit=stage == "parse" and "file" or "table")
        bar.total = max(total, done)
        bar.n = done
        bar.refresh()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()


@contextlib.contextmanager
def _progress(progress: ProgressArg) -> Iterator[Optional[Callable[..., Any]]]:
    """The callback to hand the extension for ``progress`` (tqdm bars for ``True``, closed
    when the call ends)."""
    if progress is None or progress is False:
        yield None
        return
    if progress is True:
        try:
            bars = _Bars()
        except ImportError:
            yield None
            return
        try:
            yield bars
        finally:
            bars.close()
        return
    if not callable(progress):
        raise TypeError("progress must be a callable (stage, done, total) or True")
    yield progress


def ingest(
    batch: Union[PathLike, Sequence[PathLike]],
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    max_parallel: Optional[int] = None,
    memory_budget: Union[None, int, str] = None,
    threads: Optional[int] = None,
    batch_id: Optional[str] = None,
    landing_path: Optional[str] = None,
    lease_ttl: Union[None, str, float] = None,
    progress: ProgressArg = None,
    raise_on_failure: bool = True,
    **settings: Any,
) -> Report:
    """Loads one batch folder (or several folders of one batch id) into ``catalog``.

    ``config`` is a ``bronze.toml`` path or a dict of its keys (``{"envelope":
    {"topic_field": "type"}}``); the keyword arguments override it. ``memory_budget`` is
    bytes or a size (``"512MiB"``); ``lease_ttl`` seconds or a duration (``"10m"``).
    Corrupt lines are kept in ``_corrupt_records`` and counted (``report.exit_code`` 1);
    a table that could not be written raises :class:`BatchFailed` (with the report) unless
    ``raise_on_failure=False``. Another run holding the batch raises :class:`BatchBusy`.
    Every other key of ``bronze.toml`` is a keyword argument too, under the same name
    (``envelope={"topic_field": "type"}``, ``flatten={"max_depth": 4}``,
    ``persist_staging=True``, ``resume=False``, ``single_writer=True``,
    ``topics={"ev": {"payload": "variant"}}`` to keep a topic's payloads whole as one
    VARIANT column), and
    ``column_types={"/amount": "decimal(18,2)", "trade:/ts": "timestamp"}`` and
    ``detect_types=["timestamp", "date"]`` (or ``"timestamp,date"``) set those keys of
    ``[flatten]``, merged into ``flatten={...}`` when both are given (a pointer in both
    takes the type ``column_types=`` gives it; ``detect_types=`` replaces the list); an
    unknown one raises :class:`ConfigError` naming it. ``metrics_push="http://pushgateway:9091"``
    pushes the run's metrics to a Prometheus Pushgateway (``--metrics-push``).
    """
    folders = [os.fspath(batch)] if isinstance(batch, (str, os.PathLike)) else [os.fspath(b) for b in batch]
    settings = _settings(
        catalog,
        schema=schema,
        storage_options=storage_options,
        config=config,
        max_parallel=max_parallel,
        memory_budget=memory_budget,
        threads=threads,
        batch_id=batch_id,
        landing_path=landing_path,
        lease_ttl=lease_ttl,
        **settings,
    )
    with _progress(progress) as callback:
        report = from_json(Report, _bronze.ingest(folders, settings, callback))
    if raise_on_failure and report.exit_code == 2:
        raise BatchFailed(report)
    return report


def pending(
    landing_root: PathLike,
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    lease_ttl: Union[None, str, float] = None,
    **settings: Any,
) -> list[Batch]:
    """The ``batch_id=<id>`` folders under ``landing_root`` (``landing/``,
    ``landing/<source>/`` or ``landing/<source>/<entity>/``) not loaded successfully into
    ``catalog`` yet (a batch whose last run failed is pending again), oldest batch id first
    (``bronze ingest --pending`` loads them in this order). Every other key of
    ``bronze.toml`` is a keyword argument too (``full_listing_every="1h"``,
    ``single_writer=True``), as for :func:`ingest`."""
    settings = _settings(
        catalog, schema=schema, storage_options=storage_options, config=config, lease_ttl=lease_ttl, **settings
    )
    return from_json(list[Batch], _bronze.pending(os.fspath(landing_root), settings))


def status(
    landing_root: PathLike,
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    lease_ttl: Union[None, str, float] = None,
    **settings: Any,
) -> list[EntityStatus]:
    """The landing zone per entity, as ``bronze status``: batches loaded, pending and
    failed, the ones in progress (lease holder, heartbeat age, stale or not), the oldest
    pending and the last failure with its reason."""
    settings = _settings(
        catalog, schema=schema, storage_options=storage_options, config=config, lease_ttl=lease_ttl, **settings
    )
    return from_json(list[EntityStatus], _bronze.status(os.fspath(landing_root), settings))


def ingest_pending(
    landing_root: PathLike,
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    max_batches: Optional[int] = None,
    max_bytes: Union[None, int, str] = None,
    require_success: bool = False,
    max_in_flight: int = 1,
    ordered: bool = True,
    max_parallel: Optional[int] = None,
    memory_budget: Union[None, int, str] = None,
    lease_ttl: Union[None, str, float] = None,
    progress: ProgressArg = None,
    **settings: Any,
) -> list[Outcome]:
    """``bronze ingest --pending``: loads the pending batches under ``landing_root`` one by
    one, oldest first, each entity's in batch id order (a failed, busy or still-copying
    batch holds the entity's later ones back: status ``waiting``). One :class:`Outcome`
    per batch; a failure is an outcome, not an exception. ``max_in_flight``: batches of
    different entities loaded at once (each with its own memory budget). Any number of
    processes may run this on the same landing zone and catalog: each batch is loaded by
    one of them. ``ordered=False`` (``--unordered``): an entity's batches in any order,
    several of one entity at once with ``max_in_flight``; a failure holds none back.
    Every other key of ``bronze.toml`` is a keyword argument too, as for :func:`ingest`."""
    if isinstance(max_bytes, str):
        max_bytes = _size(max_bytes)
    settings = _settings(
        catalog,
        schema=schema,
        storage_options=storage_options,
        config=config,
        max_parallel=max_parallel,
        memory_budget=memory_budget,
        lease_ttl=lease_ttl,
        **settings,
    )
    with _progress(progress) as callback:
        text = _bronze.ingest_pending(
            os.fspath(landing_root), settings, max_batches, max_bytes, require_success, callback, max_in_flight,
            not ordered,
        )
    return from_json(list[Outcome], text)


def _size(text: str) -> int:
    try:
        return _bronze.parse_size(text)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _catalog_settings(
    catalog: PathLike,
    schema: Optional[str],
    storage_options: Optional[Mapping[str, str]],
    config: Any,
    settings: Mapping[str, Any],
) -> str:
    return _settings(catalog, schema=schema, storage_options=storage_options, config=config, **settings)


def health(
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    **settings: Any,
) -> list[TableHealth]:
    """``bronze health``: one row per table (files, small files, versions since the last
    checkpoint and OPTIMIZE, what VACUUM would free) and the action it needs, if any.
    ``bronze.to_arrow(rows)`` makes a pyarrow table of it. Every other key of
    ``bronze.toml`` is a keyword argument too (``single_writer=True``), as for
    :func:`ingest`."""
    settings = _catalog_settings(catalog, schema, storage_options, config, settings)
    return from_json(list[TableHealth], _bronze.health(settings))


def history(
    table: str,
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    limit: Optional[int] = None,
    **settings: Any,
) -> list[HistoryEntry]:
    """``bronze history``: a table's commits, newest first. Every other key of
    ``bronze.toml`` is a keyword argument too, as for :func:`ingest`."""
    settings = _catalog_settings(catalog, schema, storage_options, config, settings)
    return from_json(list[HistoryEntry], _bronze.history(table, settings, limit))


def report(
    catalog: PathLike,
    *,
    html: Optional[PathLike] = None,
    landing: Optional[PathLike] = None,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    lease_ttl: Union[None, str, float] = None,
    **settings: Any,
) -> str:
    """``bronze report --html``: the lakehouse report page (batch runs over time, tables
    and their file sizes, the latest failures; with ``landing``, that landing zone's
    backlog) as one self-contained HTML text, also written to ``html`` when given. In a
    Databricks or Fabric notebook: ``displayHTML(bronze.report(catalog))``. ``lease_ttl``:
    a batch lease not renewed for this long shows as stale in the backlog. Every other
    key of ``bronze.toml`` is a keyword argument too, as for :func:`ingest`."""
    settings = _catalog_settings(catalog, schema, storage_options, config, dict(settings, lease_ttl=lease_ttl))
    page = json.loads(_bronze.report_html(settings, None if landing is None else os.fspath(landing)))
    if html is not None:
        with open(html, "w", encoding="utf-8") as f:
            f.write(page)
    return page


def _tables(tables: Union[None, str, Sequence[str]]) -> Optional[list[str]]:
    if tables is None:
        return None
    return [tables] if isinstance(tables, str) else list(tables)


def optimize(
    catalog: PathLike,
    tables: Union[None, str, Sequence[str]] = None,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    target_size: Union[None, int, str] = None,
    zorder: Optional[Sequence[str]] = None,
    **settings: Any,
) -> list[OptimizeResult]:
    """``bronze optimize``: compacts small files of the named tables (default: every
    table), optionally Z-ordered by ``zorder``. Every other key of ``bronze.toml`` is a
    keyword argument too (``single_writer=True``), as for :func:`ingest`."""
    if isinstance(target_size, str):
        target_size = _size(target_size)
    settings = _catalog_settings(catalog, schema, storage_options, config, settings)
    zorder_list = list(zorder) if zorder is not None else None
    return from_json(list[OptimizeResult], _bronze.optimize(_tables(tables), settings, target_size, zorder_list))


def vacuum(
    catalog: PathLike,
    tables: Union[None, str, Sequence[str]] = None,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    retain_hours: Optional[int] = None,
    dry_run: bool = False,
    force: bool = False,
    **settings: Any,
) -> list[VacuumResult]:
    """``bronze vacuum``: deletes files no version within ``retain_hours`` references
    (default: the table's ``delta.deletedFileRetentionDuration``, at least 168); below
    the table's retention or 168 hours only with ``force``. Every other key of
    ``bronze.toml`` is a keyword argument too (``single_writer=True``), as for
    :func:`ingest`."""
    settings = _catalog_settings(catalog, schema, storage_options, config, settings)
    return from_json(list[VacuumResult], _bronze.vacuum(_tables(tables), settings, retain_hours, dry_run, force))


def checkpoint(
    catalog: PathLike,
    tables: Union[None, str, Sequence[str]] = None,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    **settings: Any,
) -> list[CheckpointResult]:
    """``bronze checkpoint``: writes a checkpoint of the named tables (default: every
    table) at their current version. Every other key of ``bronze.toml`` is a keyword
    argument too (``single_writer=True``), as for :func:`ingest`."""
    settings = _catalog_settings(catalog, schema, storage_options, config, settings)
    return from_json(list[CheckpointResult], _bronze.checkpoint(_tables(tables), settings))


def _duration(value: Union[None, str, float, datetime.timedelta]) -> Union[None, str, float]:
    """Seconds or duration text, as the extension reads a duration (a ``timedelta`` as its
    seconds)."""
    if hasattr(value, "total_seconds"):
        return value.total_seconds()
    return value


def maintain(
    catalog: PathLike,
    *,
    schema: Optional[str] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    config: Union[None, PathLike, Mapping[str, Any]] = None,
    max_tables: Optional[int] = None,
    max_duration: Union[None, str, float, datetime.timedelta] = None,
    retain_hours: Optional[int] = None,
    force: bool = False,
    **settings: Any,
) -> MaintainReport:
    """``bronze maintain``: what ``health`` recommends, done for every table, worst first:
    OPTIMIZE where small files piled up, VACUUM past ``retain_hours`` (default and minimum
    each table's ``delta.deletedFileRetentionDuration``, at least 168, unless ``force``), a checkpoint once 10 commits followed the last, expired log
    entries removed. Safe beside ingesting workers (each step under the table's lock).
    ``max_tables`` and ``max_duration`` (seconds, a ``timedelta`` or ``"1h"``) bound one
    run; the tables left are in ``report.not_reached``. A table whose step failed is in
    ``report.failed_tables``; the others were still visited. Every other key of
    ``bronze.toml`` is a keyword argument too (``single_writer=True``), as for
    :func:`ingest`."""
    settings = _catalog_settings(catalog, schema, storage_options, config, settings)
    text = _bronze.maintain(settings, max_tables, _duration(max_duration), retain_hours, force)
    return from_json(MaintainReport, text)


__all__ = [
    "AlreadyLoaded",
    "Batch",
    "BatchBusy",
    "BatchChanging",
    "BatchFailed",
    "BronzeError",
    "Changed",
    "CheckpointResult",
    "ConfigError",
    "CorruptLine",
    "EntityStatus",
    "Failure",
    "FileStats",
    "Folder",
    "HistoryEntry",
    "InProgress",
    "InvalidBatchId",
    "InvalidLandingPath",
    "LandingChange",
    "MaintainReport",
    "MaintainedTable",
    "NoDataFiles",
    "NoSuchTable",
    "OptimizeResult",
    "Outcome",
    "Report",
    "RunControlRow",
    "StorageError",
    "TableError",
    "TableHealth",
    "TableOutcome",
    "Unregistered",
    "VacuumResult",
    "checkpoint",
    "health",
    "history",
    "ingest",
    "ingest_pending",
    "maintain",
    "report",
    "optimize",
    "pending",
    "status",
    "to_arrow",
    "vacuum",
]
