"""The layers hold: the import contracts (pyproject.toml, ``[tool.importlinter]``) pass, and the torch-free
layers really load without torch or transformers, so ``kdgrid plan``, the store, the tables and the report start
in a fraction of a second and run where torch is not installed."""

from __future__ import annotations

import json
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kdgrid
import kdgrid.analysis
import kdgrid.grid
import kdgrid.report
import kdgrid.store

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers")


def _modules(package: object) -> list[str]:
    return [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]  # type: ignore[attr-defined]


TORCH_FREE = [
    "kdgrid.trial",
    "kdgrid.result",
    "kdgrid.predictions",
    "kdgrid.paper",
    "kdgrid.metrics",
    "kdgrid.core.model.shapes",
    "kdgrid.core.pretrained.needed",
    "kdgrid.core.knowledge",
    "kdgrid.core.matching",
    "kdgrid.core.options",
    "kdgrid.core.schedules",
    "kdgrid.core.example_weights",
    *_modules(kdgrid.grid),
    *_modules(kdgrid.store),
    *_modules(kdgrid.report),
    *_modules(kdgrid.analysis),
]


def _heavy_modules_after_importing(names: list[str]) -> list[str]:
    """Which of torch / transformers a fresh interpreter holds after importing ``names``."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_torch_free_layers_import_without_torch_or_transformers() -> None:
    assert {"kdgrid.grid.expand", "kdgrid.store.write", "kdgrid.analysis.tidy", "kdgrid.report.build"} <= set(
        TORCH_FREE
    )
    assert _heavy_modules_after_importing(TORCH_FREE) == []


def test_the_check_sees_a_module_that_imports_torch() -> None:
    assert "torch" in _heavy_modules_after_importing(["kdgrid.core.losses"])


def test_the_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(lint).exists():
        pytest.fail("lint-imports is not installed: install the dev extra (import-linter)")
    done = subprocess.run([lint, "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_every_top_level_module_has_a_layer() -> None:
    """A module the layers contract does not name is unconstrained: a new one must be given its layer."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    named = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    top_level = {f"kdgrid.{m.name}" for m in pkgutil.iter_modules(kdgrid.__path__)}
    assert top_level - named == set()
    assert named - top_level == set()


# What `kdgrid plan` and `kdgrid status` never need: the deep-learning stack, the tokenizer module that loads
# transformers, the retrieval index, the executors and the plotting and statistics libraries (each costs a
# measurable part of a second at start-up: benchmarks/cli_latency.py).
NOT_FOR_PLANNING = (
    *HEAVY,
    "tokenizers",
    "datasets",
    "kdgrid.core.data.tokenization",
    "faiss",
    "ray",
    "submitit",
    "mlflow",
    "matplotlib",
    "scipy",
    "sklearn",
)


def _modules_imported_by(argv: list[str]) -> set[str]:
    """Every module a fresh ``python ARGV`` imports (from ``-X importtime``'s report); it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    }


@pytest.mark.parametrize(
    ("command", "sweep", "rows"),
    [("plan", "table5_single_match", False), ("status", "table5_single_match", False), ("status", "demo", True)],
)
def test_plan_and_status_import_no_heavy_module(command: str, sweep: str, rows: bool, tmp_path: Path) -> None:
    store = tmp_path / "store"
    if rows:  # done, failed and pending trials: status reads rows, degenerate checks, failures
        from tests.report.store_testing import make_store

        make_store(store)
    imported = _modules_imported_by(["-m", "kdgrid.cli", command, sweep, "--store", str(store)])
    assert {"kdgrid.grid.state", "kdgrid.grid.plan"} <= imported  # the command ran, and the report saw it
    assert sorted(imported & set(NOT_FOR_PLANNING)) == []


def test_the_import_report_sees_a_heavy_module() -> None:
    """The check above can fail: importing the tokenizer module shows it and transformers in the report."""
    imported = _modules_imported_by(["-c", "import kdgrid.core.data.tokenization"])
    assert {"kdgrid.core.data.tokenization", "transformers"} <= imported
