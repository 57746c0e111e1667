"""Trial claims (`kdgrid.store.claims`): one holder per trial, live claims kept, stale ones taken over once."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kdgrid.errors import ConfigError
from kdgrid.store import claims
from kdgrid.store.claims import (
    Claim,
    HeldClaims,
    claim_path,
    claim_trials,
    live_claims,
    read_claim,
    release,
    stale_reason,
    try_claim,
)

TRIAL = "0123456789abcdef"


def dead_pid() -> int:
    """The pid of a process of this host that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def plant(store: Path, trial_id: str = TRIAL, *, pid: int | None = None, host: str | None = None,
          job_id: str = "local:1", age_s: float = 0.0) -> Claim:  # fmt: skip
    """Write a claim of another holder as it would be on disk, its heartbeat ``age_s`` seconds old."""
    claim = Claim(trial_id, f"planted-{pid}-{age_s}", host or socket.gethostname(), os.getpid() if pid is None else pid,
                  job_id, "2024-01-01T00:00:00+00:00")  # fmt: skip
    path = claim_path(store, trial_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(claim.to_json())
    if age_s:
        when = time.time() - age_s
        os.utime(path, (when, when))
    return claim


def test_a_claim_is_written_whole_and_names_its_holder_and_a_second_claim_fails(tmp_path: Path) -> None:
    mine = try_claim(tmp_path, TRIAL)
    assert mine is not None
    on_disk = json.loads(claim_path(tmp_path, TRIAL).read_text())
    assert on_disk == {"trial_id": TRIAL, "token": mine.token, "host": socket.gethostname(), "pid": os.getpid(),
                       "job_id": f"local:{os.getpid()}", "started_at": mine.started_at,
                       "generation": 1}  # fmt: skip
    assert try_claim(tmp_path, TRIAL) is None  # held by a live process (this one): never taken
    assert sorted(p.name for p in claim_path(tmp_path, TRIAL).parent.iterdir()) == [f"{TRIAL}.json"]
    release(tmp_path, mine)
    assert not claim_path(tmp_path, TRIAL).exists()
    assert try_claim(tmp_path, TRIAL) is not None  # released: free again


def test_the_job_id_names_the_slurm_array_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert claims.executor_job_id() == "slurm:77"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "70")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert claims.executor_job_id() == "slurm:70_3" == claims.slurm_job_holder("70_3")


def test_a_live_claim_is_never_taken_over(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    live = plant(tmp_path, age_s=5)  # this test's own pid: alive, heartbeat fresh
    remote = plant(tmp_path, "fedcba9876543210", pid=dead_pid(), host="another-node", age_s=5)
    with caplog.at_level(logging.WARNING):
        assert try_claim(tmp_path, TRIAL) is None
        assert try_claim(tmp_path, remote.trial_id) is None  # a pid on another host says nothing
    assert read_claim(tmp_path, TRIAL) == live and read_claim(tmp_path, remote.trial_id) == remote
    assert set(live_claims(tmp_path)) == {TRIAL, remote.trial_id}
    assert "reclaimed" not in caplog.text


@pytest.mark.parametrize("why", ["dead pid", "old heartbeat", "job ended"])
def test_a_stale_claim_is_taken_over_and_the_takeover_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, why: str
) -> None:
    finished: tuple[str, ...] = ()
    if why == "dead pid":
        old = plant(tmp_path, pid=dead_pid())
        expected = f"process {old.pid} is gone on {socket.gethostname()}"
    elif why == "old heartbeat":
        old = plant(tmp_path, host="another-node", age_s=claims.DEFAULT_STALE_AFTER_S + 60)
        expected = "no heartbeat for"
    else:
        old = plant(tmp_path, host="another-node", job_id="slurm:70_3")
        finished = ("slurm:70_3",)
        expected = "its job slurm:70_3 has ended"
        assert try_claim(tmp_path, TRIAL) is None  # without knowing the job ended, its claim is live
    assert old.trial_id not in live_claims(tmp_path) or why == "job ended"
    with caplog.at_level(logging.WARNING, logger="kdgrid.store.claims"):
        mine = try_claim(tmp_path, TRIAL, finished_jobs=finished)
    assert mine is not None and read_claim(tmp_path, TRIAL) == mine
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"kdgrid: reclaimed trial {TRIAL} from {old.holder()}: ") and expected in line
    # nothing left behind but the claim itself (no temporary file, no takeover lock)
    assert [p.name for p in claim_path(tmp_path, TRIAL).parent.iterdir()] == [f"{TRIAL}.json"]


