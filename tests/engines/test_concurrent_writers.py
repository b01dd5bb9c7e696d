"""Spark as the other writer, at the same time: Spark runs OPTIMIZE (bin-pack and
Z-order), liquid clustering, DELETE, UPDATE, MERGE, ALTER TABLE ADD COLUMNS and VACUUM on
a table while bronze loads new batches into it and reruns old ones; two threads, each
going through its own seeded schedule, start each step's bronze run and Spark operation
together (a barrier, nothing waiting on time).

Then the table holds every batch's rows exactly once, but the rows a Spark DELETE took
after the batch's last load (a rerun brings its batch's rows back, as
docs/delta-tables.md says); and Spark, the Delta Kernel and Python deltalake read the
same rows. The conflicts each side
met are printed (RELIABILITY.md keeps the figures)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

from conftest import bronze_bin, kernel_read, land, rows_deltalake, rows_kernel, rows_spark

ROWS = 5
SEED = 63


def batch_lines(batch_id: str) -> list[dict]:
    return [{"topic": "t", "message_id": f"{batch_id}-{i}", "payload": {"x": i, "tag": batch_id}} for i in range(ROWS)]


def bronze_schedule(rng: random.Random, new: int, reruns: int) -> list[str]:
    """Batch ids in load order: `new` new batches and `reruns` reruns of loaded ones."""
    ops, loaded, fresh = [], ["b00"], [f"b{i:02d}" for i in range(1, new + 1)]
    while fresh or len(ops) < new + reruns:
        if fresh and (len(ops) - (new - len(fresh)) >= reruns or rng.random() < 0.5):
            ops.append(fresh.pop(0))
            loaded.append(ops[-1])
        else:
            ops.append(rng.choice(loaded))
    return ops


def spark_schedule(rng: random.Random, n: int) -> list[str]:
    kinds = ["optimize", "zorder", "delete", "update", "touch_all", "merge", "add_column", "vacuum", "cluster"]
    weights = [2, 1, 4, 2, 3, 3, 1, 1, 1]
    return rng.choices(kinds, weights, k=n)


class SparkSide:
    def __init__(self, spark, table: Path, rng: random.Random):
        self.spark, self.table, self.rng = spark, table, rng
        self.ok: Counter = Counter()
        self.conflicts: Counter = Counter()
        self.columns = 0
        self.clustered = False
        self.spans: list[tuple[float, float]] = []

    def some_id(self) -> str | None:
        rows = self.spark.read.format("delta").load(str(self.table)).select("_id").collect()
        return self.rng.choice(rows)["_id"] if rows else None

    def run(self, kind: str) -> None:
        t = f"delta.`{self.table}`"
        if kind == "optimize":
            sql = f"OPTIMIZE {t}"
        elif kind == "zorder":
            # A clustered table refuses ZORDER BY; its OPTIMIZE clusters instead.
            sql = f"OPTIMIZE {t}" if self.clustered else f"OPTIMIZE {t} ZORDER BY (x)"
        elif kind == "cluster":
            sql = f"ALTER TABLE {t} CLUSTER BY (tag)"
        elif kind == "touch_all":
            # Reads and rewrites every file: the widest window for the other side's commits.
            sql = f"UPDATE {t} SET x = x WHERE x IS NOT NULL"
        elif kind == "vacuum":
            sql = f"VACUUM {t} RETAIN 168 HOURS"
        elif kind == "add_column":
            self.columns += 1
            sql = f"ALTER TABLE {t} ADD COLUMNS (spark_note_{self.columns} STRING)"
        else:
            target = self.some_id()
            if target is None:
                return
            sql = {
                "delete": f"DELETE FROM {t} WHERE _id = '{target}'",
                "update": f"UPDATE {t} SET x = x + 1000 WHERE _id = '{target}'",
                "merge": f"MERGE INTO {t} AS d USING (SELECT '{target}' AS id) AS s ON d._id = s.id "
                "WHEN MATCHED THEN UPDATE SET x = -d.x",
            }[kind]
        started = time.monotonic()
        try:
            self.spark.sql(sql).collect()
            self.spans.append((started, time.monotonic()))
            self.ok[kind] += 1
            self.clustered |= kind == "cluster"
        except Exception as e:  # noqa: BLE001 - Spark's conflicts, counted by class
            name = re.search(r"(Concurrent\w+Exception|DELTA_CONCURRENT\w+)", str(e))
            if name is None:
                raise
            self.conflicts[name.group(1)] += 1


def test_spark_maintains_and_changes_a_table_while_bronze_loads_and_reruns(spark, tmp_path: Path) -> None:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    t = lake / "bronze" / "t"
    rng = random.Random(SEED)
    folders = {}

    bronze_spans: list[tuple[float, float]] = []

    def load(batch_id: str) -> subprocess.CompletedProcess:
        if batch_id not in folders:
            folders[batch_id] = land(landing, batch_id, batch_lines(batch_id))
        started = time.monotonic()
        done = subprocess.run(
            [bronze_bin(), "ingest", str(folders[batch_id]), "--catalog", str(lake)],
            capture_output=True,
            text=True,
        )
        bronze_spans.append((started, time.monotonic()))
        return done

    assert load("b00").returncode == 0
    spark.sql(
        f"ALTER TABLE delta.`{t}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
        "'delta.enableDeletionVectors' = 'true')"
    )
    start_version = max(int(p.name[:20]) for p in (t / "_delta_log").glob("0*.json"))

    bronze_ops = bronze_schedule(rng, new=14, reruns=14)
    spark_ops = spark_schedule(rng, 28)
    side = SparkSide(spark, t, random.Random(SEED + 1))
    bronze_done: list[tuple[str, subprocess.CompletedProcess]] = []
    errors: list[BaseException] = []
    assert len(bronze_ops) == len(spark_ops)
    go = threading.Barrier(2)

    # Step by step: each step starts one bronze run and one Spark operation together, so
    # every pair overlaps (a bronze run of a small batch takes a fraction of a Spark
    # operation: unpaced, bronze would finish before Spark's first commit).
    def bronze_thread() -> None:
        for b in bronze_ops:
            go.wait()
            bronze_done.append((b, load(b)))

    def spark_thread() -> None:
        kind = None
        try:
            for kind in spark_ops:
                go.wait()
                side.run(kind)
        except BaseException as e:  # noqa: BLE001 - reported below
            go.abort()
            errors.append(f"{kind}: {e}")

    threads = [threading.Thread(target=bronze_thread), threading.Thread(target=spark_thread)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    failed = [(b, p.stdout + p.stderr) for b, p in bronze_done if p.returncode != 0]
    assert not failed, failed
    replanned = sum(
        int(m.group(1))
        for _, p in bronze_done
        for m in re.finditer(r"commits planned again after another writer's conflicting commit: (\d+)", p.stdout)
    )

    # What the log says happened, version by version: bronze's first load of a batch
    # appends files holding its rows alone; a rerun's predicate names its batch. Spark's
    # deletes show in the change feed.
    last_load: dict[str, int] = {"b00": start_version}
    for p in sorted((t / "_delta_log").glob("0*.json")):
        version = int(p.name[:20])
        actions = [json.loads(line) for line in p.read_text().splitlines()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        if not info.get("engineInfo", "").startswith("delta-rs"):
            continue
        params = info.get("operationParameters", {})
        loaded = set(re.findall(r"_batch_id = '(\w+)'", params.get("predicate", "")))
        if params.get("mode") == "Append":
            for a in actions:
                if "add" in a:
                    stats = json.loads(a["add"]["stats"])
                    assert stats["minValues"]["_batch_id"] == stats["maxValues"]["_batch_id"]
                    loaded.add(stats["minValues"]["_batch_id"])
        for batch_id in loaded:
            last_load[batch_id] = max(last_load.get(batch_id, -1), version)
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start_version + 1)
        .load(str(t))
        .collect()
    )
    history = {r["version"]: r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{t}`").collect()}
    deleted_at: dict[str, int] = {}
    for c in changes:
        if c["_change_type"] == "delete" and history[c["_commit_version"]] == "DELETE":
            deleted_at[c["_id"]] = max(deleted_at.get(c["_id"], -1), c["_commit_version"])

    final = spark.read.format("delta").load(str(t)).select("_id", "_batch_id").collect()
    counts = Counter(r["_id"] for r in final)
    duplicated = sorted(i for i, n in counts.items() if n > 1)
    expected = {
        f"{b}-{i}"
        for b in last_load
        for i in range(ROWS)
        if deleted_at.get(f"{b}-{i}", -1) < last_load[b]
    }
    lost = sorted(expected - set(counts))
    extra = sorted(set(counts) - expected)
    # How many Spark operations ran while a bronze run was under way (the interleavings).
    overlapped = sum(any(a < d and c < b for c, d in bronze_spans[1:]) for a, b in side.spans)
    print(
        f"\nconcurrent writers (seed {SEED}): {overlapped} of Spark's operations overlapped a bronze run; "
        f"bronze {len(bronze_ops)} runs "
        f"({len(set(bronze_ops))} batches, {len(bronze_ops) - len(set(bronze_ops))} reruns), "
        f"{replanned} commits planned again; Spark {sum(side.ok.values())} operations "
        f"{dict(side.ok)}, conflicts {dict(side.conflicts)}; {len(deleted_at)} rows Spark deleted; "
        f"{len(expected)} rows expected; lost {len(lost)}, duplicated {len(duplicated)}, unexpected {len(extra)}"
    )
    assert (lost, duplicated, extra) == ([], [], [])
    assert rows_spark(spark, t) == rows_deltalake(t)
    assert rows_spark(spark, t) == rows_kernel(kernel_read([(t, None)])[0])
