"""The layers hold: the import contracts (pyproject.toml, ``[tool.importlinter]``) pass, and the torch-free
layers really load without torch or transformers, so ``kdgrid plan``, the store, the tables and the report start
in a fraction of a second and run where torch is not installed."""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import kdgrid
import kdgrid.analysis
import kdgrid.grid
import kdgrid.report
import kdgrid.store
from kdgrid.core.method_registry import registered_methods

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers")


def _modules(package: object) -> list[str]:
    return [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]  # type: ignore[attr-defined]


def _contract(contract_id: str) -> dict[str, object]:
    """A contract of pyproject.toml's ``[tool.importlinter]``, by its id."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def _expanded(expression: str) -> list[str]:
    """A contract's module expression as module names: a package with every module below it, a ``*`` matched
    against the modules that exist."""
    if "*" in expression:
        prefix, _, suffix = expression.partition(".*")
        package = importlib.import_module(prefix)
        names = [m.name for m in pkgutil.iter_modules(package.__path__, prefix + ".")]
        return [n + suffix for n in names if importlib.util.find_spec(n + suffix) is not None]
    module = importlib.import_module(expression)
    return [expression, *(_modules(module) if hasattr(module, "__path__") else [])]


# The one list of torch-free modules: the contract's sources (pyproject.toml), walked.
TORCH_FREE = [name for expression in _contract("torch-free-readers")["source_modules"] for name in _expanded(expression)]


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
    assert {"kdgrid.core.methods.ctkd.spec", "kdgrid.core.options", "kdgrid.core.method_registry"} <= set(TORCH_FREE)
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
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout


def test_every_top_level_module_has_a_layer() -> None:
    """A module the layers contract does not name is unconstrained: a new one must be given its layer."""
    layers = _contract("layers")["layers"]
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


@pytest.mark.parametrize("command", ["plan", "status"])
def test_plan_and_status_of_a_new_store_do_not_import_pandas(command: str, tmp_path: Path) -> None:
    """A store without rows is not read (`kdgrid.grid.state.sweep_state`), so pandas (a third of a second, the
    largest part of the front door's measured start-up: benchmarks/cli_latency.py) is not imported."""
    imported = _modules_imported_by(["-m", "kdgrid.cli", command, "table5_single_match", "--store", str(tmp_path)])
    assert "kdgrid.grid.state" in imported  # the command ran
    assert "pandas" not in imported


def test_the_import_report_sees_a_heavy_module() -> None:
    """The check above can fail: importing the tokenizer module shows it and transformers in the report."""
    imported = _modules_imported_by(["-c", "import kdgrid.core.data.tokenization"])
    assert {"kdgrid.core.data.tokenization", "transformers"} <= imported


def test_every_method_dependency_is_declared_in_its_spec_and_allowed_by_the_contract() -> None:
    """The independence contract's exceptions are exactly the dependencies the methods' specs declare."""
    allowed = set()
    for line in _contract("methods-independent").get("ignore_imports", []):
        importer, _, imported = (part.strip() for part in line.partition("->"))
        allowed.add((importer.split(".")[3], imported.split(".")[3]))  # kdgrid.core.methods.<name>...
    declared = {(spec.name, other) for spec in registered_methods() for other in spec.depends_on}
    # a declared dependency may need no exception (DOT's is on the registry's list, not an import)
    assert allowed <= declared, allowed - declared
    assert ("dot", "grad_split") in declared


def test_the_core_keeps_its_registries_at_the_top_and_everything_else_in_rooms() -> None:
    """At most 15 modules at the core's top level; every sub-package of the core is a room of the rooms contract."""
    import kdgrid.core

    top = [m for m in pkgutil.iter_modules(kdgrid.core.__path__)]
    modules = sorted(m.name for m in top if not m.ispkg)
    assert len(modules) <= 15, modules
    rooms = {m.name for m in top if m.ispkg}
    assert rooms == set(_contract("core-rooms")["layers"])


def test_no_import_cycle_even_counting_type_only_imports(tmp_path: Path) -> None:
    """The contracts ignore imports under ``TYPE_CHECKING``; a cycle made of them is still a cycle a reader must
    untangle: with them counted, the no-cycles contract still holds."""
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    config = (ROOT / "pyproject.toml").read_text()
    assert "exclude_type_checking_imports = true" in config
    counted = tmp_path / "contracts.toml"
    counted.write_text(config.replace("exclude_type_checking_imports = true", "exclude_type_checking_imports = false"))
    done = subprocess.run(
        [lint, "--config", str(counted), "--no-cache", "--contract", "no-cycles"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert "no import cycle between sibling packages or modules KEPT" in done.stdout, done.stdout[-3000:]
