"""The Ray executor keeps the driver's working directory: Tune moves each trial into its own folder, but a
sweep's relative paths (``init_from``, a teacher or task directory) mean the directory `kdgrid` ran in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kdgrid.errors import LaunchError
from kdgrid.launch.ray import RayExecutor, run_one_job
from tests.launch import fakes
from tests.launch.fakes import make_trial


def record_cwd(trials, store_dir, *, sweep, studies, checkpoint_dir) -> None:  # type: ignore[no-untyped-def]
    """A job function (module-level: Ray pickles it by reference) that writes where it ran beside the store."""
    (Path(store_dir) / f"cwd-{trials[0].trial_id}.txt").write_text(os.getcwd())
    fakes.job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir)


def test_the_trainable_runs_its_job_in_the_drivers_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray import tune  # Ray takes seconds to import: only the tests that use it pay for it

    monkeypatch.setattr(tune, "report", lambda _: None)
    driver, trial_dir = tmp_path / "driver", tmp_path / "tune-trial"
    driver.mkdir()
    trial_dir.mkdir()
    monkeypatch.chdir(trial_dir)  # where Tune leaves a trial
    trial = make_trial(0)
    run_one_job({"job": 0}, jobs=[[trial]], store_dir=str(tmp_path), sweep="w", studies={},
                job_fn=record_cwd, workdir=str(driver))  # fmt: skip
    assert (tmp_path / f"cwd-{trial.trial_id}.txt").read_text() == str(driver)
    with pytest.raises(LaunchError, match=r"working directory .*nowhere is not reachable on this node"):
        run_one_job({"job": 0}, jobs=[[trial]], store_dir=str(tmp_path), sweep="w", studies={},
                    job_fn=record_cwd, workdir=str(tmp_path / "nowhere"))  # fmt: skip


@pytest.mark.slow
def test_ray_jobs_run_in_the_drivers_working_directory(
    ray_runtime: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = tmp_path / "driver"
    driver.mkdir()
    monkeypatch.chdir(driver)
    jobs = [[make_trial(seed)] for seed in range(2)]
    RayExecutor(job_fn=record_cwd).run(jobs, tmp_path / "store", sweep="w")
    for job in jobs:
        assert (tmp_path / "store" / f"cwd-{job[0].trial_id}.txt").read_text() == str(driver)
