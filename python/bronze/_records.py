"""Typed results: one dataclass per record of the CLI's ``--json`` output, field for field.

The Rust side returns JSON; :func:`from_json` builds these, refusing a key no field
names, and the package's tests compare every dataclass's fields with the keys of the
Rust type it mirrors (``_bronze.result_shapes()``), so a field added on one side and not
the other fails them instead of disappearing. What a report means (``exit_code``,
``summary()``) is computed by the Rust side from the report's JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from dataclasses import dataclass
from typing import Any, Optional

from . import _bronze


@dataclass(frozen=True)
class Folder:
    """One landing folder of a batch."""

    path: str
    landing_path: str
    files: int


@dataclass(frozen=True)
class TableOutcome:
    """What a run did to one table."""

    rows_written: int
    topics: list[str]
    version: Optional[int]
    error: Optional[str]
    added_columns: list[str]
    rescued_values: int


@dataclass(frozen=True)
class FileStats:
    """Counts of one landing file."""

    file: str
    bytes: int
    lines: int
    messages: int
    corrupt: int
    duplicates: int


@dataclass(frozen=True)
class CorruptLine:
    """A line kept in ``_corrupt_records`` (its text is in the table)."""

    source_file: str
    line: int
    reason: str


@dataclass(frozen=True)
class RunControlRow:
    """One row of ``_run_control``: a (topic, table) write of a run."""

    run_id: str
    batch_id: str
    landing_paths: list[str]
    topic: str
    table: str
    rows_in: int
    rows_written: int
    files_added: int
    bytes_added: int
    version: Optional[int]
    started_at_micros: int
    ended_at_micros: int
    status: str
    error: Optional[str]
    checks: str
    schema_changes: str
    rescued_values: int
    store_retries: int


@dataclass(frozen=True)
class Report:
    """The report of one batch run: the fields of ``bronze ingest --json``."""

    batch_id: str
    batch: str
    folders: list[Folder]
    files_read: int
    files_skipped: int
    skipped_files: list[str]
    bytes_read: int
    lines: int
    messages: int
    corrupt_lines: int
    duplicates: int
    topics: int
    tables: dict[str, TableOutcome]
    files: list[FileStats]
    corrupt: list[CorruptLine]
    run_control: list[RunControlRow]
    staging: str
    warnings: list[str]
    unregistered: list[str]
    invariant_ok: bool
    invariant: str
    store_retries: int
    commit_replans: int
    store_calls: dict[str, int]
    stage_seconds: dict[str, float]
    task_seconds: dict[str, float]
    peak_rss_bytes: Optional[int]
    elapsed: float

    @property
    def failed_tables(self) -> dict[str, TableOutcome]:
        """The tables whose write failed, with their errors."""
        return {name: t for name, t in self.tables.items() if t.error is not None}

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this report: 0 clean, 1 corrupt lines kept, 2 failed."""
        return _bronze.report_exit_code(self._json())

    @property
    def rows(self) -> dict[str, int]:
        """Rows written per table."""
        return {name: t.rows_written for name, t in self.tables.items()}

    def summary(self) -> str:
        """One line, as the CLI's first line of text."""
        return _bronze.report_summary(self._json())

    def _json(self) -> str:
        """This report as the JSON the extension returned it as."""
        return json.dumps(dataclasses.asdict(self))


@dataclass(frozen=True)
class LandingChange:
    """How a loaded batch's folder differs from what its load read (its manifest)."""

    added: list[str]
    changed: list[str]
    removed: list[str]


@dataclass(frozen=True)
class Batch:
    """A ``batch_id=<id>`` folder of a landing zone; ``late`` says how a loaded batch's
    folder changed since its load when it is pending again for that."""

    folder: str
    landing_path: str
    batch_id: str
    late: Optional[LandingChange] = None


@dataclass(frozen=True)
class Outcome:
    """What became of one pending batch: ``status`` is ``loaded``, ``failed``, ``busy``
    (another worker holds its lease), ``already_loaded``, ``waiting`` (an earlier batch of
    the entity did not load), ``changing`` (still being copied), ``not_ready`` or
    ``changed`` (loaded before, its folder changed since, not loaded again)."""

    batch: Batch
    status: str
    reason: Optional[str]
    report: Optional[Report]


@dataclass(frozen=True)
class InProgress:
    """A batch whose lease is held."""

    batch_id: str
    run_id: str
    host: str
    pid: int
    age_seconds: float
    renewed_seconds_ago: Optional[float]
    stale: bool


@dataclass(frozen=True)
class Failure:
    """The last failed batch of an entity and why."""

    batch_id: str
    reason: str


@dataclass(frozen=True)
class Changed:
    """A loaded batch whose folder changed after its load."""

    batch_id: str
    change: LandingChange