def _race(store: str, start: object, results: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    won = try_claim(store, TRIAL)
    results.put(None if won is None else won.token)  # type: ignore[attr-defined]


def test_processes_racing_to_take_over_a_stale_claim_never_both_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replace = os.replace

    def slow_replace(source: object, target: object) -> None:
        time.sleep(0.2)  # widen the window between "the claim is still the stale one" and the replace
        replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", slow_replace)  # inherited by the forked racers
    context = multiprocessing.get_context("fork")
    for _ in range(5):
        plant(tmp_path, pid=dead_pid())
        start, results = context.Barrier(6), context.Queue()
        racers = [context.Process(target=_race, args=(str(tmp_path), start, results)) for _ in range(6)]
        for racer in racers:
            racer.start()
        tokens = [results.get(timeout=60) for _ in racers]
        for racer in racers:
            racer.join()
        winners = [token for token in tokens if token is not None]
        assert len(winners) == 1, tokens
        assert json.loads(claim_path(tmp_path, TRIAL).read_text())["token"] == winners[0]
        claim_path(tmp_path, TRIAL).unlink()


def test_a_takeover_lock_left_by_a_dead_reclaimer_is_itself_taken_over(tmp_path: Path) -> None:
    stale = plant(tmp_path, pid=dead_pid())
    lock = claim_path(tmp_path, TRIAL).with_name(f"{TRIAL}.json.reclaim-{stale.token}")
    lock.write_text(
        Claim(lock.name, "dead-reclaimer", socket.gethostname(), dead_pid(), "local:1", "").to_json()
    )
    assert try_claim(tmp_path, TRIAL) is not None
    assert not lock.exists()


def test_a_live_takeover_lock_keeps_others_out(tmp_path: Path) -> None:
    stale = plant(tmp_path, pid=dead_pid())
    lock = claim_path(tmp_path, TRIAL).with_name(f"{TRIAL}.json.reclaim-{stale.token}")
    lock.write_text(Claim(lock.name, "busy", socket.gethostname(), os.getpid(), "local:1", "").to_json())
    assert try_claim(tmp_path, TRIAL) is None
    assert read_claim(tmp_path, TRIAL) == stale


def test_held_claims_heartbeat_and_are_released_on_exit(tmp_path: Path) -> None:
    held, taken = claim_trials(tmp_path, ["a" * 16, "b" * 16])
    assert taken == {} and set(held) == {"a" * 16, "b" * 16}
    held.close()  # the first HeldClaims beats every 30 s: replace it by a fast one over the same claims
    won = [try_claim(tmp_path, t) for t in ("a" * 16, "b" * 16)]
    with HeldClaims(tmp_path, [c for c in won if c is not None], interval_s=0.05) as beating:
        path = claim_path(tmp_path, "a" * 16)
        os.utime(path, (time.time() - 1000, time.time() - 1000))
        deadline = time.time() + 10
        while path.stat().st_mtime < time.time() - 100 and time.time() < deadline:
            time.sleep(0.05)
        assert path.stat().st_mtime > time.time() - 100, "the heartbeat did not touch the claim"
        beating.release("b" * 16)
        assert not claim_path(tmp_path, "b" * 16).exists() and path.exists()
    assert not path.exists()


def test_a_holder_never_releases_a_claim_another_process_took_over(tmp_path: Path) -> None:
    mine = try_claim(tmp_path, TRIAL)
    assert mine is not None
    other = plant(tmp_path)  # someone took it over (our heartbeat was late)
    release(tmp_path, mine)
    assert read_claim(tmp_path, TRIAL) == other
    with HeldClaims(tmp_path, [mine], interval_s=3600) as held:
        held.heartbeat()  # notices the takeover and lets the claim go without touching it
        assert TRIAL not in held
    assert read_claim(tmp_path, TRIAL) == other


def test_stale_reason_of_an_unreadable_claim_file_is_its_age(tmp_path: Path) -> None:
    path = claim_path(tmp_path, TRIAL)
    path.parent.mkdir(parents=True)
    path.write_text("not json")
    assert stale_reason(read_claim(tmp_path, TRIAL)) is None  # type: ignore[arg-type]
    os.utime(path, (1, 1))
    assert "no heartbeat" in (stale_reason(read_claim(tmp_path, TRIAL)) or "")  # type: ignore[arg-type]
    assert try_claim(tmp_path, TRIAL) is not None


def test_the_thresholds_come_from_the_environment_and_bad_ones_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (claims.heartbeat_s(), claims.stale_after_s()) == (
        claims.DEFAULT_HEARTBEAT_S,
        claims.DEFAULT_STALE_AFTER_S,
    )
    monkeypatch.setenv(claims.HEARTBEAT_ENV, "2")
    monkeypatch.setenv(claims.STALE_ENV, "5")
    assert (claims.heartbeat_s(), claims.stale_after_s()) == (2, 5)
    monkeypatch.setenv(claims.STALE_ENV, "3")
    with pytest.raises(
        ConfigError, match="KDGRID_CLAIM_STALE_S=3 must be at least twice KDGRID_CLAIM_HEARTBEAT_S=2"
    ):
        claims.stale_after_s()
    monkeypatch.setenv(claims.HEARTBEAT_ENV, "soon")
    with pytest.raises(
        ConfigError, match="KDGRID_CLAIM_HEARTBEAT_S: expected a number of seconds > 0, got 'soon'"
    ):
        claims.heartbeat_s()
