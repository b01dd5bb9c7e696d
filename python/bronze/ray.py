"""A landing zone's backlog spread over Ray tasks, as :mod:`bronze.spark` does over Spark
executors: the same plan (entities grouped, largest first onto the least loaded task, an
entity's batches in batch id order), one Ray task per group, one :class:`bronze.Outcome`
per batch.

    import ray, bronze.ray
    ray.init()
    outcomes = bronze.ray.ingest_pending("s3://landing/market/", "s3://lake/Tables",
                                         storage_options={"aws_region": "eu-west-1"})

A task whose worker dies is retried by Ray (``max_retries``); the retry finds the
batches the first attempt finished recorded (``already_loaded``), takes over the lease of
the batch it died in (at once on the same node, after ``lease_ttl`` elsewhere) and
replaces its partial rows. A lease held by a live run is a ``busy`` outcome.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Optional, Union

import bronze
from bronze._backlog import plan, prepare


def ingest_pending(
    landing_root: Union[str, "os.PathLike[str]"],
    catalog: Union[str, "os.PathLike[str]"],
    *,
    schema: str = "bronze",
    storage_options: Optional[Mapping[str, str]] = None,
    parallelism: Optional[int] = None,
    max_batches: Optional[int] = None,
    require_success: bool = False,
    ordered: bool = True,
    max_retries: int = 3,
    cpus_per_task: int = 1,
    progress: Optional[Callable[[str, int, int], Any]] = None,
    **config: Any,
) -> list[bronze.Outcome]:
    """Loads every pending batch under ``landing_root`` into ``catalog`` with Ray tasks
    (``ray.init()`` first, or Ray starts a local instance); one outcome per batch, in
    plan order. ``parallelism``: tasks (default the cluster's CPUs, at most one per
    entity); ``cpus_per_task``: the CPUs each task reserves, and its parsing threads
    unless ``threads`` is given; the other arguments as
    :func:`bronze.spark.ingest_pending`."""
    import ray

    batches, settings = prepare(
        "ingest_pending", landing_root, catalog, schema, storage_options, max_batches, config
    )
    if parallelism is None:
        if not ray.is_initialized():
            ray.init()
        parallelism = max(1, int(ray.cluster_resources().get("CPU", 1)))
    tasks = plan(batches, parallelism, ordered)

    if "threads" not in config:
        # As many parsing threads as the task reserves CPUs, not one per core of the node.
        settings = json.dumps({**json.loads(settings), "threads": cpus_per_task})

    @ray.remote(max_retries=max_retries, num_cpus=cpus_per_task)
    def run(task: str) -> str:
        from bronze import _bronze

        return _bronze.run_batches(task, settings, require_success, progress, not ordered)

    results = ray.get([run.remote(json.dumps(t)) for t in tasks])
    return [o for text in results for o in bronze.from_json(list[bronze.Outcome], text)]


__all__ = ["ingest_pending"]
