"""Fenced claims: a run that stalls past the stale limit loses its trials to another run, and whatever it writes
afterwards is recorded ``superseded`` (kept, never counted); two done rows of one trial, whatever their origin,
count once and are named."""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kdgrid.launch.worker import run_job_to_store
from kdgrid.store import read_store
from kdgrid.store.claims import HeldClaims, claim_path, claim_trials, read_claim, try_claim
from kdgrid.store.read import duplicate_done_trials, latest_done_rows, trial_states
from kdgrid.store.schema import SUPERSEDED
from kdgrid.store.write import write_result
from kdgrid.trial import Trial
from tests.commands.test_sweep_commands import FAKE, as_json, invoke
from tests.launch import fakes
from tests.launch.fakes import KDGRID_WITH_FAKES, log_events, make_trial, store_rows
from tests.launch.test_trial_claims import claim_files, sweep_file, trial_ids

FAST_CLAIMS = {"KDGRID_CLAIM_HEARTBEAT_S": "1", "KDGRID_CLAIM_STALE_S": "3"}


def _age_claim(store: Path, trial_id: str, seconds: float) -> None:
    """Make the claim of ``trial_id`` look ``seconds`` old (its holder stopped beating that long ago)."""
    path = claim_path(store, trial_id)
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_takeover_bumps_the_generation_and_the_old_holder_fails_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CLAIM_HEARTBEAT_S", "1")
    monkeypatch.setenv("KDGRID_CLAIM_STALE_S", "3")
    trial = make_trial(0)
    held, _ = claim_trials(tmp_path, [trial.trial_id])
    with held:
        first = held.claims[trial.trial_id]
        assert first.generation == 1 and held.validate(trial.trial_id) is None
        _age_claim(tmp_path, trial.trial_id, 10)
        taker = try_claim(tmp_path, trial.trial_id)
        assert taker is not None and taker.generation == 2 and taker.token != first.token
        assert read_claim(tmp_path, trial.trial_id) == taker
        why = held.validate(trial.trial_id)
        assert why is not None and "generation 2" in why
        assert trial.trial_id in held.lost and trial.trial_id not in held
    assert read_claim(tmp_path, trial.trial_id) == taker  # the loser never releases the taker's claim


def test_a_claim_whose_heartbeat_is_past_the_stale_limit_fails_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CLAIM_STALE_S", "3")
    monkeypatch.setenv("KDGRID_CLAIM_HEARTBEAT_S", "1")
    trial = make_trial(0)
    claim = try_claim(tmp_path, trial.trial_id)
    assert claim is not None
    held = HeldClaims(tmp_path, [claim], interval_s=3600)  # no heartbeat during the test
    with held:
        _age_claim(tmp_path, trial.trial_id, 5)  # nobody took it yet, but someone may be doing so now
        why = held.validate(trial.trial_id)
        assert why is not None and "no heartbeat for 5 s" in why
    assert claim_files(tmp_path) == []  # let go, so another run trains it cleanly


def test_a_holder_that_beats_again_keeps_its_claim_against_a_taker_that_saw_it_stale(tmp_path: Path) -> None:
    from kdgrid.store.claims import _read, _take_over, _write_temporary

    trial = make_trial(0)
    claim = try_claim(tmp_path, trial.trial_id)
    assert claim is not None
    _age_claim(tmp_path, trial.trial_id, 1000)
    path = claim_path(tmp_path, trial.trial_id)
    seen_stale = _read(path, time.time())
    assert seen_stale is not None
    os.utime(path)  # the holder comes back and beats between the taker's look and its replace
    replacement = _write_temporary(path.parent, "{}")
    assert not _take_over(path, seen_stale, replacement)
    assert read_claim(tmp_path, trial.trial_id) == claim


