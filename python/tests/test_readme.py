"""The README's "From Python and Spark" examples, run as written (in a scratch folder
holding a copy of the fixtures), and what they print."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def python_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python and Spark", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def run(code: str, cwd: Path) -> str:
    # As in an activated virtualenv: Spark's Python workers run the `python3` on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYSPARK_PYTHON", None)
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "fixtures" / "landing", tmp_path / "fixtures" / "landing")
    return tmp_path


def test_the_notebook_example_runs_as_written(scratch: Path) -> None:
    notebook, _ = python_blocks()
    out = run(notebook, scratch)
    assert "20 4 1" in out
    assert "loaded 2026-04-06_001" in out
    assert "[('market/events', 2, 0)]" in out
    assert "16 ['table', 'version', 'files']" in out
    assert "\n22\n" in out, "the report's points: 2 runs in 3 charts, 16 tables"
    assert "16 [] {}" in out, "maintain visited every table"
    assert (scratch / "lakehouse.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_spark_example_runs_as_written(scratch: Path) -> None:
    pytest.importorskip("pyspark")
    _, spark = python_blocks()
    out = run(spark, scratch)
    assert re.search(r"market/events\s*\|\s*2026-04-05_001\s*\|\s*loaded\s*\|\s*150", out), out
    assert re.search(r"market/events\s*\|\s*2026-04-06_001\s*\|\s*loaded", out), out
