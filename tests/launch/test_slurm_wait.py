"""Waiting for SLURM array tasks without a cluster: a fake ``sacct`` on PATH (broken, silent, slow, recovering)
and stand-ins for submitit's jobs (an id and the paths of a result pickle and a log)."""

from __future__ import annotations

import os
import pickle
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kdgrid.errors import ConfigError, LaunchError
from kdgrid.launch.job import Launch, touch_run_marker
from kdgrid.launch.slurm import ArrayTask, SlurmExecutor, Submission, resolve_settings, sacct_states
from kdgrid.store import failure_result, read_store, write_result
from tests.launch import fakes
from tests.launch.fakes import make_trial, store_rows, store_studies

ARRAY = "4242"


def fake_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """Put a ``sacct`` running ``body`` (sh) first on PATH; it appends its arguments to the returned log and
    ``$CALLS`` is its call number (1, 2, ...)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    log = tmp_path / "sacct_calls.log"
    script = folder / "sacct"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nCALLS=$(wc -l < "{log}")\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def sacct_lines(*lines: str) -> str:
    """sh that prints sacct's --parsable2 output: the header, then ``lines`` ("4242_0|COMPLETED")."""
    return "printf '%s\\n' 'JobID|State' " + " ".join(f"'{line}'" for line in lines)


BROKEN = "echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1"


def submitted_job(tmp_path: Path, index: int) -> SimpleNamespace:
    """A stand-in for submitit's job of array task ``index``: its id and the paths of its result and log."""
    logs = tmp_path / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    job_id = f"{ARRAY}_{index}"
    return SimpleNamespace(
        job_id=job_id,
        paths=SimpleNamespace(result_pickle=logs / f"{job_id}_result.pkl", stderr=logs / f"{job_id}.err"),
    )


def submission(tmp_path: Path, n_tasks: int = 2) -> Submission:
    """``n_tasks`` submitted array tasks of one trial each, as `SlurmExecutor.submit` returns them."""
    store = tmp_path / "store"
    pairs = []
    for index in range(n_tasks):
        trial = make_trial(index)
        task = ArrayTask([[trial]], str(store), "sweep", {trial.trial_id: "study"}, "run", fakes.job_to_store)
        pairs.append((submitted_job(tmp_path, index), task))
    marker = touch_run_marker(store, "slurm-test")
    return Submission(pairs, store, "sweep", marker)


def executor(give_up_s: float) -> SlurmExecutor:
    return SlurmExecutor(poll_interval_s=0.02, slurm_sacct_give_up_s=give_up_s, job_fn=fakes.job_to_store)


def test_a_broken_sacct_ends_the_wait_with_the_task_ids_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_sacct(tmp_path, monkeypatch, BROKEN)
    sub = submission(tmp_path)
    finished = make_trial(0)  # task 0 had written its row before sacct broke
    write_result(
        sub.store_dir, failure_result(finished, error_type="X", message="x"), sweep="sweep", study="s"
    )
    rows_before = store_rows(sub.store_dir)
    started = time.monotonic()
    with pytest.raises(LaunchError) as raised:
        executor(give_up_s=0.3).wait_for(sub)
    waited = time.monotonic() - started
    message = " ".join(str(raised.value).split())
    assert 0.3 <= waited < 10
    for needle in ("may still be running", "4242_0, 4242_1", "Connection refused", "slurm_sacct_give_up_s",
                   "kdgrid status", "kdgrid resume", "nothing is lost", "scancel 4242"):  # fmt: skip
        assert needle in message, needle
    assert store_rows(sub.store_dir) == rows_before  # no JobLost row: nothing is known to have failed
    assert not sub.marker.exists()
    asked = calls.read_text().splitlines()
    assert len(asked) >= 2 and all(line == "-o JobID,State --parsable2 -j 4242" for line in asked)


def test_sacct_that_answers_without_our_tasks_counts_as_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_sacct(tmp_path, monkeypatch, sacct_lines("99_0|RUNNING"))
    with pytest.raises(LaunchError, match="listed none of them"):
        executor(give_up_s=0.2).wait_for(submission(tmp_path))


def test_a_task_with_a_result_pickle_has_ended_and_only_the_others_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_sacct(tmp_path, monkeypatch, BROKEN)
    sub = submission(tmp_path)
    done_job = sub.tasks[0][0]
    done_job.paths.result_pickle.write_bytes(pickle.dumps(("success", 1)))
    with pytest.raises(LaunchError) as raised:
        executor(give_up_s=0.2).wait_for(sub)
    assert "1 unfinished array task(s)" in str(raised.value) and "4242_1" in str(raised.value)
    assert "4242_0" not in str(raised.value)


