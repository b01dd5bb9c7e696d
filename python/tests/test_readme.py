"""The "From Python and Spark" examples (docs/python.md), run as written (in a scratch folder
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


def section(title: str) -> str:
    """The section titled `title` in README.md or a page of `docs/` (the first found): its
    heading's line up to the next heading of the same or a higher level, lines inside
    code blocks never taken for headings."""
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines, level, in_code = [], 0, False
        for line in path.read_text().splitlines():
            if line.startswith("```"):
                in_code = not in_code
            hashes = len(line) - len(line.lstrip("#"))
            if not in_code and hashes and line[hashes:].startswith(" "):
                if level and hashes <= level:
                    break
                if not level and line[hashes:].strip() == title:
                    level = hashes
            if level:
                lines.append(line)
        if level:
            return "\n".join(lines) + "\n"
    raise AssertionError(f"no section {title!r} in README.md or docs/")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", section("From Python and Spark"), re.S)


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
