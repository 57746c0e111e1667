"""The one thread rule of a training process: the explicit setting, else OMP_NUM_THREADS, else the usable CPUs
over the training processes; and `run`'s own process (``local_workers=0``) trains under it and gets its own
threads back afterwards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import kdgrid.cpus
from kdgrid.launch.local import LocalExecutor
from kdgrid.launch.threads import THREAD_VARIABLES, threads_for_training, training_threads
from tests.launch.fakes import job_to_store, make_trial


def test_the_setting_wins_then_the_environment_then_the_cpus_over_the_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kdgrid.cpus, "usable_cpus", lambda: 8)
    assert training_threads(3, 4, {"OMP_NUM_THREADS": "5"}) == 3
    assert training_threads(None, 4, {"OMP_NUM_THREADS": "5"}) == 5
    assert training_threads(None, 4, {}) == 2
    assert training_threads(None, 1, {}) == 8
    assert training_threads(None, 16, {}) == 1  # never 0
    assert training_threads(None, 4, {"OMP_NUM_THREADS": "zero"}) == 2  # not a count: ignored


def test_threads_for_training_sets_the_variables_and_torch_and_restores_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = torch.get_num_threads()
    wanted = 3 if before != 3 else 2
    with threads_for_training(wanted):
        assert torch.get_num_threads() == wanted
        assert all(os.environ[name] == str(wanted) for name in THREAD_VARIABLES)
    assert torch.get_num_threads() == before
    assert not any(name in os.environ for name in THREAD_VARIABLES)


def test_run_trains_in_its_own_process_under_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, int]] = []

    def recording(trials, store_dir, *, sweep, studies, checkpoint_dir):
        seen.append((os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()))
        job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir)

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    wanted = 3 if before != 3 else 2
    LocalExecutor(job_fn=recording, progress=False, threads=wanted).run([[make_trial(1)]], tmp_path, sweep="s")
    assert seen == [(str(wanted), wanted)]
    assert torch.get_num_threads() == before and "OMP_NUM_THREADS" not in os.environ
