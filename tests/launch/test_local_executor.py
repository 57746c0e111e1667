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
from kdgrid.launch.local import LocalExecutor
from kdgrid.launch.testing import crashing_job, fake_run_job, job_to_store
from kdgrid.result import TrialResult
from kdgrid.store import latest_state, read_store
from kdgrid.trial import Trial


def trial(seed: int, **options: object) -> Trial:
    return Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=seed, options=options)


def states(store: Path) -> dict[str, str]:
    return latest_state(read_store(store))["state"].to_dict()


def test_jobs_run_here_one_after_another(tmp_path: Path) -> None:
    jobs = [[trial(1), trial(2)], [trial(3, test_raise="bad luck"), trial(4)]]
    executor = LocalExecutor(job_fn=job_to_store, progress=False)
    executor.run(jobs, tmp_path, sweep="s", study="t")
    got = states(tmp_path)
    assert got == {trial(1).trial_id: "done", trial(2).trial_id: "done", trial(3, test_raise="bad luck").trial_id:
                   "failed", trial(4).trial_id: "done"}  # fmt: skip
    assert (executor.summary.done, executor.summary.failed, executor.summary.missing) == (3, 1, 0)
    frame = read_store(tmp_path)
    assert set(frame["sweep"]) == {"s"} and set(frame["study"]) == {"t"}
    failed = frame[frame["status"] == "failed"].iloc[0]
    assert failed["error_type"] == "RuntimeError" and failed["error_message"] == "bad luck"


def test_a_job_function_that_crashes_fails_its_own_trials_only(tmp_path: Path) -> None:
    calls: list[int] = []

    def sometimes(trials, store_dir, *, sweep, study, checkpoint_dir):
        calls.append(len(trials))
        if trials[0].seed == 1:
            crashing_job(trials, store_dir, sweep=sweep, study=study)
        job_to_store(trials, store_dir, sweep=sweep, study=study, checkpoint_dir=checkpoint_dir)

    LocalExecutor(job_fn=sometimes, progress=False).run([[trial(1), trial(2)], [trial(3)]], tmp_path, sweep="s",
                                                        study="t")  # fmt: skip
    assert calls == [2, 1]
    frame = read_store(tmp_path)
    crashed = frame[frame["status"] == "failed"]
    assert len(crashed) == 2 and set(crashed["error_type"]) == {"RuntimeError"}
    assert crashed["error_message"].str.contains("refusing 2 trial").all()
    assert states(tmp_path)[trial(3).trial_id] == "done"


def test_a_worker_killed_with_sigkill_costs_only_its_unfinished_trials(tmp_path: Path) -> None:
    marker = tmp_path / "killed-once"
    victim = trial(2, test_kill_once=str(marker))
    jobs = [[trial(1), victim, trial(3)], [trial(4), trial(5)]]
    executor = LocalExecutor(job_fn=job_to_store, workers=2, progress=False, poll_s=0.05)
    executor.run(jobs, tmp_path / "store", sweep="s", study="t")
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


def test_worker_writes_rows_as_trials_finish_and_failure_rows_after_a_crash(
    tmp_path: Path, monkeypatch
) -> None:
    def half_then_crash(trials, *, checkpoint_dir=None, on_result=None, **_):
        fake_run_job(trials[:1], on_result=on_result)
        raise MemoryError("teacher does not fit")

    monkeypatch.setattr(worker, "run_job", half_then_crash)
    worker.run_job_to_store([trial(1), trial(2), trial(3)], tmp_path, sweep="s", study="t",
                            checkpoint_dir=tmp_path / "ck")  # fmt: skip
    frame = read_store(tmp_path)
    assert len(frame) == 3
    assert frame.set_index("trial_id").loc[trial(1).trial_id, "status"] == "done"
    failed = frame[frame["status"] == "failed"]
    assert set(failed["error_type"]) == {"MemoryError"} and (tmp_path / "ck").is_dir()


def test_worker_writes_results_the_core_returned_without_reporting(tmp_path: Path, monkeypatch) -> None:
    def quiet(trials, **_):
        return [TrialResult(trial=trials[0], status="done")]  # reports nothing, forgets the second trial

    monkeypatch.setattr(worker, "run_job", quiet)
    worker.run_job_to_store([trial(1), trial(2)], tmp_path, sweep="s", study="t")
    got = latest_state(read_store(tmp_path))
    assert got.loc[trial(1).trial_id, "state"] == "done"
    assert got.loc[trial(2).trial_id, "error_type"] == "MissingResult"


def test_get_executor_validates_prefixed_settings() -> None:
    local = get_executor("local", local_workers=2, local_progress=False)
    assert isinstance(local, LocalExecutor) and local.workers == 2
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
        get_executor("local", job_fn="kdgrid.launch.testing:no_such_function")
    assert get_executor("local", job_fn="kdgrid.launch.testing:job_to_store").job_fn is job_to_store


def test_a_trial_killed_mid_epoch_continues_from_its_checkpoint(tmp_path: Path) -> None:
    """SIGKILL after the first of 4 epochs; `run` marks the trial failed, a rerun starts at epoch 2 (the
    checkpoint folder under the store is the same for the job on every attempt)."""

    slow = trial(7, test_epochs=4, test_seconds=4.0)
    store = tmp_path / "store"
    progress = checkpoint_dir_for(store, [slow]) / f"{slow.trial_id}.epochs"
    executor = LocalExecutor(job_fn=job_to_store, workers=1, progress=False, poll_s=0.05)
    runner = threading.Thread(
        target=executor.run, args=([[slow]], store), kwargs={"sweep": "s", "study": "t"}
    )
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

    LocalExecutor(job_fn=job_to_store, workers=1, progress=False, poll_s=0.05).run([[slow]], store, sweep="s",
                                                                                  study="t")  # fmt: skip
    done = read_store(store)
    done = done[done["status"] == "done"]
    assert len(done) == 1

    assert json.loads(done.iloc[0]["extra_json"])["resumed_from_epoch"] == epochs_before
