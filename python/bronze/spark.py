"""A landing zone's backlog spread over Spark executors: ``bronze`` runs inside the
cluster you have, no scheduler of its own.

    from bronze.spark import ingest_pending

    result = ingest_pending(spark, "abfss://landing@acct.dfs.core.windows.net/market",
                            "abfss://lake@acct.dfs.core.windows.net/Tables",
                            storage_options={"azure_storage_account_key": key})
    result.show()

The driver lists the pending batches (:func:`bronze.pending`), groups them by entity
(``<source>/<entity>``), spreads the groups over ``parallelism`` tasks (largest first,
onto the least loaded task) and runs them with ``mapInArrow``: each task loads its
entities' batches one at a time, each entity's in batch id order, with
:func:`bronze.ingest`'s engine. The result is one row per batch, computed once (the job
runs when this function is called, not again on each action of the returned DataFrame).

Why this is safe under Spark's retries: each batch is loaded under its batch lease and
recorded as a Delta ``txn``. A task retried after a failure, or a speculative duplicate,
finds its finished batches recorded (status ``already_loaded``), takes over the lease of a
batch whose previous attempt died (at once on the same host, after ``lease_ttl``
elsewhere) and replaces that batch's partial rows; a lease held by a live attempt is a
``busy`` row, not an exception. Executors need ``bronze`` installed, and credentials in
``storage_options`` (notebook token helpers do not exist on executors).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Optional, Union

import bronze
from bronze._backlog import plan, prepare

#: The columns of the returned DataFrame; ``report`` is the batch's full report as JSON
#: (``bronze ingest --json``), null when it did not run to the end.
_COLUMNS = [
    ("landing_path", "string"), ("batch_id", "string"), ("folder", "string"),
    ("status", "string"), ("reason", "string"), ("messages", "long"),
    ("corrupt_lines", "long"), ("duplicates", "long"), ("rows_written", "long"),
    ("elapsed_seconds", "double"), ("task", "int"), ("report", "string"),
]  # fmt: skip
RESULT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in _COLUMNS)


def _rows(task: int, outcomes_json: str) -> list[dict[str, Any]]:
    rows = []
    for o in json.loads(outcomes_json):
        report = o.get("report")
        rows.append(
            {
                "landing_path": o["batch"]["landing_path"],
                "batch_id": o["batch"]["batch_id"],
                "folder": o["batch"]["folder"],
                "status": o["status"],
                "reason": o.get("reason"),
                "messages": report["messages"] if report else None,
                "corrupt_lines": report["corrupt_lines"] if report else None,
                "duplicates": report["duplicates"] if report else None,
                "rows_written": sum(t["rows_written"] for t in report["tables"].values()) if report else None,
                "elapsed_seconds": report["elapsed"] if report else None,
                "task": task,
                "report": json.dumps(report) if report else None,
            }
        )
    return rows


def ingest_pending(
    spark: Any,
    landing_root: Union[str, "os.PathLike[str]"],
    catalog: Union[str, "os.PathLike[str]"],
    *,
    schema: str = "bronze",
    storage_options: Optional[Mapping[str, str]] = None,
    parallelism: Optional[int] = None,
    max_batches: Optional[int] = None,
    require_success: bool = False,
    ordered: bool = True,
    progress: Optional[Callable[[str, int, int], Any]] = None,
    **config: Any,
) -> Any:
    """Loads every pending batch under ``landing_root`` into ``catalog`` on the cluster's
    executors; returns one row per batch (:data:`RESULT_SCHEMA`) as a DataFrame.

    ``parallelism``: tasks (default the cluster's default parallelism, at most one per
    entity). ``max_batches``: the oldest N pending batches only. ``config``: the keyword
    arguments of :func:`bronze.ingest` (``config=`` a ``bronze.toml`` dict or path,
    ``memory_budget``, ``max_parallel``, ``threads``, ``lease_ttl``), applied on every
    executor; ``threads`` defaults to the task's CPUs (``spark.task.cpus``). ``progress``: a picklable callable ``(stage, done, total)`` run on the
    executors (for their logs). Statuses: as :class:`bronze.Outcome`; a failed batch holds
    its entity's later batches back (``waiting``) and is pending again next time.
    ``ordered=False``: an entity's batches load in any order, spread over every task (a
    backfill of one entity uses the whole cluster); a failed batch holds none back, and
    the entity's schema evolves in the order its batches commit, not batch id order.
    """
    batches, settings = prepare(
        "ingest_pending", landing_root, catalog, schema, storage_options, max_batches, config
    )
    tasks = plan(batches, parallelism if parallelism is not None else _default_parallelism(spark), ordered)
    if not tasks:
        return spark.createDataFrame([], RESULT_SCHEMA)
    plans = [json.dumps(t) for t in tasks]

    def run(frames: Any) -> Any:
        import pyarrow as pa
        from pyspark import TaskContext

        from bronze import _bronze

        for frame in frames:
            for task in frame.column("id").to_pylist():
                own = _task_settings(settings, TaskContext.get())
                outcomes = _bronze.run_batches(plans[task], own, require_success, progress, not ordered)
                yield pa.RecordBatch.from_pylist(_rows(task, outcomes), schema=arrow_schema())

    # One row, so one task, per group: `range` splits n rows into n partitions of one.
    rows = (
        spark.range(0, len(tasks), 1, len(tasks))
        .mapInArrow(run, RESULT_SCHEMA)
        .collect()
    )
    return spark.createDataFrame(rows, RESULT_SCHEMA)


def _task_settings(settings: str, context: Any) -> str:
    """The workers' settings, parsing with the task's CPUs (``spark.task.cpus``, default 1)
    unless ``threads`` was given: every task on an executor would otherwise start a
    thread per core of the machine."""
    own = json.loads(settings)
    if "threads" not in own and context is not None:
        own["threads"] = max(1, int(context.cpus()))
    return json.dumps(own)


def _default_parallelism(spark: Any) -> int:
    """The cluster's default parallelism; with Spark Connect (no ``sparkContext``), its
    ``spark.default.parallelism`` setting, else one task per entity."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:
        return int(spark.conf.get("spark.default.parallelism", "1000000"))


def arrow_schema() -> Any:
    """:data:`RESULT_SCHEMA` as a pyarrow schema (the task's output)."""
    import pyarrow as pa

    kinds = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "int": pa.int32()}
    return pa.schema([(name, kinds[kind]) for name, kind in _COLUMNS])


__all__ = ["RESULT_SCHEMA", "arrow_schema", "ingest_pending", "plan"]
