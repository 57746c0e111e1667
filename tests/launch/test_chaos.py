"""Chaos: several runs and resumes of one sweep against one store, with stalls past the stale limit (SIGSTOP,
then SIGCONT), SIGKILL and SIGTERM of runs and of their worker processes, and concurrent compactions, in an order
drawn from a fixed seed. Everything is real (the CLI in processes of their own, the local executor and its
worker processes, the worker, claims, rows, compaction) except the training: the test core of
`tests.launch.fakes` (each trial a few steps over three epochs, with epoch checkpoints), so that a stall or a
kill lands mid-training and the test stays within minutes on two busy cores. At the end every trial has exactly
one counted done row, none is lost, and the store checks clean; the closing line prints the counts."""

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
ROUNDS = 4
HEARTBEAT_S, STALE_S = 0.5, 2.0
KDGRID = KDGRID_WITH_FAKES
ACTIONS = ("stop", "kill", "term", "kill-worker", "compact", "stop")


def _sweep(tmp_path: Path) -> Path:
    """12 trials in 6 jobs (a data order each), each 3 epochs of 0.6 s."""
    spec = {
        "name": "chaos",
        "fixed": {
            "task": "rte", "teacher": "bert-base", "student": "bert-tiny",
            "options": {"test_seconds": 1.8, "test_epochs": 3},
        },
        "axes": {"seed": list(range(6)), "alpha": [0.1, 0.5]},
    }  # fmt: skip
    path = tmp_path / "chaos.yaml"
    path.write_text(json.dumps(spec))
    return path


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _signal_group(process: subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def test_runs_resumes_stalls_kills_and_compactions_never_lose_or_double_count_a_trial(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    sweep, store = _sweep(tmp_path), tmp_path / "store"
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
    started = time.monotonic()

    def start(command: str) -> subprocess.Popen[str]:
        workers = rng.choice([0, 1])
        extra = ["--max-attempts", "50"] if command == "resume" else []
        events.append(f"{command} (workers {workers})")
        return subprocess.Popen(
            [*KDGRID, command, str(sweep), *base, "--set", f"local_workers={workers}", *extra],
            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    for _ in range(ROUNDS):
        runs = [start(rng.choice(["run", "resume"])) for _ in range(2)]
        time.sleep(rng.uniform(5.0, 10.0))  # started, claimed, training
        action = rng.choice(ACTIONS)
        victim = rng.choice(runs)
        events.append(action)
        if action == "stop":  # a stall past the stale limit: the other run takes the trials over
            _signal_group(victim, signal.SIGSTOP)
            time.sleep(STALE_S + 2.0)
            _signal_group(victim, signal.SIGCONT)
        elif action == "kill":
            _signal_group(victim, signal.SIGKILL)
        elif action == "term":
            _signal_group(victim, signal.SIGTERM)
        elif action == "kill-worker":
            workers = [c for run in runs for c in _children(run.pid)]
            if workers:
                os.kill(rng.choice(workers), signal.SIGKILL)
        elif action == "compact":
            subprocess.run([*KDGRID, "store", "compact", "--store", str(store), "--target-rows", "3"], env=env,
                           capture_output=True, timeout=120, check=False)  # fmt: skip
        for run in runs:
            try:
                run.wait(timeout=150)
            except subprocess.TimeoutExpired:
                _signal_group(run, signal.SIGKILL)
                run.wait()
                events.append("a run hung and was killed")

    # Calm weather: resume until every trial is done (failed attempts from the kills are retried).
    for _ in range(3):
        rows = store_rows(store)
        if {t for t, status in rows if status == "done"} >= set(ids):
            break
        finish = subprocess.run([*KDGRID, "resume", str(sweep), *base, "--max-attempts", "50"], env=env,
                                capture_output=True, text=True, timeout=240, check=False)  # fmt: skip
        events.append(f"final resume: exit {finish.returncode}")

    rows = store_rows(store)
    done = collections.Counter(t for t, status in rows if status == "done")
    duplicates = sorted(t for t, n in done.items() if n > 1)
    lost = sorted(set(ids) - set(done))
    superseded = sum(status == SUPERSEDED for _, status in rows)
    check = subprocess.run([*KDGRID, "store", "check", "--store", str(store)], env=env, capture_output=True,
                           text=True, timeout=120, check=False)  # fmt: skip
    frame = read_store(store)
    print(
        f"chaos (seed {SEED}, {time.monotonic() - started:.0f} s; {'; '.join(events)}): {len(ids)} trials, "
        f"{sum(done.values())} done rows counted, {len(duplicates)} duplicates, {len(lost)} losses, "
        f"{superseded} superseded rows, {sum(s == 'failed' for _, s in rows)} failed rows"
    )
    assert duplicates == [] and duplicate_done_trials(frame) == {}, duplicates
    assert lost == [], lost
    assert sum(done.values()) == len(ids)
    assert check.returncode == 0, check.stdout + check.stderr
