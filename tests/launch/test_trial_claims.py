"""Trial claims through the executors and the commands: concurrent runs of one sweep share the work, a trial
someone is training is `running` and skipped, a crashed holder's claim goes stale and `resume` retrains it,
and a dead job's trials get ``JobLost`` rows only where no live claim says they are still being trained."""

from __future__ import annotations

import collections
import json
import logging
import multiprocessing
import os
import re
import signal
import socket
from pathlib import Path

import pytest

import kdgrid.sweep_run  # noqa: F401  (the run body, torch included, imported once before the runs fork)
from kdgrid.cli import main
from kdgrid.grid import load_sweep
from kdgrid.launch.job import record_lost_trials, touch_run_marker
from kdgrid.store import read_store
from kdgrid.store.claims import Claim, HeldClaims, claim_path, claims_dir, read_claim, try_claim
from tests.commands.test_sweep_commands import FAKE, as_json, invoke
from tests.launch import fakes
from tests.launch.fakes import log_events, make_trial, store_rows

HOST = socket.gethostname()


def sweep_file(tmp_path: Path, trials: int, seconds: float, **options: object) -> Path:
    """``trials`` trials of one study, each working ``seconds`` (logged to ``tmp_path/log.txt``)."""
    fixed_options = {"test_log": str(tmp_path / "log.txt"), "test_seconds": seconds, **options}
    spec = {
        "name": "claims",
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte", "options": fixed_options},
        "studies": {"grid": {"axes": {"seed": list(range(trials))}}},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(spec))
    return path


def trial_ids(sweep: Path) -> list[str]:
    return [planned.trial.trial_id for planned in load_sweep(sweep).trials]


def done_counts(store: Path) -> collections.Counter[str]:
    return collections.Counter(trial_id for trial_id, status in store_rows(store) if status == "done")


def claim_files(store: Path) -> list[str]:
    return sorted(p.name for p in claims_dir(store).glob("*")) if claims_dir(store).exists() else []


def kdgrid_process(*args: object) -> multiprocessing.process.BaseProcess:
    """``kdgrid ARGS`` started in a process of its own: forked from this one (the imports are paid once), then the
    same entry point as the console script. Its exit status is the command's."""
    process = multiprocessing.get_context("fork").Process(target=main, args=([str(a) for a in args],))
    process.start()
    return process


def finish(process: multiprocessing.process.BaseProcess) -> int | None:
    process.join(timeout=300)
    return process.exitcode


def plant_live_claim(store: Path, trial_id: str) -> Claim:
    """A claim of ``trial_id`` held by this test's process (alive, heartbeat fresh): another run's trial."""
    claim = try_claim(store, trial_id)
    assert claim is not None
    return claim


