"""Chaos: several runs and resumes of one sweep against one store, with stalls past the stale limit (SIGSTOP, then
SIGCONT; some placed exactly between a trial's training and its row's write), SIGKILL and SIGTERM of runs and of
their worker processes, and concurrent compactions, in an order drawn from a seed. Everything is real (the CLI in
processes of their own, the local executor and its worker processes, the worker, claims, rows, fenced epoch
checkpoints, compaction) except the training: the test core of `tests.launch.fakes` (each trial a few steps over
three epochs, with a checkpoint after each epoch but the last), so that a stall or a kill lands mid-training.

At the end every trial has exactly one counted done row, none is lost, the store checks clean, no epoch
checkpoint is left behind (a stalled holder that lost its trial writes none after its taker removed its own),
and the stalls before the row's write produced superseded rows (at least one per such stall: asserted). The
closing line prints the seed, the events and the counts.

Size: ``KDGRID_CHAOS_SEED`` (default `SEED`) and ``KDGRID_CHAOS_ROUNDS`` (default `ROUNDS`, well under a
minute on two busy cores). A long run: ``KDGRID_CHAOS_ROUNDS=40 KDGRID_CHAOS_SEED=$RANDOM pytest -m slow
tests/launch/test_chaos.py -s`` (docs/testing.md).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kdgrid.grid import load_sweep
from kdgrid.store import read_store
from kdgrid.store.read import duplicate_done_trials
from kdgrid.store.schema import SUPERSEDED
from tests.launch.fakes import KDGRID_WITH_FAKES, store_rows

pytestmark = pytest.mark.slow

SEED = 20_251_125
ROUNDS = 2
SEED_VARIABLE, ROUNDS_VARIABLE = "KDGRID_CHAOS_SEED", "KDGRID_CHAOS_ROUNDS"
HEARTBEAT_S, STALE_S = 0.5, 2.0
KDGRID = KDGRID_WITH_FAKES
# "stall": SIGSTOP of a run's process group at a random moment; "stall-before-row": of the process whose trial has
# finished training and is about to hand its row over (the fenced write); the first round always draws the latter.
ACTIONS = ("stall", "stall-before-row", "kill", "term", "kill-worker", "compact")


def _sweep(tmp_path: Path, paused: Path) -> Path:
    """8 trials in 4 jobs (a data order each, two trials per job), each 3 epochs of 0.4 s; a trial that finishes
    training while ``paused`` does not exist pauses before its row (`tests.launch.fakes`: ``test_pause_once``)."""
    spec = {
        "name": "chaos",
        "fixed": {
            "task": "rte", "teacher": "bert-base", "student": "bert-tiny",
            "options": {"test_seconds": 1.2, "test_epochs": 3, "test_pause_once": str(paused)},
        },
        "axes": {"seed": list(range(4)), "alpha": [0.1, 0.5]},
    }  # fmt: skip
    path = tmp_path / "chaos.yaml"
    path.write_text(json.dumps(spec))
    return path


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _wait_for_file(path: Path, seconds: float) -> str | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            text = path.read_text()
            if text:
                return text
        time.sleep(0.05)
    return None


def _settings() -> tuple[int, int]:
    seed = int(os.environ.get(SEED_VARIABLE, SEED))
    rounds = int(os.environ.get(ROUNDS_VARIABLE, ROUNDS))
    if rounds < 1:
        raise ValueError(f"{ROUNDS_VARIABLE}={rounds}: at least 1")
    return seed, rounds


def test_runs_resumes_stalls_kills_and_compactions_never_lose_or_double_count_a_trial(tmp_path: Path) -> None:
    seed, rounds = _settings()
    rng = random.Random(seed)
    paused = tmp_path / "paused"
    paused.write_text("disarmed")  # armed by removing it
    sweep, store = _sweep(tmp_path, paused), tmp_path / "store"
    ids = sorted(planned.trial.trial_id for planned in load_sweep(sweep).trials)
    env = {
        **os.environ,
        "KDGRID_CLAIM_HEARTBEAT_S": str(HEARTBEAT_S),
        "KDGRID_CLAIM_STALE_S": str(STALE_S),
        "OMP_NUM_THREADS": "1",
    }
    base = ["--store", str(store), "--no-preflight", "--max-group-size", "2", "--set", "local_progress=false",
            "--set", "job_fn=tests.launch.fakes:job_to_store"]  # fmt: skip
    events: list[str] = []
    stalls_before_row = 0
    started = time.monotonic()

    def start(command: str, workers: int | None = None) -> subprocess.Popen[str]:
        workers = rng.choice([0, 1]) if workers is None else workers
        extra = ["--max-attempts", "50"] if command == "resume" else []
        events.append(f"{command} (workers {workers})")
        return subprocess.Popen(
            [*KDGRID, command, str(sweep), *base, "--set", f"local_workers={workers}", *extra],
            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def finish(run: subprocess.Popen[str], seconds: float = 150) -> None:
        try:
            run.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            _signal_group(run.pid, signal.SIGKILL)
            run.wait()
            events.append("a run hung and was killed")

    def stall_before_row(runs: list[subprocess.Popen[str]]) -> None:
        """Arm the pause, stop the process whose trial pauses before its row past the stale limit, let a fresh
        resume (added to ``runs``) take the trial over and write its done row, then let the stopped one go on:
        its row is superseded."""
        nonlocal stalls_before_row
        paused.unlink()
        who = _wait_for_file(paused, 90)
        if who is None:  # every trial was done before one could pause
            events.append("no trial paused")
            return
        trial_id, pid = who.split()
        try:
            group = os.getpgid(int(pid))
        except ProcessLookupError:
            events.append("the paused process was gone")
            return
        _signal_group(group, signal.SIGSTOP)
        time.sleep(STALE_S + 1.0)
        runs.append(start("resume", workers=0))
        deadline = time.monotonic() + 120
        while (taken := (trial_id, "done") in store_rows(store)) is False and time.monotonic() < deadline:
            time.sleep(0.2)
        _signal_group(group, signal.SIGCONT)
        if taken:  # the stopped process's row can only be superseded now
            stalls_before_row += 1
        else:
            events.append("the paused trial was not taken over in time")

    for index in range(rounds):
        runs = [start(rng.choice(["run", "resume"])) for _ in range(2)]
        action = "stall-before-row" if index == 0 else rng.choice(ACTIONS)
        if action != "stall-before-row":
            time.sleep(rng.uniform(2.0, 4.0))  # started, claimed, training
        victim = rng.choice(runs)
        events.append(action)
        if action == "stall-before-row":
            stall_before_row(runs)
        elif action == "stall":  # the other run takes the trials over
            _signal_group(victim.pid, signal.SIGSTOP)
            time.sleep(STALE_S + 1.0)
            _signal_group(victim.pid, signal.SIGCONT)
        elif action == "kill":
            _signal_group(victim.pid, signal.SIGKILL)
        elif action == "term":
            _signal_group(victim.pid, signal.SIGTERM)
        elif action == "kill-worker":
            workers = [c for run in runs for c in _children(run.pid)]
            if workers:
                os.kill(rng.choice(workers), signal.SIGKILL)
        elif action == "compact":
            subprocess.run([*KDGRID, "store", "compact", "--store", str(store), "--target-rows", "3"], env=env,
                           capture_output=True, timeout=120, check=False)  # fmt: skip
        for run in runs:
            finish(run)

    # Calm weather: resume until every trial is done (failed attempts from the kills are retried).
    for _ in range(3):
        rows = store_rows(store)
        if {t for t, status in rows if status == "done"} >= set(ids):
            break
        done_now = subprocess.run([*KDGRID, "resume", str(sweep), *base, "--max-attempts", "50"], env=env,
                                  capture_output=True, text=True, timeout=240, check=False)  # fmt: skip
        events.append(f"final resume: exit {done_now.returncode}")

    rows = store_rows(store)
    done = collections.Counter(t for t, status in rows if status == "done")
    duplicates = sorted(t for t, n in done.items() if n > 1)
    lost = sorted(set(ids) - set(done))
    superseded = sum(status == SUPERSEDED for _, status in rows)
    left_behind = sorted(p.name for p in (store / "_checkpoints").rglob("*.epochs"))
    check = subprocess.run([*KDGRID, "store", "check", "--store", str(store)], env=env, capture_output=True,
                           text=True, timeout=120, check=False)  # fmt: skip
    frame = read_store(store)
    print(
        f"chaos (seed {seed}, {rounds} rounds, {time.monotonic() - started:.0f} s; {'; '.join(events)}): "
        f"{len(ids)} trials, {sum(done.values())} done rows counted, {len(duplicates)} duplicates, {len(lost)} "
        f"losses, {superseded} superseded rows ({stalls_before_row} stalls before a row), "
        f"{sum(s == 'failed' for _, s in rows)} failed rows, {len(left_behind)} checkpoints left behind"
    )
    assert duplicates == [] and duplicate_done_trials(frame) == {}, duplicates
    assert lost == [], lost
    assert sum(done.values()) == len(ids)
    assert superseded >= stalls_before_row >= (1 if seed == SEED else 0), events
    assert left_behind == [], left_behind
    assert check.returncode == 0, check.stdout + check.stderr
