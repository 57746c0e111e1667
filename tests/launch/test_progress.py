"""Progress that reaches a log: plain lines per epoch and job and a heartbeat when output is not a terminal, and
the job's step recorded beside its claims for `kdgrid status`."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import time
from pathlib import Path

import pytest

from kdgrid.errors import ConfigError
from kdgrid.launch.local import LocalExecutor
from kdgrid.launch.progress import (
    HEARTBEAT_ENV,
    EpochLines,
    LiveProgress,
    NoProgress,
    PlainProgress,
    duration,
    heartbeat_s,
    planned_seconds,
    run_progress,
)
from kdgrid.store.claims import HeldClaims, claim_path, progress_path, read_claims, try_claim
from kdgrid.trial import Trial
from tests.launch.fakes import make_trial, store_rows


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _with_epochs(trial: Trial, epochs: int) -> Trial:
    return dataclasses.replace(trial, epochs=epochs)


def test_durations_read_as_a_person_writes_them() -> None:
    assert [duration(s) for s in (0, 42.4, 60, 185, 3600, 7620)] == [
        "0s",
        "42s",
        "1m00s",
        "3m05s",
        "1h00m",
        "2h07m",
    ]
    assert duration(None) == "?" and duration(-1) == "?"


def test_the_heartbeat_interval_comes_from_the_environment_and_bad_values_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(HEARTBEAT_ENV, raising=False)
    assert heartbeat_s() == 60.0
    monkeypatch.setenv(HEARTBEAT_ENV, "5")
    assert heartbeat_s() == 5.0
    for bad in ("soon", "0", "-3", "inf"):
        monkeypatch.setenv(HEARTBEAT_ENV, bad)
        with pytest.raises(ConfigError, match=HEARTBEAT_ENV):
            heartbeat_s()


def test_a_job_writes_one_line_per_epoch_with_its_elapsed_time_and_eta() -> None:
    clock, lines = FakeClock(), []
    job = [_with_epochs(make_trial(0), 3), _with_epochs(make_trial(0, k=1), 3)]
    on_step = EpochLines(job, index=2, jobs=5, emit=lines.append, clock=clock)
    for step in range(1, 31):  # 3 epochs of 10 batches, 2 s each
        clock.now += 2.0
        on_step(step, 30)
    assert len(lines) == 3
    assert lines[0] == (
        "kdgrid: job 2/5 (2 students, synthetic-single-binary, teacher minilm-l6, seed 0): epoch 1/3 done, "
        "step 10/30, 20s elapsed, ETA 40s"
    )
    assert "epoch 2/3 done, step 20/30, 40s elapsed, ETA 20s" in lines[1]
    assert "epoch 3/3 done, step 30/30, 1m00s elapsed, ETA 0s" in lines[2]
    assert on_step.position() == "step 30/30"


def test_a_resumed_job_estimates_from_the_batches_it_ran_itself() -> None:
    clock, lines = FakeClock(), []
    on_step = EpochLines([_with_epochs(make_trial(0), 2)], index=1, jobs=1, emit=lines.append, clock=clock)
    for step in range(11, 21):  # epoch 1 was done before the restart
        clock.now += 1.0
        on_step(step, 20)
    assert lines == [
        "kdgrid: job 1/1 (1 student, synthetic-single-binary, teacher minilm-l6, seed 0): epoch 2/2 done, "
        "step 20/20, 10s elapsed, ETA 0s"
    ]


def test_the_heartbeat_line_counts_trials_and_says_where_the_running_job_is() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(4, title="demo/study", jobs=2, stream=out, interval_s=3600, clock=clock)
    job = [_with_epochs(make_trial(0), 1)]
    on_step = progress.start_job(1, job)
    clock.now += 30
    on_step(3, 8)
    progress.show({"a": "done", "b": "failed"})
    assert progress.heartbeat_line() == (
        "kdgrid: demo/study: 2/4 trials finished (done 1, failed 1), 2 remaining; 30s elapsed, ETA 21s; "
        "job 1/2 at step 3/8"
    )  # ETA: 30 s for 2 trials + 3/8 of the running job's one, 1.625 trials to go: 30 / 2.375 * 1.625 = 20.5 s


def test_the_run_eta_counts_a_grouped_job_by_its_steps() -> None:
    """90 students in one job finish together at its last step: with 10 of 100 trials finished after 13 minutes
    and the job at step 60/64, about a minute is left, not the hour that trials finished per minute would say."""
    clock, out = FakeClock(), io.StringIO()
    progress = PlainProgress(100, title="methods", jobs=2, stream=out, interval_s=3600, clock=clock)
    progress.show({f"t{i}": "done" for i in range(10)})
    on_step = progress.start_job(2, [_with_epochs(make_trial(i), 2) for i in range(90)])
    clock.now += 780
    on_step(60, 64)
    expected = 780 / (10 + 90 * 60 / 64) * (100 - 10 - 90 * 60 / 64)  # 46.5 s
    assert f"ETA {round(expected)}s;" in progress.heartbeat_line()
    progress.job_ended(2, [], {**{f"t{i}": "done" for i in range(100)}})
    assert "ETA 0s" in progress.heartbeat_line() and " at step" not in progress.heartbeat_line()


def test_heartbeats_come_at_the_interval_while_nothing_else_happens() -> None:
    out = io.StringIO()
    with PlainProgress(2, title="s", jobs=1, stream=out, interval_s=0.05):
        time.sleep(0.5)
    beats = [line for line in out.getvalue().splitlines() if "trials finished" in line]
    assert 3 <= len(beats) <= 11
    lines = out.getvalue().splitlines()
    assert lines[0] == "kdgrid: s: 2 trials in 1 job(s)" and lines[-1].startswith(
        "kdgrid: s: 0 done, 0 failed"
    )


def test_a_terminal_gets_the_live_bar_a_log_the_lines_and_off_is_off() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(run_progress(3, title="s", jobs=1, enabled=True, stream=io.StringIO()), PlainProgress)
    assert isinstance(run_progress(3, title="s", jobs=1, enabled=True, stream=Terminal()), LiveProgress)
    assert isinstance(run_progress(3, title="s", jobs=1, enabled=False, stream=io.StringIO()), NoProgress)
    assert isinstance(run_progress(0, title="s", jobs=0, enabled=True, stream=io.StringIO()), NoProgress)


def test_a_logged_run_knows_each_jobs_planned_seconds_in_job_order() -> None:
    jobs = [[make_trial(0)], [make_trial(1), make_trial(2)]]
    progress = run_progress(3, title="s", jobs=2, enabled=True, stream=io.StringIO(), job_trials=jobs)
    assert isinstance(progress, PlainProgress)
    assert progress.planned == [planned_seconds(jobs[0]), planned_seconds(jobs[1])]
    assert progress.planned[0] is not None and progress.planned[1] > progress.planned[0]  # two students cost more


def test_a_local_run_into_a_log_writes_a_line_per_epoch_and_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The executor's output is not a terminal (captured): every epoch of every job has its line."""
    jobs = [
        [_with_epochs(make_trial(0, test_steps=3), 2), _with_epochs(make_trial(0, test_steps=3, k=1), 2)],
        [_with_epochs(make_trial(1, test_steps=3), 2)],
    ]
    executor = LocalExecutor(job_fn="tests.launch.fakes:stepping_job")
    executor.run(jobs, tmp_path / "store", sweep="logged")
    out = capsys.readouterr().out
    epochs = re.findall(r"job (\d)/2 \((\d) students?, .*\): epoch (\d)/2 done, step (\d)/6", out)
    assert epochs == [("1", "2", "1", "3"), ("1", "2", "2", "6"), ("2", "1", "1", "3"), ("2", "1", "2", "6")]
    assert "kdgrid: job 1/2 ended: 2 done, 0 failed; run: 2 done, 0 failed, 1 remaining" in out
    assert "kdgrid: logged: 3 done, 0 failed, 0 without a row after" in out
    assert "\x1b[" not in out  # no terminal control codes in a log
    assert sorted(status for _, status in store_rows(tmp_path / "store")) == ["done"] * 3