def test_two_concurrent_runs_of_one_sweep_train_every_trial_once_and_share_the_work(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    sweep, store = sweep_file(tmp_path, trials=10, seconds=0.4), tmp_path / "store"
    args = ("run", sweep, "--store", store, *FAKE, "--max-group-size", "1")
    runs = [kdgrid_process(*args) for _ in range(2)]
    assert [finish(run) for run in runs] == [0, 0]
    output = capfd.readouterr().err

    ids = trial_ids(sweep)
    assert done_counts(store) == collections.Counter(ids)  # exactly one done row per trial
    assert len(read_store(store)) == 10  # and no failed row either
    starts = [
        (trial_id, pid) for event, trial_id, pid, _ in log_events(tmp_path / "log.txt") if event == "start"
    ]
    assert sorted(t for t, _ in starts) == sorted(ids), "a trial was trained twice"
    assert {pid for _, pid in starts} == {run.pid for run in runs}, "one run did all the work"
    assert claim_files(store) == []  # every claim released once its row was written
    assert "claimed by another run" in output


def test_a_claimed_trial_is_running_in_status_skipped_by_run_and_run_once_released(tmp_path: Path) -> None:
    sweep, store = sweep_file(tmp_path, trials=4, seconds=0.0), tmp_path / "store"
    busy, *others = trial_ids(sweep)
    claim = plant_live_claim(store, busy)

    status = as_json("status", sweep, "--store", store)
    assert (status["done"], status["failed"], status["pending"], status["running"]) == (0, 0, 3, 1)
    [shown] = status["running_trials"]
    assert (shown["trial_id"], shown["study"], shown["host"], shown["pid"]) == (
        busy,
        "grid",
        HOST,
        os.getpid(),
    )
    assert shown["job_id"] == f"local:{os.getpid()}" and shown["age_s"] >= 0 and shown["heartbeat_age_s"] < 60
    assert shown["label"] == "soft labels only / bert-tiny" and shown["progress"] is None
    code, out = invoke("status", sweep, "--store", store)
    assert code == 0 and "running: 1 trial(s) in 1 job(s)" in out
    assert (
        f"  local:{os.getpid()} on {HOST} pid {os.getpid()}: 1 trial(s), before its first batch, running "
        in out
    )
    assert f"    soft labels only / bert-tiny [grid]: {busy}\n" in out
    assert as_json("plan", sweep, "--store", store)["running"] == 1

    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0, out
    assert "to run now 3; 1 claimed by another run, skipped" in out
    assert "running elsewhere 1" in out
    assert done_counts(store) == collections.Counter(others)
    assert read_claim(store, busy) == claim  # a live claim is never taken over

    claim_path(store, busy).unlink()  # its holder ends without a row (a row would make it done)
    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0 and "to run now 1" in out
    assert done_counts(store) == collections.Counter([busy, *others])
    assert claim_files(store) == []


def test_a_job_leaves_the_trials_claimed_after_its_planning_to_their_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken, free = make_trial(0), make_trial(0, k=1)
    claim = plant_live_claim(tmp_path, taken.trial_id)
    fakes.job_to_store([taken, free], tmp_path, sweep="s")
    assert store_rows(tmp_path) == [(free.trial_id, "done")]
    err = capsys.readouterr().err
    assert f"1 trial(s) of this job are claimed by another run ({claim.holder()}): left to it" in err
    # a trial finished (and released) by another process between planning and claiming is not trained again
    before = store_rows(tmp_path)
    fakes.job_to_store([free], tmp_path, sweep="s")
    assert store_rows(tmp_path) == before and claim_files(tmp_path) == [f"{taken.trial_id}.json"]


def test_a_sigkilled_run_leaves_a_claim_that_goes_stale_and_resume_retrains_its_trial(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sweep, store = sweep_file(tmp_path, trials=3, seconds=0.0), tmp_path / "store"
    victim = {"task": "rte", "seed": 9, "options": {"test_kill_once": str(tmp_path / "killed")}}
    spec = json.loads(sweep.read_text())
    spec["studies"]["extra"] = {"include": [victim]}
    sweep.write_text(json.dumps(spec))
    victim_id = next(p.trial.trial_id for p in load_sweep(sweep).trials if p.trial.seed == 9)

    run = kdgrid_process("run", sweep, "--store", store, *FAKE, "--max-group-size", "1")
    assert finish(run) == -signal.SIGKILL and (tmp_path / "killed").exists()  # no row, no clean-up
    left = read_claim(store, victim_id)
    assert left is not None and left.pid == run.pid and victim_id not in done_counts(store)

    status = as_json("status", sweep, "--store", store)  # the holder is gone: the trial is not running
    assert status["running"] == 0 and status["pending"] >= 1

    with caplog.at_level(logging.WARNING, logger="kdgrid.store.claims"):
        code, out = invoke("resume", sweep, "--store", store, *FAKE)
    assert code == 0, out
    holder = f"{HOST} pid {run.pid} (local:{run.pid})"
    assert caplog.messages == [
        f"kdgrid: reclaimed trial {victim_id} from {holder}: process {run.pid} is gone on {HOST}"
    ]
    assert done_counts(store) == collections.Counter(trial_ids(sweep))
    assert claim_files(store) == []


def test_lost_trials_skip_live_claims_and_clear_stale_ones(tmp_path: Path) -> None:
    running, crashed, ended, silent = (make_trial(0, k=k) for k in range(4))
    marker = touch_run_marker(tmp_path, "run")
    live = plant_live_claim(tmp_path, running.trial_id)  # an earlier submission's task still trains it
    for trial, holder in ((crashed, "local:1"), (ended, "slurm:70_3")):
        path = claim_path(tmp_path, trial.trial_id)
        host = HOST if trial is crashed else "a-node"
        pid = 999_999_999 if trial is crashed else 12
        path.write_text(Claim(trial.trial_id, f"t-{trial.trial_id}", host, pid, holder, "").to_json())
    lost = record_lost_trials(tmp_path, [running, crashed, ended, silent], marker=marker, sweep="s",
                              studies=None, reason="SLURM task 70_3 ended CANCELLED",
                              finished_jobs={"slurm:70_3"})  # fmt: skip
    assert lost == [crashed, ended, silent]
    assert sorted(store_rows(tmp_path)) == sorted((t.trial_id, "failed") for t in lost)
    assert read_claim(tmp_path, running.trial_id) == live
    assert claim_files(tmp_path) == [f"{running.trial_id}.json"]  # the stale claims went with their rows


def test_claims_live_where_store_readers_do_not_look(tmp_path: Path) -> None:
    fakes.job_to_store([make_trial(0)], tmp_path, sweep="s")
    plant_live_claim(tmp_path, make_trial(0, k=1).trial_id)
    assert claims_dir(tmp_path).name.startswith("_")
    assert len(read_store(tmp_path)) == 1  # the claim folder is invisible to readers


def test_status_summarises_running_trials_by_job_with_labels_and_the_step_reached(tmp_path: Path) -> None:
    spec = {
        "name": "watched",
        "fixed": {"teacher": "bert-base", "student": "bert-tiny", "task": "rte", "epochs": 3},
        "studies": {"grid": {"axes": {"knowledge": [["cos"], ["hidden_mse"]], "strategy": ["Last", "First"],
                                      "seed": [0, 1]}}},
    }  # fmt: skip
    sweep, store = tmp_path / "sweep.yaml", tmp_path / "store"
    sweep.write_text(json.dumps(spec))
    trials = [planned.trial for planned in load_sweep(sweep).trials]
    held = HeldClaims(store, [plant_live_claim(store, t.trial_id) for t in trials[:6]], interval_s=3600)
    held.note_progress(130, 300, 3)
    held.heartbeat()
    try:
        status = as_json("status", sweep, "--store", store)
        assert status["running"] == 6
        assert {item["label"] for item in status["running_trials"]} == {
            f"{t.knowledge[0]} / {t.strategy} / bert-tiny" for t in trials[:6]
        }
        assert all(item["progress"] == {"step": 130, "steps": 300, "epoch": 2, "epochs": 3}
                   for item in status["running_trials"])  # fmt: skip
        code, out = invoke("status", sweep, "--store", store)
    finally:
        held.close()
    assert code == 0
    assert out.count(" trial(s), epoch 2/3, step 130/300, running ") == 1  # one job: one line
    assert "running: 6 trial(s) in 1 job(s)" in out
    labels = [line.strip() for line in out.splitlines() if line.startswith("    ") and "[grid]: " in line]
    cells = collections.Counter(f"{t.knowledge[0]} / {t.strategy} / bert-tiny" for t in trials[:6])
    for label, n in cells.items():  # the seeds of one cell share a line
        [line] = [line for line in labels if line.startswith(f"{label} [grid]: ")]
        assert (f": {n} trials (" in line) == (n > 1)
    assert len(labels) == len(cells)
    assert not re.search(r"^running [0-9a-f]{16}", out, re.MULTILINE)  # no line per trial any more