def test_long_running_tasks_are_waited_for_while_sacct_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = sacct_lines("4242_0|RUNNING", "4242_1|PENDING")
    completed = sacct_lines("4242_0|COMPLETED", "4242_1|COMPLETED")
    fake_sacct(tmp_path, monkeypatch, f'if [ "$CALLS" -lt 25 ]; then {running}; else {completed}; fi')
    started = time.monotonic()
    states = executor(give_up_s=0.1).wait_for(submission(tmp_path))
    assert time.monotonic() - started > 0.1  # longer than the give-up time: sacct answering is enough
    assert states == {"4242_0": "COMPLETED", "4242_1": "COMPLETED"}


def test_sacct_failing_for_a_while_then_answering_is_waited_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    completed = sacct_lines("4242_0|COMPLETED", "4242_[1-1]|COMPLETED")  # submitit expands array ranges
    calls = fake_sacct(tmp_path, monkeypatch, f'if [ "$CALLS" -lt 4 ]; then {BROKEN}; else {completed}; fi')
    assert executor(give_up_s=30).wait_for(submission(tmp_path)) == {
        "4242_0": "COMPLETED",
        "4242_1": "COMPLETED",
    }
    assert len(calls.read_text().splitlines()) == 4


def test_a_task_sacct_reports_cancelled_gets_failed_rows_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_sacct(tmp_path, monkeypatch, sacct_lines("4242_0|COMPLETED", "4242_1|CANCELLED by 1000"))
    sub = submission(tmp_path)
    with pytest.raises(
        LaunchError, match=r"1 of 2 SLURM array task\(s\) did not finish \(4242_1: CANCELLED\)"
    ):
        executor(give_up_s=30).wait_for(sub)
    # task 0 completed without writing a row (a fake that ran nothing): only the cancelled task's trial is lost
    assert store_rows(sub.store_dir) == [(make_trial(1).trial_id, "failed")]


def test_a_cancelled_task_of_jobs_mixing_studies_gets_failed_rows_under_each_trials_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_sacct(tmp_path, monkeypatch, sacct_lines("4242_0|CANCELLED by 1000", "4242_1|COMPLETED"))
    store = tmp_path / "store"
    a0, b0, a1 = make_trial(0), make_trial(0, k=1), make_trial(1)
    studies = {a0.trial_id: "a", b0.trial_id: "b", a1.trial_id: "a", "some-other-trial": "c"}
    run = executor(give_up_s=30)
    tasks = run.make_tasks(Launch.of([[a0, b0], [a1]], store, sweep="sweep", studies=studies), run_id="run")
    # each task carries (and pickles) the studies of its own trials only
    assert [task.studies for task in tasks] == [{a0.trial_id: "a", b0.trial_id: "b"}, {a1.trial_id: "a"}]
    pairs = [(submitted_job(tmp_path, index), task) for index, task in enumerate(tasks)]
    sub = Submission(pairs, store, "sweep", touch_run_marker(store, "slurm-test"))
    with pytest.raises(LaunchError, match=r"1 of 2 SLURM array task\(s\) did not finish"):
        run.wait_for(sub)
    assert set(read_store(store)["error_type"]) == {"JobLost"}
    assert store_studies(store) == {a0.trial_id: "a", b0.trial_id: "b"}


def test_sacct_states_parses_states_and_reports_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_sacct(tmp_path, monkeypatch, sacct_lines("7_0|RUNNING", "7_0.batch|RUNNING", "7_[1-2]|PENDING"))
    assert sacct_states(["7"]) == {"7_0": "RUNNING", "7_1": "PENDING", "7_2": "PENDING"}
    fake_sacct(tmp_path, monkeypatch, BROKEN)
    with pytest.raises(LaunchError, match="Connection refused"):
        sacct_states(["7"])


@pytest.mark.parametrize("value", [-1, "soon", True, float("inf")])
def test_a_bad_give_up_time_is_refused_naming_the_key(value: object) -> None:
    with pytest.raises(ConfigError, match="slurm_sacct_give_up_s"):
        resolve_settings(None, {"slurm_sacct_give_up_s": value})


def test_the_give_up_time_defaults_to_half_an_hour_and_zero_means_never() -> None:
    assert resolve_settings(None, {}).sacct_give_up_s == 1800
    assert resolve_settings(None, {"slurm_sacct_give_up_s": "0"}).sacct_give_up_s == 0
    assert resolve_settings(None, {"sacct_give_up_s": 90}).sacct_give_up_s == 90