def test_worker_processes_write_their_epoch_lines_into_the_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    jobs = [[_with_epochs(make_trial(seed, test_steps=2), 3)] for seed in range(2)]
    executor = LocalExecutor(
        job_fn="tests.launch.fakes:stepping_job", workers=2, start_method="fork", poll_s=0.05
    )
    executor.run(jobs, tmp_path / "store", sweep="pool")
    out = capfd.readouterr().out
    for index in (1, 2):
        assert [int(e) for e in re.findall(rf"job {index}/2 \(.*\): epoch (\d)/3 done", out)] == [1, 2, 3]
        assert f"kdgrid: job {index}/2 ended: 1 done, 0 failed" in out


def test_the_job_step_is_recorded_beside_each_claim_and_removed_with_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    claims = [try_claim(store, trial_id) for trial_id in ("a" * 16, "b" * 16)]
    assert all(claims)
    held = HeldClaims(store, [c for c in claims if c is not None], interval_s=3600)
    assert {c.progress for c in read_claims(store).values()} == {None}  # before the first batch
    held.note_progress(25, 60, 3)
    held.heartbeat()
    assert {t: c.progress for t, c in read_claims(store).items()} == {
        "a" * 16: {"step": 25, "steps": 60, "epoch": 2, "epochs": 3},
        "b" * 16: {"step": 25, "steps": 60, "epoch": 2, "epochs": 3},
    }
    # another holder's progress file (a stale token) is not this claim's progress
    path = progress_path(claim_path(store, "a" * 16))
    path.write_text(json.dumps({"token": "someone-else", "step": 1, "steps": 2, "epoch": 1, "epochs": 1}))
    assert read_claims(store)["a" * 16].progress is None
    held.close()
    assert read_claims(store) == {}
    assert sorted(os.listdir(store / "_claims")) == [path.name]  # only the other holder's file is left


def test_the_epoch_of_a_step(tmp_path: Path) -> None:
    from kdgrid.store.claims import JobProgress

    assert [JobProgress(step, 30, 3).epoch for step in (0, 1, 10, 11, 20, 21, 30)] == [1, 1, 1, 2, 2, 3, 3]


def test_a_ray_or_slurm_job_process_writes_its_epoch_lines_to_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kdgrid.launch.job import run_pending
    from tests.launch.fakes import stepping_job

    trials = [_with_epochs(make_trial(0, test_steps=2), 2), _with_epochs(make_trial(0, test_steps=2, k=1), 2)]
    ran = run_pending(
        stepping_job, trials, tmp_path / "store", sweep="s", studies=None, done={trials[1].trial_id}
    )
    assert ran == trials[:1]
    lines = [line for line in capsys.readouterr().out.splitlines() if ": epoch " in line]
    assert [line.split(": epoch ")[1].split(",")[0] for line in lines] == ["1/2 done", "2/2 done"]
    assert lines[0].startswith("kdgrid: job (1 student, synthetic-single-binary, teacher minilm-l6, seed 0)")
