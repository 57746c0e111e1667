"""`run_sweep(..., make_checkpoints=True)` through the SLURM executor (the local single-node cluster of the launch
tests: one `kdgrid.pretrain.slurm` job per checkpoint, submitted together) and through Ray (a local runtime: one
task per checkpoint). Two tiny students, so two checkpoints; the trials then run through the fake job function
of the launch tests (they train nothing: the checkpoints are what is tested here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.needed import recipe_for_trial
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.grid import load_sweep
from kdgrid.store import latest_state, read_store
from kdgrid.sweep_run import RunOptions, run_sweep
from slurm.local_cluster import LocalCluster
from tests.launch.conftest import REPO_ROOT
from tests.pretrain.test_make_checkpoints import recipe_file, sweep_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
FAKE_JOB = "tests.launch.fakes:job_to_store"


def _two_recipes(
    tmp_path: Path, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[PretrainRecipe]]:
    """A sweep of two students from one recipe file, and their two recipes (none made yet)."""
    # Job processes (SLURM tasks, Ray workers, the children they start) import kdgrid and the fakes from here.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    sweep = sweep_file(tmp_path, recipe_file(tmp_path, corpus), students="w16-l2-h2-f32, w32-l2-h2-f64")
    uses = [recipe_for_trial(planned.trial) for planned in load_sweep(sweep).trials]
    recipes = [use.recipe for use in uses if use is not None]
    assert len({r.key for r in recipes}) == 2 and not any(artifacts.exists(r) for r in recipes)
    return sweep, recipes


def _check_made(lines: list[str], recipes: list[PretrainRecipe], store: Path, log_in: str) -> None:
    for recipe in recipes:
        assert artifacts.exists(recipe)
        [line] = [line for line in lines if f"key {recipe.key})" in line and line.startswith("checkpoint ")]
        assert line.startswith("checkpoint made in ") and log_in in line, line
    frame = read_store(store)
    assert len(frame) == 2 and set(latest_state(frame)["state"]) == {"done"}


def test_slurm_makes_each_checkpoint_as_one_job_then_runs_the_trials(
    slurm_cluster: LocalCluster, tmp_path: Path, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep, recipes = _two_recipes(tmp_path, corpus, monkeypatch)
    lines: list[str] = []
    store = tmp_path / "store"
    options = RunOptions(executor="slurm", executor_settings={"profile": "local", "job_fn": FAKE_JOB,
                         "poll_interval_s": 1.0}, preflight=False, make_checkpoints=True)  # fmt: skip
    outcome = run_sweep(sweep, store, options, log=lines.append)
    assert outcome.ok, lines
    _check_made(lines, recipes, store, log_in=".slurm/")  # submitit's folder of the checkpoint's job
    for recipe in recipes:
        info = artifacts.read_manifest(artifacts.artifact_dir(recipe))
        assert info is not None and info["world_size"] == 1  # the local profile has no GPU: one task per node


def test_ray_makes_each_checkpoint_as_one_task_then_runs_the_trials(
    tmp_path: Path, corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    sweep, recipes = _two_recipes(tmp_path, corpus, monkeypatch)
    lines: list[str] = []
    store = tmp_path / "store"
    options = RunOptions(executor="ray", executor_settings={"ray_num_cpus": 2, "job_fn": FAKE_JOB},
                         preflight=False, make_checkpoints=True)  # fmt: skip
    outcome = run_sweep(sweep, store, options, log=lines.append)
    assert outcome.ok, lines
    _check_made(lines, recipes, store, log_in=".ray.log")
    assert any(line.startswith("ray: 2 checkpoint task(s) submitted") for line in lines)
