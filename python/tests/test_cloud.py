"""The package against an object store: moto's S3 server (started here on a free port,
stopped after), credentials only in `storage_options` — also on Spark's executors,
where no environment variable carries them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

import bronze
from conftest import FIRST, SECOND, add, expected

SECRET = "moto-secret-never-printed-7f3a"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """moto's S3 server with buckets `landing` (holding the fixture batches) and `lake`;
    the storage options that reach it."""
    # Nothing of the machine's own cloud settings: the options must carry everything.
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("AWS_", "AZURE_", "GOOGLE_"))}
    port = free_port()
    server = subprocess.Popen(
        # moto with conditional writes that hold (the script says why).
        [sys.executable, str(Path(__file__).parents[2] / "scripts" / "moto_server.py"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:  # ready once it says where it listens
            if "Running on" in line:
                break
        else:
            pytest.fail("moto_server exited before it was ready")
        threading.Thread(target=server.stderr.read, daemon=True).start()
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing",
            aws_secret_access_key=SECRET, region_name="us-east-1",
        )
        for bucket in ("landing", "lake"):
            client.create_bucket(Bucket=bucket)
        for batch in (FIRST, SECOND):
            for f in batch.iterdir():
                client.upload_file(str(f), "landing", f"market/events/{batch.name}/{f.name}")
        yield {
            "aws_endpoint_url": endpoint,
            "aws_allow_http": "true",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": SECRET,
            "aws_region": "us-east-1",
        }
    finally:
        server.terminate()
        server.wait(30)
        os.environ.update(saved)


def s3_rows(catalog: str, options: dict[str, str]) -> dict[str, int]:
    from deltalake import DeltaTable

    rows = {}
    for table in expected(FIRST) | expected(SECOND):
        rows[table] = DeltaTable(f"{catalog}/bronze/{table}", storage_options=options).to_pyarrow_dataset().count_rows()
    return rows


def test_a_batch_loads_into_s3_with_options_only(s3: dict[str, str]) -> None:
    assert not any(k.startswith("AWS_") for k in os.environ)
    batch = f"s3://landing/market/events/{FIRST.name}"
    report = bronze.ingest(batch, "s3://lake/one", storage_options=s3)
    assert report.rows == expected(FIRST)
    again = bronze.ingest(batch, "s3://lake/one", storage_options=s3)
    assert again.rows == expected(FIRST)
    assert s3_rows("s3://lake/one", s3) == expected(FIRST)  # the rerun replaced its rows
    assert report.store_calls, "requests counted per stage"
    assert SECRET not in repr(report) and SECRET not in json.dumps([repr(again)])


def test_a_wrong_key_is_a_storage_error_naming_the_store_not_the_secret(s3: dict[str, str]) -> None:
    wrong = {**s3, "aws_endpoint_url": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(bronze.StorageError) as caught:
        bronze.ingest(f"s3://landing/market/events/{FIRST.name}", "s3://lake/wrong", storage_options=wrong)
    assert "s3://landing" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_backlog_in_s3_over_spark_executors(s3: dict[str, str]) -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from bronze.spark import ingest_pending

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        rows = ingest_pending(spark, "s3://landing/", "s3://lake/spark", storage_options=s3).collect()
    finally:
        spark.stop()
    assert sorted((r.batch_id, r.status) for r in rows) == [(FIRST.name[9:], "loaded"), (SECOND.name[9:], "loaded")]
    assert all(SECRET not in (r.report or "") for r in rows)
    assert s3_rows("s3://lake/spark", s3) == add(expected(FIRST), expected(SECOND))
    assert bronze.pending("s3://landing/", "s3://lake/spark", storage_options=s3) == []