def test_a_row_finished_after_the_claim_was_taken_over_is_superseded_and_not_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trial, mate = make_trial(0, k=0), make_trial(0, k=1)

    def stalled_core(trials, *, checkpoint_dir=None, on_result=None, on_step=None):
        results = fakes.fake_run_job(trials[:1], checkpoint_dir=checkpoint_dir)
        # another run took the first trial over while this process was stopped
        _age_claim(tmp_path, trial.trial_id, 10_000)
        assert try_claim(tmp_path, trial.trial_id) is not None
        assert on_result is not None
        on_result(results[0])
        rest = fakes.fake_run_job(trials[1:], checkpoint_dir=checkpoint_dir)
        on_result(rest[0])
        return results + rest

    run_job_to_store([trial, mate], tmp_path, sweep="s", run_job=stalled_core)
    rows = sorted(store_rows(tmp_path))
    assert rows == sorted([(trial.trial_id, SUPERSEDED), (mate.trial_id, "done")])
    assert trial_states(rows) == {mate.trial_id: "done"}  # the superseded row counts neither way
    frame = read_store(tmp_path)
    late = frame[frame["status"] == SUPERSEDED].iloc[0]
    extra = json.loads(late["extra_json"])
    assert extra["superseded"]["status"] == "done" and "taken over by" in extra["superseded"]["reason"]
    assert late["scores_json"] is not None  # its outcome is kept for inspection
    assert f"trial {trial.trial_id}: row recorded superseded, not done" in capsys.readouterr().err


def test_a_job_whose_claims_are_all_taken_over_stops_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CLAIM_HEARTBEAT_S", "0.05")
    monkeypatch.setenv("KDGRID_CLAIM_STALE_S", "3")
    trials = [make_trial(0, k=k, test_seconds=2.0, test_log=str(tmp_path / "log.txt")) for k in range(3)]
    taken = {"done": False}

    def core(trials, *, checkpoint_dir=None, on_result=None, on_step=None):
        def step(done: int, total: int) -> None:
            if not taken["done"]:
                taken["done"] = True
                for t in trials:  # every claim replaced by another run's
                    claim_path(tmp_path, t.trial_id).write_text(json.dumps({"token": "another run's"}))
            assert on_step is not None
            on_step(done, total)

        return fakes.fake_run_job(trials, checkpoint_dir=checkpoint_dir, on_result=on_result, on_step=step)

    started = time.monotonic()
    run_job_to_store(trials, tmp_path, sweep="s", run_job=core)
    assert time.monotonic() - started < 4.0, "the job trained on after losing every claim"
    assert store_rows(tmp_path) == []  # nothing written: the new holders train them
    assert [event for event, *_ in log_events(tmp_path / "log.txt")] == ["start"]


def test_two_done_rows_of_one_trial_count_once_and_are_named_everywhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sweep, store = sweep_file(tmp_path, trials=3, seconds=0.0), tmp_path / "store"
    code, out = invoke("run", sweep, "--store", store, *FAKE)
    assert code == 0, out
    twice = trial_ids(sweep)[0]
    frame = read_store(store)
    first = frame[frame["trial_id"] == twice]
    # the same trial trained again by a process that escaped the fence (or a store merged from two copies)
    config = json.loads(first.iloc[0]["trial_json"])
    config.pop("v")  # the id's format version, not a field
    again = Trial.from_dict(config)
    assert again.trial_id == twice
    write_result(store, fakes.fake_run_job([again])[0], sweep="claims", study="grid")

    frame = read_store(store)
    assert list(duplicate_done_trials(frame)) == [twice]
    with caplog.at_level(logging.WARNING, logger="kdgrid.store"):
        assert len(latest_done_rows(frame)) == 3
    assert any(f"{twice} (2 done rows)" in m for m in caplog.messages)
    status = as_json("status", sweep, "--store", store)
    assert status["done"] == 3
    code, out = invoke("store", "check", "--store", store)
    assert code == 1 and f"trial {twice}: 2 done rows" in out and "more than one done row" in out


