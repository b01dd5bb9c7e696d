"""The engines users run on bronze's tables: Spark with Delta (PySpark with delta-spark's
jars) and the Delta Kernel for Java, beside Python `deltalake`.

`scripts/test` installs everything first: the venv (pyspark pinned to the Spark that
Delta is built for) and the jars, copied from Maven Central by `mvn` into
`.emulators/jvm/spark` and `.emulators/jvm/kernel` (scripts/jvm/pom.xml), then runs these
tests with `BRONZE_BIN` set to the CLI the Rust tests built. One Spark session serves
the whole run; the Kernel reads through one JVM per call of `kernel_read`.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JVM = Path(os.environ.get("BRONZE_JVM", REPO / ".emulators" / "jvm"))
FIXTURE_BATCHES = REPO / "fixtures" / "landing" / "market" / "events"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _jars(kind: str) -> list[str]:
    jars = sorted(str(p) for p in (JVM / kind).glob("*.jar"))
    if not jars:
        pytest.fail(
            f"no {kind} jars under {JVM / kind}: run scripts/test (it copies them from Maven "
            f"Central with `mvn -f scripts/jvm/pom.xml -P{kind} dependency:copy-dependencies`)"
        )
    return jars


def bronze_bin() -> str:
    path = os.environ.get("BRONZE_BIN")
    if not path or not Path(path).is_file():
        pytest.fail(
            f"BRONZE_BIN ({path!r}) is not bronze's CLI: run scripts/test, which builds it "
            "(cargo test) and points BRONZE_BIN at it"
        )
    return path


def bronze(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """Runs bronze's CLI; fails the test unless it exits with one of `ok`."""
    done = subprocess.run([bronze_bin(), *args], capture_output=True, text=True)
    assert done.returncode in ok, f"bronze {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def ingest(lake: Path, batch: Path, *extra: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    return bronze("ingest", str(batch), "--catalog", str(lake), *extra, ok=ok)


def land(root: Path, batch_id: str, lines: list[dict | str], entity: str = "feed/events") -> Path:
    """A batch folder `root/<entity>/batch_id=<batch_id>` with `lines` in one file."""
    folder = root / entity / f"batch_id={batch_id}"
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    (folder / "part-0.jsonl").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def spark():
    """One local Spark session with Delta for the whole run (about 8-15 s to start)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("bronze-engine-tests")
        .config("spark.jars", ",".join(_jars("spark")))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # VACUUM lists a table in this many tasks (10000 by default).
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def kernel_read(requests: list[tuple[Path, int | None]]) -> list[dict]:
    """Each table read by the Delta Kernel for Java at a version (None: the latest):
    `{"version", "schema", "rows"}` or `{"error"}` (scripts/jvm/KernelRead.java)."""
    cp = os.pathsep.join(_jars("kernel"))
    stdin = "".join(f"{p}\t{'latest' if v is None else v}\n" for p, v in requests)
    done = subprocess.run(
        ["java", "-cp", cp, str(REPO / "scripts" / "jvm" / "KernelRead.java")],
        input=stdin,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == len(requests), done.stderr
    return out


def kernel_create(path: Path, columns: str) -> None:
    """An empty table at `path` created by the Delta Kernel for Java's own create-table
    transaction; `columns` as `name type[!], ...` (scripts/jvm/KernelRead.java)."""
    cp = os.pathsep.join(_jars("kernel"))
    done = subprocess.run(
        ["java", "-cp", cp, str(REPO / "scripts" / "jvm" / "KernelRead.java")],
        input=f"create\t{path}\t{columns}\n",
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"path": str(path), "version": 0}, done.stdout


# Rows as comparable values, whichever engine read them.


def canon(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return (v - EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        return {k: canon(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    if hasattr(v, "asDict"):
        return canon(v.asDict(recursive=True))
    raise TypeError(f"no canonical form for {type(v)}: {v!r}")


def canon_kernel(v, kind: str):
    """A Kernel value (KernelRead.java's JSON) of type `kind` as `canon` gives it."""
    if v is None:
        return None
    if kind.startswith("Decimal") or kind.startswith("decimal"):
        return format(decimal.Decimal(v), "f")
    if kind in ("float", "double"):
        return repr(float(v))
    if isinstance(v, dict):
        return {k: canon(x) for k, x in sorted(v.items())}
    return canon(v)


def row_key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def sorted_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=row_key)


def rows_deltalake(path: Path, version: int | None = None) -> list[dict]:
    """Rows as Python `deltalake` reads them: through its `QueryBuilder`, which applies
    column mapping and deletion vectors (`to_pyarrow_table` does neither)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    t = DeltaTable(str(path), version=version)
    table = pa.table(QueryBuilder().register("t", t).execute("SELECT * FROM t").read_all())
    return sorted_rows([{k: canon(x) for k, x in r.items()} for r in table.to_pylist()])


def rows_spark(spark, path: Path, version: int | None = None, where: str | None = None) -> list[dict]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(str(path))
    if where:
        df = df.where(where)
    return sorted_rows([canon(r.asDict(recursive=True)) for r in df.collect()])


def rows_kernel(result: dict) -> list[dict]:
    assert "error" not in result, result
    kinds = {f["name"]: f["type"] for f in result["schema"]}
    return sorted_rows([{k: canon_kernel(x, kinds[k]) for k, x in r.items()} for r in result["rows"]])


def versions(path: Path) -> list[int]:
    """The commit versions of the table's log (every one readers can time-travel to)."""
    return sorted(int(p.name.split(".")[0]) for p in (path / "_delta_log").glob("*.json") if p.name[0].isdigit())


def tables(lake: Path, schema: str = "bronze") -> list[Path]:
    return sorted(p for p in (lake / schema).iterdir() if (p / "_delta_log").is_dir() and not p.name.startswith("_tmp"))


def commit_infos(path: Path) -> dict[int, dict]:
    out = {}
    for v in versions(path):
        for line in (path / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                out[v] = action["commitInfo"]
    return out


def optimize_keeps_rows(spark, lake: Path, table: str) -> list[dict]:
    """Runs `bronze optimize` on `table`, which must commit an OPTIMIZE that leaves the
    rows Spark reads as they were; those rows."""
    path = lake / "bronze" / table
    before = rows_spark(spark, path)
    bronze("optimize", table, "--catalog", str(lake))
    infos = commit_infos(path)
    assert infos[max(infos)]["operation"] == "OPTIMIZE"
    after = rows_spark(spark, path)
    assert after == before
    return after
