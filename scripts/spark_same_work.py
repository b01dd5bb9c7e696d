#!/usr/bin/env python3
"""Bronze's work for one batch folder, done the way the source notebook does it
(`../shared/seeds/003_*`): Spark with Delta, here in local mode (`local[2]`).

    .venv/bin/python scripts/spark_same_work.py BATCH_DIR OUT_DIR [--parallel 32]

1. Reads the batch folder once (`spark.read.text` over its `*.jsonl`/`*.json` files; the
   line number of each line in its file from the reader's order), parses each line's
   envelope (`from_json` as a map of its top-level fields), keeps every line that is not
   a JSON object with a `topic` and a `message_id` for `_corrupt_records`, and drops
   duplicate message ids (the first by file and line wins, as in bronze).
2. Materializes that once into a staging Delta table (`_tmp_raw_load_<batch>`), and reads
   every topic from it: the notebook's fix for re-reading 8,533 files per topic.
3. A thread pool over the topics (`min(--parallel, topics)` workers), one lock per target
   table (a child table such as `currentprice` is shared by topics): each topic infers
   its payloads' schema (Spark's JSON inference), flattens nested objects into `a__b`
   columns and the envelope's other fields into `_meta__<field>`, writes each array path
   to a child table (`_id` md5 of root id, table, path, parent id and index; `_parent_id`,
   `_root_id`, `_idx`; a `value` column for arrays of scalars), every row with bronze's
   lineage columns, and appends each table to Delta under that table's lock.
4. Writes `_corrupt_records`, drops the staging table.

Tables go to `OUT_DIR/<table>` (Delta). Prints the JVM's start (creating the
SparkSession: the process's wall time counts it, the next figure does not), then one
line: seconds from the SparkSession's creation to the end, lines, messages, corrupt,
duplicates, tables.
Exit code 1 when corrupt lines were kept (like bronze), else 0.

Known differences from bronze: Spark's JSON inference (a field that is a number in some
messages and a string in others becomes a string; an integer beyond int64 a double or a
string; no `_rescued_data`), no `_run_control`, no replace of an earlier load (OUT_DIR is
rewritten), an empty array is not kept as `[]` in the parent, `.gz` files are not read.
"""
import argparse
import glob
import os
import re
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LINEAGE = ["_batch_id", "_landing_path", "_topic", "_source_file", "_line", "_loaded_at"]
RESERVED = {"_id", "_rescued_data", "_parent_id", "_root_id", "_idx", *LINEAGE}


def sanitize(name):
    return re.sub(r"[^a-z0-9_]", "_", name.lower())[:128]


def unique(name, taken):
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


def batch_key(batch):
    folder = os.path.basename(os.path.normpath(batch))
    batch_id = folder.split("=", 1)[1] if folder.startswith("batch_id=") else folder
    parent = os.path.dirname(os.path.abspath(os.path.normpath(batch)))
    return batch_id, "/".join(parent.split(os.sep)[-2:])


def data_files(batch):
    names = sorted(
        n for n in os.listdir(batch)
        if not n.startswith((".", "_")) and n.endswith((".jsonl", ".json")) and n != "manifest.json"
        and os.path.isfile(os.path.join(batch, n))
    )
    return [os.path.join(os.path.abspath(batch), n) for n in names]