def _run_in_session(*args: object, env: dict[str, str]) -> subprocess.Popen[str]:
    """``kdgrid ARGS`` (with the test fakes) in a new session: its own process group, stoppable as a whole."""
    return subprocess.Popen(
        [*KDGRID_WITH_FAKES, *[str(a) for a in args]],
        env={**os.environ, **env},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for(path: Path, timeout: float, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the run ended first: {process.communicate()[0]}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow  # two fresh kdgrid processes and a stall past the stale limit: about a minute
def test_a_run_stalled_past_the_stale_limit_never_gets_a_trial_counted_twice(tmp_path: Path) -> None:
    """The stall reproduction: SIGSTOP of a run's process group past the stale limit, a second run takes the
    trials over and trains them, SIGCONT: exactly one counted done row per trial; the stalled run's late row is
    kept as superseded; each run's summary counts only what it trained and says what happened."""
    paused = tmp_path / "paused"
    # one group (one data order): one job claims every trial at once; its first trial pauses once
    sweep = sweep_file(tmp_path, trials=6, seconds=0.3, data_seed=0, test_pause_once=str(paused))
    store = tmp_path / "store"
    args = ("run", sweep, "--store", store, *FAKE)

    first = _run_in_session(*args, env=FAST_CLAIMS)
    try:
        _wait_for(paused, 120, first)  # the first trial has trained and is about to hand its result over
        os.killpg(first.pid, signal.SIGSTOP)
        time.sleep(4.5)  # past the 3 s stale limit (its last heartbeat was at most 1 s before the stop)
        second = _run_in_session(*args, env=FAST_CLAIMS)
        second_out = second.communicate(timeout=240)[0]
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    first_out = first.communicate(timeout=240)[0]
    assert second.returncode == 0, second_out
    assert first.returncode == 0, first_out

    ids = trial_ids(sweep)
    rows = store_rows(store)
    done = collections.Counter(t for t, status in rows if status == "done")
    assert done == collections.Counter(ids), "a trial has no done row, or two"
    frame = read_store(store)
    late = frame[frame["status"] == SUPERSEDED]
    assert len(late) >= 1 and set(late["pid"]) == {first.pid}  # the stalled run's late rows, kept
    assert set(frame.loc[frame["status"] == "done", "pid"]) == {second.pid}  # the second run trained them all
    assert as_json("status", sweep, "--store", store)["done"] == len(ids)
    assert duplicate_done_trials(frame) == {}
    assert claim_files(store) == []

    # both runs say so, and each counts only what it trained itself
    assert f"this run took over {len(ids)} stale claim(s)" in second_out, second_out
    assert f"(this run: {len(ids)} done, 0 failed)" in second_out, second_out
    assert f"(this run: 0 done, 0 failed, {len(late)} superseded)" in first_out, first_out
    assert f"{len(late)} row(s) of this run superseded" in first_out, first_out
    code, out = invoke("store", "check", "--store", store)
    assert code == 0 and f"{len(late)} superseded row(s)" in out


def test_the_worker_fences_a_trials_epoch_checkpoints_and_kept_student_as_it_fences_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The claim is taken over after the first of three epochs (the holder stalled): the old holder replaces no
    checkpoint of the taker's, leaves none behind after the taker finished, keeps no student, and its row is
    superseded."""
    from kdgrid.launch.assistant_worker import JobChain
    from kdgrid.store.trained_students import student_dir, want_students

    store, checkpoints = tmp_path / "store", tmp_path / "checkpoints"
    trial = make_trial(0, test_epochs=3, test_seconds=0.0)
    progress = checkpoints / f"{trial.trial_id}.epochs"
    want_students(store, [trial.trial_id])  # a dependant learns from its student
    kept: list[str] = []

    def stalling_core(trials, *, checkpoint_dir=None, on_result=None, on_step=None, on_model=None, fence=None):
        assert fence is not None and on_model is not None  # handed down by the worker

        def step(epoch: int, epochs: int) -> None:
            if epoch == 2 and read_claim(store, trial.trial_id).generation == 1:
                assert progress.read_text() == "1"  # epoch 1's checkpoint, written while held
                _age_claim(store, trial.trial_id, 10_000)  # stalled; another run takes the trial over...
                assert try_claim(store, trial.trial_id) is not None
                progress.write_text("2")  # ...and saves its own, newer checkpoint

        def on_done(result):
            on_model(result.trial, object())  # the core hands the trained student over before the row
            on_result(result)

        return fakes.fake_run_job(trials, checkpoint_dir=checkpoint_dir, on_result=on_done, on_step=step,
                                  fence=fence)  # fmt: skip

    original = JobChain.on_model

    def recording(self, trial_, model):  # the chain's own fence decides; nothing may reach the save
        kept.append(trial_.trial_id)
        return original(self, trial_, model)

    JobChain.on_model = recording  # type: ignore[method-assign]
    try:
        run_job_to_store([trial], store, sweep="s", checkpoint_dir=checkpoints, run_job=stalling_core)
    finally:
        JobChain.on_model = original  # type: ignore[method-assign]
    assert kept == [trial.trial_id] and not student_dir(store, trial.trial_id).exists()  # asked, not saved
    assert progress.read_text() == "2"  # the taker's checkpoint: neither replaced (epoch 2) nor removed (done)
    assert store_rows(store) == [(trial.trial_id, SUPERSEDED)]
    err = capsys.readouterr().err
    assert f"trial {trial.trial_id}: its trained student is not kept" in err, err