@dataclass(frozen=True)
class Unregistered:
    """A table the catalog of ``metastore`` has not taken yet (the next run into its
    database, or ``bronze register``, registers it)."""

    database: str
    table: str
    landing_path: str
    reason: str
    since_micros: int
    version: int = 0


@dataclass(frozen=True)
class EntityStatus:
    """One entity (``<source>/<entity>``) of a landing zone."""

    landing_path: str
    loaded: int
    pending: int
    failed: int
    in_progress: list[InProgress]
    oldest_pending: Optional[str]
    last_failure: Optional[Failure]
    last_loaded_micros: Optional[int] = None
    changed: list[Changed] = dataclasses.field(default_factory=list)
    unregistered: list[Unregistered] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class TableHealth:
    """One table's row of ``bronze health``."""

    table: str
    version: int
    files: int
    bytes: int
    avg_file_bytes: int
    small_files: int
    versions_since_checkpoint: int
    versions_since_optimize: Optional[int]
    vacuum_files: int
    vacuum_bytes: int
    file_sizes: list[int]
    flagged: bool
    action: str


@dataclass(frozen=True)
class HistoryEntry:
    """One commit of a table."""

    version: int
    timestamp_millis: Optional[int]
    operation: Optional[str]
    parameters: dict[str, Any]
    metrics: Any
    timestamp: Optional[str]
    action: str
    predicate: Optional[str]
    rows_added: Optional[int]
    rows_removed: Optional[int]
    files_added: Optional[int]
    files_removed: Optional[int]
    duration_ms: Optional[int]


@dataclass(frozen=True)
class OptimizeResult:
    """What OPTIMIZE did to one table."""

    table: str
    files_before: int
    files_after: int
    files_added: int
    files_removed: int
    version: int


@dataclass(frozen=True)
class VacuumResult:
    """What VACUUM deleted (or would, with ``dry_run``) in one table."""

    table: str
    dry_run: bool
    files: list[str]
    bytes: int


@dataclass(frozen=True)
class CheckpointResult:
    """The version a table was checkpointed at."""

    table: str
    version: int


@dataclass(frozen=True)
class MaintainedTable:
    """What ``maintain`` did to one table (a step it did not need is ``None``)."""

    table: str
    optimize: Optional[OptimizeResult]
    vacuum: Optional[VacuumResult]
    checkpoint: Optional[int]
    logs_removed: int
    error: Optional[str]


@dataclass(frozen=True)
class MaintainReport:
    """What ``maintain`` did: the tables visited (worst first), those the bounds left
    for the next run, and the wall time."""

    tables: list[MaintainedTable]
    not_reached: list[str]
    seconds: float

    @property
    def failed_tables(self) -> dict[str, str]:
        """The tables a step failed in, with why (the other tables were still visited)."""
        return {t.table: t.error for t in self.tables if t.error is not None}


@functools.lru_cache(maxsize=None)
def _fields(tp: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A dataclass's field types (its annotations resolved once) and field names."""
    return typing.get_type_hints(tp), frozenset(f.name for f in dataclasses.fields(tp))


@functools.lru_cache(maxsize=None)
def _shape(tp: Any) -> tuple[str, Any]:
    """What ``tp`` is, resolved once per type: optional, list, dict, record or plain."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        return "optional", next(a for a in typing.get_args(tp) if a is not type(None))
    if origin is list:
        return "list", typing.get_args(tp)[0]
    if origin is dict:
        return "dict", typing.get_args(tp)[1]
    if dataclasses.is_dataclass(tp):
        return "record", None
    return "plain", None


def _build(tp: Any, value: Any) -> Any:
    """``value`` (decoded JSON) as type ``tp``: dataclasses, lists, dicts, optionals."""
    if value is None:
        return None
    kind, inner = _shape(tp)
    if kind == "optional":
        return _build(inner, value)
    if kind == "list":
        return [_build(inner, v) for v in value]
    if kind == "dict":
        return {k: _build(inner, v) for k, v in value.items()}
    if kind == "record":
        hints, names = _fields(tp)
        keys = value.keys()
        if keys != names:
            unknown, missing = set(keys) - names, names - set(keys)
            raise TypeError(
                f"{tp.__name__}: fields {sorted(unknown)} unknown, {sorted(missing)} missing:"
                " the package and its extension differ; reinstall it"
            )
        return tp(**{n: _build(hints[n], v) for n, v in value.items()})
    return value


def from_json(tp: Any, text: str) -> Any:
    """The JSON text returned by the Rust side, as ``tp``."""
    return _build(tp, json.loads(text))


def to_arrow(records: Any) -> Any:
    """A list of these records as a ``pyarrow.Table`` (one column per field)."""
    import pyarrow as pa

    return pa.Table.from_pylist([dataclasses.asdict(r) for r in records])

