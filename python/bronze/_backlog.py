"""How a backlog is shared out among the tasks of a distributed engine (Spark, Ray)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:
    from bronze import Batch


def plan(batches: list[Batch], parallelism: int, ordered: bool = True) -> list[list[dict[str, str]]]:
    """The batches in ``parallelism`` groups (at most one per entity), each entity's
    batches together and in batch id order; entities with the most batches are placed
    first, each onto the group with the fewest batches so far. Not ``ordered``: each batch
    is a unit of its own, dealt round the groups in batch id order (one entity's batches
    spread over every group)."""
    by_entity: dict[str, list[Batch]] = {}
    for i, b in enumerate(sorted(batches, key=lambda b: (b.batch_id, b.landing_path))):
        by_entity.setdefault(b.landing_path if ordered else f"{i:020}", []).append(b)
    groups: list[list[dict[str, str]]] = [[] for _ in range(max(1, min(parallelism, len(by_entity))))]
    for entity in sorted(by_entity, key=lambda e: (-len(by_entity[e]), e)):
        target = min(range(len(groups)), key=lambda i: (len(groups[i]), i))
        ordered = sorted(by_entity[entity], key=lambda b: b.batch_id)
        groups[target].extend(
            {"folder": b.folder, "landing_path": b.landing_path, "batch_id": b.batch_id} for b in ordered
        )
    return [g for g in groups if g]


#: The keyword arguments of `bronze.ingest` a distributed backlog applies on every worker.
WORKER_SETTINGS = frozenset({"config", "memory_budget", "max_parallel", "threads", "lease_ttl"})


def prepare(
    caller: str,
    landing_root: Any,
    catalog: Any,
    schema: str,
    storage_options: Optional[Mapping[str, str]],
    max_batches: Optional[int],
    config: dict[str, Any],
) -> tuple[list[Batch], str]:
    """The pending batches (the oldest ``max_batches``) and the workers' settings (JSON)."""
    import bronze

    unknown = set(config) - WORKER_SETTINGS
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword arguments {sorted(unknown)}")
    root, cat = os.fspath(landing_root), os.fspath(catalog)
    batches = bronze.pending(root, cat, schema=schema, storage_options=storage_options, config=config.get("config"))
    if max_batches is not None:
        batches = batches[:max_batches]
    return batches, bronze._settings(cat, schema=schema, storage_options=storage_options, **config)
