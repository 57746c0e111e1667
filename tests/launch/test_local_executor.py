"""The local executor, the worker function and the executor registry, with fake jobs (no training)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from kdgrid.errors import ConfigError
from kdgrid.grid import checkpoint_dir_for
from kdgrid.launch import get_executor, worker
from kdgrid.launch.local import LocalExecutor, _progress_title
from kdgrid.result import TrialResult
from kdgrid.store import latest_state, read_store
from kdgrid.trial import Trial
from tests.launch.fakes import crashing_job, fake_run_job, job_to_store, store_studies


def trial(seed: int, **options: object) -> Trial:
    return Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=seed, options=options)


def states(store: Path) -> dict[str, str]:
    return latest_state(read_store(store))["state"].to_dict()


def alternating(jobs: list[list[Trial]]) -> dict[str, str]:
    """``studies`` putting the trials of every job alternately into the studies "a" and "b" (mixed jobs)."""
    return {t.trial_id: "ab"[i % 2] for job in jobs for i, t in enumerate(job)}


def test_jobs_run_here_one_after_another(tmp_path: Path) -> None:
    jobs = [[trial(1), trial(2)], [trial(3, test_raise="bad luck"), trial(4)]]
    executor = LocalExecutor(job_fn=job_to_store, progress=False)
    executor.run(jobs, tmp_path, sweep="s", studies=alternating(jobs))
    got = states(tmp_path)
    assert got == {trial(1).trial_id: "done", trial(2).trial_id: "done", trial(3, test_raise="bad luck").trial_id:
                   "failed", trial(4).trial_id: "done"}  # fmt: skip
    assert (executor.summary.done, executor.summary.failed, executor.summary.missing) == (3, 1, 0)
    frame = read_store(tmp_path)
    assert set(frame["sweep"]) == {"s"}
    assert store_studies(tmp_path) == alternating(jobs)  # each job held both studies; each row has its own
    failed = frame[frame["status"] == "failed"].iloc[0]
    assert failed["error_type"] == "RuntimeError" and failed["error_message"] == "bad luck"


def test_a_job_function_that_crashes_fails_its_own_trials_only(tmp_path: Path) -> None:
    calls: list[dict[str, str]] = []

    def sometimes(trials, store_dir, *, sweep, studies, checkpoint_dir):
        calls.append(dict(studies))
        if trials[0].seed == 1:
            crashing_job(trials, store_dir, sweep=sweep, studies=studies)
        job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir)

    jobs = [[trial(1), trial(2)], [trial(3)]]
    LocalExecutor(job_fn=sometimes, progress=False).run(jobs, tmp_path, sweep="s", studies=alternating(jobs))
    # each job is given the studies of its own trials only
    assert calls == [{trial(1).trial_id: "a", trial(2).trial_id: "b"}, {trial(3).trial_id: "a"}]
    frame = read_store(tmp_path)
    crashed = frame[frame["status"] == "failed"]
    assert len(crashed) == 2 and set(crashed["error_type"]) == {"RuntimeError"}
    assert crashed["error_message"].str.contains("refusing 2 trial").all()
    assert states(tmp_path)[trial(3).trial_id] == "done"
    assert store_studies(tmp_path) == alternating(
        jobs
    )  # the executor's failure rows record each trial's study


def test_a_worker_killed_with_sigkill_costs_only_its_unfinished_trials(tmp_path: Path) -> None:
    marker = tmp_path / "killed-once"
    victim = trial(2, test_kill_once=str(marker))
    jobs = [[trial(1), victim, trial(3)], [trial(4), trial(5)]]
    executor = LocalExecutor(job_fn=job_to_store, workers=2, progress=False, poll_s=0.05)
    executor.run(jobs, tmp_path / "store", sweep="s", studies=alternating(jobs))
    assert marker.exists()
    frame = read_store(tmp_path / "store")
    got = latest_state(frame)["state"].to_dict()
    # fake_run_job runs a job's trials in id order; whatever finished before the kill is done, the rest failed
    finished = {t.trial_id for t in jobs[0] if got[t.trial_id] == "done"}
    assert victim.trial_id not in finished
    assert got[trial(4).trial_id] == got[trial(5).trial_id] == "done"
    died = frame[frame["error_type"] == "WorkerDied"]
    assert set(died["trial_id"]) == {t.trial_id for t in jobs[0]} - finished
    assert died["error_message"].str.contains("SIGKILL").all()
    assert len(frame) == 5  # one row per trial, no duplicates
    assert store_studies(tmp_path / "store") == alternating(
        jobs
    )  # rows from the workers and for the dead one


def test_worker_writes_rows_as_trials_finish_and_failure_rows_after_a_crash(tmp_path: Path) -> None:
    def half_then_crash(trials, *, checkpoint_dir=None, on_result=None, **_):
        fake_run_job(trials[:1], on_result=on_result)
        raise MemoryError("teacher does not fit")

    job = [trial(1), trial(2), trial(3)]
    worker.run_job_to_store(
        job,
        tmp_path,
        sweep="s",
        studies=alternating([job]),
        checkpoint_dir=tmp_path / "ck",
        run_job=half_then_crash,
    )
    frame = read_store(tmp_path)
    assert len(frame) == 3
    assert frame.set_index("trial_id").loc[trial(1).trial_id, "status"] == "done"
    failed = frame[frame["status"] == "failed"]
    assert set(failed["error_type"]) == {"MemoryError"} and (tmp_path / "ck").is_dir()
    assert store_studies(tmp_path) == alternating([job])


def test_worker_writes_results_the_core_returned_without_reporting(tmp_path: Path) -> None:
    def quiet(trials, **_):
        return [TrialResult(trial=trials[0], status="done")]  # reports nothing, forgets the second trial

    worker.run_job_to_store(
        [trial(1), trial(2)], tmp_path, sweep="s", studies={trial(2).trial_id: "b"}, run_job=quiet
    )
    got = latest_state(read_store(tmp_path))
    assert got.loc[trial(1).trial_id, "state"] == "done"
    assert got.loc[trial(2).trial_id, "error_type"] == "MissingResult"
    # a trial `studies` does not name records no study
    assert store_studies(tmp_path) == {trial(1).trial_id: "", trial(2).trial_id: "b"}


def test_the_progress_bar_names_the_study_or_counts_the_studies() -> None:
    assert _progress_title("table2", {"x": "fixed_flops", "y": "fixed_flops"}) == "table2/fixed_flops"
    assert _progress_title("table2", {"x": "fixed_flops", "y": "fixed_params"}) == "table2 (2 studies)"
    assert _progress_title("s", {"x": ""}) == "s"


def test_get_executor_validates_prefixed_settings() -> None:
    local = get_executor("local", local_workers=2, local_progress=False)
    assert isinstance(local, LocalExecutor) and local.settings.workers == 2
    with pytest.raises(ConfigError, match="unknown executor 'lokal'; allowed: local, ray, slurm"):
        get_executor("lokal")
    with pytest.raises(ConfigError, match="slurm_partition belong to another executor"):
        get_executor("local", slurm_partition="gpu")
    with pytest.raises(ConfigError, match=r"local_wrokers.*allowed: local_workers, local_start_method"):
        get_executor("local", local_wrokers=2)
    with pytest.raises(ConfigError, match="must carry the prefix 'local_'"):
        get_executor("local", workers=2)
    with pytest.raises(ConfigError, match="local_workers: expected a whole number"):
        get_executor("local", local_workers=-1)
    with pytest.raises(ConfigError, match="cannot be imported"):
        get_executor("local", job_fn="tests.launch.fakes:no_such_function")
    assert get_executor("local", job_fn="tests.launch.fakes:job_to_store").job_fn is job_to_store


def test_a_trial_killed_mid_epoch_continues_from_its_checkpoint(tmp_path: Path) -> None:
    """SIGKILL after the first of 4 epochs; `run` marks the trial failed, a rerun starts at epoch 2 (the
    checkpoint folder under the store is the same for the job on every attempt)."""

    slow = trial(7, test_epochs=4, test_seconds=4.0)
    store = tmp_path / "store"
    progress = checkpoint_dir_for(store, [slow]) / f"{slow.trial_id}.epochs"
    executor = LocalExecutor(job_fn=job_to_store, workers=1, progress=False, poll_s=0.05)
    runner = threading.Thread(target=executor.run, args=([[slow]], store), kwargs={"sweep": "s"})
    runner.start()
    deadline = time.time() + 60
    while not progress.exists() and time.time() < deadline:
        time.sleep(0.02)
    [child] = multiprocessing.active_children()
    os.kill(child.pid, signal.SIGKILL)
    runner.join(60)
    first = read_store(store)
    assert list(first["status"]) == ["failed"] and first["error_message"].str.contains("SIGKILL").all()
    epochs_before = int(progress.read_text())
    assert 1 <= epochs_before < 4

    LocalExecutor(job_fn=job_to_store, workers=1, progress=False, poll_s=0.05).run([[slow]], store, sweep="s")
    done = read_store(store)
    done = done[done["status"] == "done"]
    assert len(done) == 1

    assert json.loads(done.iloc[0]["extra_json"])["resumed_from_epoch"] == epochs_before
