"""Every paper sweep (Tables 1-8), sliced (`tests.hub.paper_sweeps`), runs through kdgrid's unchanged Hub loading
code against the fixture, offline, with the local executor and with Ray: every trial ends done, and the paper's
table fills from the rows (`kdgrid.analysis.tables_report`, and `kdgrid tables` through the CLI).

Tables 1 and 2 name their general-distillation checkpoints by recipe (``init_recipe: paper``): stand-ins are
published as those recipes' artifacts in the test's kdgrid cache, and the test runs in a fresh working directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.analysis.tables_report import build_report, load_tidy
from kdgrid.cli import app
from kdgrid.grid import load_sweep
from kdgrid.sweep_run import RunOptions, SweepRun, run_sweep
from tests.hub.paper_sweeps import SLICES, Slice, write_general_distillation_checkpoints, write_sliced_sweep

REPO_ROOT = Path(__file__).resolve().parents[2]
Switch = Callable[[Path], dict[str, str]]
Prepare = Callable[[str], tuple[Path, Slice]]


@pytest.fixture
def sliced_sweep(
    paper_hub: Path, use_hub: Switch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Prepare:
    """``prepare(name)``: the fixture's cache offline, the working directory a fresh folder holding the sliced
    sweep file and its general-distillation checkpoints; returns the file and its slice. The repository root
    goes first on ``PYTHONPATH`` for job processes (Ray actors import this checkout's kdgrid)."""
    use_hub(paper_hub)
    monkeypatch.chdir(tmp_path)
    saved = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), *([saved] if saved else [])]))

    def prepare(name: str) -> tuple[Path, Slice]:
        piece = SLICES[name]
        path = write_sliced_sweep(piece, tmp_path / "sweeps")
        write_general_distillation_checkpoints(load_sweep(path), tmp_path)
        return path, piece

    return prepare


def check_done_and_tabled(run: SweepRun, piece: Slice, store: Path) -> None:
    assert [(f.study, f.error) for f in run.failed_now] == []
    assert run.after.done == run.trials and run.after.pending == 0 and run.trials == len(run.ran) > 0
    (view,) = build_report(load_tidy(store), piece.table, store).views
    empty = []
    for cell in piece.cells:
        block = view.block(cell.block)
        if block.cell(cell.row, block.column(cell.column, cell.group)).missing:
            empty.append(cell)
    assert empty == [], f"cells shown as '-' in table {piece.table}"
    result = CliRunner().invoke(app, ["tables", piece.table, "--store", str(store), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.output.count("\n") > 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLICES))
def test_a_paper_sweep_sliced_runs_locally_and_fills_its_table(
    name: str, sliced_sweep: Prepare, tmp_path: Path
) -> None:
    path, piece = sliced_sweep(name)
    store = tmp_path / "store"
    run = run_sweep(path, store, RunOptions(executor="local"))
    check_done_and_tabled(run, piece, store)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["table3_teacher", "table1_init"])
def test_a_paper_sweep_sliced_runs_on_ray_and_fills_its_table(
    name: str, sliced_sweep: Prepare, tmp_path: Path
) -> None:
    """Table 3 (both teachers) and Table 1 (relative ``init_from``: Ray Tune gives each trial its own working
    directory)."""
    path, piece = sliced_sweep(name)
    store = tmp_path / "store"
    run = run_sweep(
        path,
        store,
        RunOptions(executor="ray", executor_settings={"ray_num_cpus": 2, "ray_verbose": 0}),
    )
    check_done_and_tabled(run, piece, store)
