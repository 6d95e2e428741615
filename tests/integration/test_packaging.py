"""What the product wheel ships (issue 30): the manager, the worker and the plugin SDK, neither
the benchmarks (their own distribution, bench/pyproject.toml) nor the tests; and `populace
bench` without the benchmarks says so in one line."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _source(tmp: Path) -> Path:
    """What a build of the root project reads, copied: a build writes build/ and egg-info
    where it runs, which the checkout should not collect."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    for name in ("backend", "worker_server", "populace", "bench", "tests"):
        shutil.copytree(ROOT / name, source / name, ignore=skip)
    return source


def _wheel(source: Path, out: Path) -> list[str]:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_product_wheel_ships_neither_bench_nor_tests(tmp_path):
    source = _source(tmp_path)
    names = _wheel(source, tmp_path / "product")
    tops = {name.split("/")[0] for name in names}
    assert {"backend", "worker_server", "populace"} <= tops, tops
    assert not {"bench", "tests"} & tops, tops
    assert "backend/cli.py" in names and "backend/validate/data/gama_bench.json" in names
    # The benchmarks are a wheel of their own.
    bench = _wheel(source / "bench", tmp_path / "bench")
    assert "bench/network.py" in bench and not [n for n in bench if n.startswith("backend/")]


def test_populace_bench_without_the_benchmarks_says_how_to_get_them():
    # As on a node that installed the product only: `bench` cannot be imported.
    code = (
        "import sys; sys.modules['bench'] = None; sys.argv = ['populace', 'bench', 'graph'];"
        "from backend.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install -e ./bench" in lines[0], done.stderr