def session(parallel_jobs):
    from pyspark.sql import SparkSession

    jars = sorted(glob.glob(os.path.join(os.environ.get("BRONZE_JVM", os.path.join(REPO, ".emulators/jvm")), "spark", "*.jar")))
    if not jars:
        sys.exit("no Delta jars under .emulators/jvm/spark: run scripts/test once (it copies them from Maven Central)")
    spark = (
        SparkSession.builder.master("local[2]").appName("spark-same-work")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "4g"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Writer:
    """Appends to Delta tables under `out`, one lock per table (the notebook's
    `_get_table_write_lock`)."""

    def __init__(self, out):
        self.out = out
        self.locks, self.guard = {}, threading.Lock()

    def append(self, df, table):
        with self.guard:
            lock = self.locks.setdefault(table, threading.Lock())
        with lock:
            (df.write.format("delta").mode("append").option("mergeSchema", "true")
             .save(os.path.join(self.out, table)))


class Names:
    """Table names as bronze makes them: topics sanitised (`t_` before one starting with
    `_`), a child table by its array's path, shared by every topic with that path."""

    def __init__(self):
        self.taken, self.children, self.lock = {"_corrupt_records"}, {}, threading.Lock()

    def topic(self, topic):
        name = sanitize(topic)
        if not name or name.startswith("_"):
            name = "t_" + name
        with self.lock:
            return unique(name, self.taken)

    def child(self, parts):
        with self.lock:
            key = tuple(parts)
            if key not in self.children:
                base = "__".join(parts)
                if not base or base.startswith("_"):
                    base = "c_" + base
                self.children[key] = unique(base, self.taken)
            return self.children[key]


def flat_columns(F, T, col, dtype, prefix, taken, arrays, parts, pointer):
    """Columns of struct column `col` flattened to `a__b`; its arrays collected apart."""
    out = []
    for f in dtype.fields:
        c, p = col.getField(f.name), prefix + [sanitize(f.name)]
        ptr = pointer + "/" + f.name.replace("~", "~0").replace("/", "~1")
        if isinstance(f.dataType, T.StructType):
            out += flat_columns(F, T, c, f.dataType, p, taken, arrays, parts + [sanitize(f.name)], ptr)
        elif isinstance(f.dataType, T.ArrayType):
            arrays.append((c, f.dataType.elementType, parts + [sanitize(f.name)], ptr))
        else:
            out.append(c.alias(unique("__".join(p), taken)))
    return out


def handle_topic(spark, staged, topic, names, writer):
    """One topic: its payloads' schema inferred, flattened, its tables appended."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rows = staged.where(F.col("_topic") == topic)
    # The payloads' schema, inferred by Spark's JSON reader over the topic's payload text
    # (as `spark.read.json` of a Dataset[String], without a trip through Python).
    payloads = rows.where(F.col("_payload").isNotNull()).select("_payload")._jdf
    text = getattr(payloads, "as")(spark._jvm.org.apache.spark.sql.Encoders.STRING())
    schema = DataFrame(spark._jsparkSession.read().json(text), spark).schema
    meta_keys = sorted({k for r in rows.select(F.map_keys("_meta")).distinct().collect() for k in (r[0] or [])})
    taken = set(RESERVED)
    cols = [F.col("_meta").getItem(k).alias(unique(f"_meta__{sanitize(k)}", taken)) for k in meta_keys]
    arrays = []
    parsed = rows.withColumn("_j", F.from_json("_payload", schema))
    if isinstance(schema, T.StructType) and schema.fields:
        cols += flat_columns(F, T, F.col("_j"), schema, [], taken, arrays, [], "")
    name = names.topic(topic)
    writer.append(parsed.select("_id", *LINEAGE, *cols), name)
    source = parsed.withColumn("_root_id", F.col("_id"))
    for expr, elem, parts, pointer in arrays:
        child(spark, source, expr, elem, parts, pointer, names, writer, 1)
    return name


def child(spark, source, expr, elem, parts, pointer, names, writer, depth):
    """Rows of one array (and, recursively, of the arrays in its elements)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    table = names.child(parts)
    e = f"_e{depth}"
    exploded = source.select(
        "_root_id", F.col("_id").alias("_parent_id"), *LINEAGE,
        F.posexplode(expr).alias("_idx", e),
    )
    keyed = exploded.withColumn("_id", F.md5(F.concat_ws(
        chr(31), "_root_id", F.lit(table), F.lit(pointer), "_parent_id", F.col("_idx").cast("string"))))
    taken = set(RESERVED)
    arrays = []
    if isinstance(elem, T.StructType):
        cols = flat_columns(F, T, F.col(e), elem, [], taken, arrays, parts, pointer + "/*")
    elif isinstance(elem, T.ArrayType):
        cols = [F.to_json(F.col(e)).alias("value")]
    else:
        cols = [F.col(e).alias("value")]
    head = ["_id", "_parent_id", "_root_id", F.col("_idx").cast("long").alias("_idx"), *LINEAGE]
    writer.append(keyed.select(*head, *cols), table)
    for sub, sub_elem, sub_parts, sub_ptr in arrays:
        child(spark, keyed, sub, sub_elem, sub_parts, sub_ptr, names, writer, depth + 1)


def stage(spark, files, batch_id, landing, loaded_at, out):
    """The batch read once into a Delta table of its lines (numbered, envelopes parsed,
    corrupt ones marked); from it the staging table of the messages (duplicates dropped)
    every topic reads, and the corrupt lines."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    lines = (
        spark.read.text(files)
        .withColumn("_source_file", F.input_file_name())
        .withColumn("_order", F.monotonically_increasing_id())
        .withColumn("_line", F.row_number().over(Window.partitionBy("_source_file").orderBy("_order")).cast("long"))
        .where(F.trim(F.col("value")) != "")
        .withColumn("_env", F.from_json("value", "MAP<STRING,STRING>"))
        .withColumn(
            "_reason",
            F.when(F.col("_env").isNull(), F.lit("invalid JSON or not a JSON object"))
            .when(F.col("_env").getItem("topic").isNull(), F.lit("missing topic field `topic`"))
            .when(F.col("_env").getItem("message_id").isNull(), F.lit("missing id field `message_id`")),
        )
        .drop("_order")
    )
    all_lines = os.path.join(out, f"_tmp_raw_lines_{sanitize(batch_id)}")
    lines.write.format("delta").mode("overwrite").save(all_lines)
    lines = spark.read.format("delta").load(all_lines)
    stamp = [F.lit(batch_id).alias("_batch_id"), F.lit(landing).alias("_landing_path")]
    loaded = F.lit(loaded_at).cast("timestamp").alias("_loaded_at")
    corrupt = lines.where(F.col("_reason").isNotNull()).select(
        *stamp, "_source_file", "_line", F.col("value").alias("_corrupt_record"), "_reason", loaded)
    first = Window.partitionBy(F.col("_env").getItem("message_id")).orderBy("_source_file", "_line")
    ranked = lines.where(F.col("_reason").isNull()).withColumn("_rank", F.row_number().over(first))
    staged = ranked.where(F.col("_rank") == 1).select(
        F.col("_env").getItem("message_id").alias("_id"), *stamp,
        F.col("_env").getItem("topic").alias("_topic"), "_source_file", "_line", loaded,
        F.col("_env").getItem("payload").alias("_payload"),
        F.map_filter("_env", lambda k, v: ~k.isin("topic", "message_id", "payload")).alias("_meta"),
    )
    tmp = os.path.join(out, f"_tmp_raw_load_{sanitize(batch_id)}")
    staged.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(tmp)
    staged = spark.read.format("delta").load(tmp)
    good = lines.where(F.col("_reason").isNull()).count()
    messages = staged.count()
    return staged, corrupt, [tmp, all_lines], good, good - messages


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("batch")
    ap.add_argument("out")
    ap.add_argument("--parallel", type=int, default=32, help="the thread pool's cap (MAX_PARALLEL)")
    args = ap.parse_args()
    process_start = time.perf_counter()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    files = data_files(args.batch)
    if not files:
        sys.exit(f"no data files in {args.batch}")
    batch_id, landing = batch_key(args.batch)
    spark = session(args.parallel)
    started = time.perf_counter()
    loaded_at = datetime.now(timezone.utc).isoformat()
    staged, corrupt, tmp, good, duplicates = stage(spark, files, batch_id, landing, loaded_at, args.out)
    topics = sorted(r[0] for r in staged.select("_topic").distinct().collect())
    names, writer = Names(), Writer(args.out)
    with ThreadPoolExecutor(max_workers=max(1, min(args.parallel, len(topics)))) as pool:
        list(pool.map(lambda t: handle_topic(spark, staged, t, names, writer), topics))
    n_corrupt = corrupt.count()
    if n_corrupt:
        writer.append(corrupt, "_corrupt_records")
    for t in tmp:  # DROP TABLE of the staging tables
        shutil.rmtree(t, ignore_errors=True)
    wall = time.perf_counter() - started
    tables = len({*names.children.values()}) + len(topics) + (1 if n_corrupt else 0)
    lines = good + n_corrupt
    print(f"jvm start {started - process_start:.3f} s")
    print(f"{wall:.3f} s, {lines} lines, {good - duplicates} messages, {n_corrupt} corrupt, "
          f"{duplicates} duplicates, {tables} tables")
    spark.stop()
    return 1 if n_corrupt else 0


if __name__ == "__main__":
    sys.exit(main())
