"""The package as users install it: the wheel built once, installed with each extra into
a fresh virtualenv that holds nothing else, and used there as docs/python.md shows
(Spark's executors running that virtualenv's interpreter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from test_readme import python_blocks


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The dev profile and the tests' target dir: the build `maturin develop` made is reused.
    out = tmp_path_factory.mktemp("dist")
    maturin = Path(sys.executable).parent / "maturin"
    manifest = REPO / "python" / "Cargo.toml"
    cmd = [str(maturin), "build", "--quiet", "--profile", "dev", "-m", str(manifest), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    [built] = out.glob("bronze-*.whl")
    return built


def fresh_venv(root: Path, requirement: str) -> Path:
    """A virtualenv under `root` with `requirement` installed from the wheel and PyPI; its
    interpreter."""
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*pip, requirement], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return env_dir / "bin" / "python"


def run_in(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # As in that virtualenv activated: Spark's Python workers run the `python3` on PATH,
    # and nothing of the test's own environment leaks in.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    env["PATH"] = f"{python.parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run([str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def scratch(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "fixtures" / "landing", tmp_path / "work" / "fixtures" / "landing")
    return tmp_path / "work"


def test_the_spark_extra_runs_the_readme_spark_example(wheel: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path, f"{wheel}[spark]")
    _, spark = python_blocks()
    done = run_in(python, spark, scratch(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2026-04-05_001" in done.stdout and "loaded" in done.stdout, done.stdout
    listed = run_in(python, "import pandas, pyarrow, pyspark; print('ok')", tmp_path)
    assert listed.stdout.strip() == "ok", listed.stderr[-2000:]


def test_the_arrow_extra_gives_pyarrow_tables(wheel: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path, f"{wheel}[arrow]")
    code = (
        "import bronze\n"
        "bronze.ingest('fixtures/landing/market/events/batch_id=2026-04-05_001', './lake')\n"
        "t = bronze.to_arrow(bronze.health('./lake'))\n"
        "print(type(t).__name__, t.num_rows)\n"
    )
    done = run_in(python, code, scratch(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "Table", done.stdout
    assert int(done.stdout.split()[1]) > 0, done.stdout


def test_the_progress_extra_draws_bars_and_the_bare_package_needs_no_pyarrow(wheel: Path, tmp_path: Path) -> None:
    python = fresh_venv(tmp_path, f"{wheel}[progress]")
    code = (
        "import importlib.util, bronze\n"
        "assert importlib.util.find_spec('pyarrow') is None\n"
        "r = bronze.ingest('fixtures/landing/market/events/batch_id=2026-04-05_001', './lake', progress=True)\n"
        "print(r.rows['trade'])\n"
    )
    done = run_in(python, code, scratch(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "20", done.stdout
    assert "%|" in done.stderr, done.stderr[-2000:]
