"""`kdgrid run` with jobs in its own process (``local_workers=0``) never reaches for the network once everything is
prefetched, although ``huggingface_hub`` and ``datasets`` were imported online (their offline switches are module
constants read at import): the run's offline environment reaches them too, and is undone afterwards."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub.constants
import pytest

from kdgrid.launch.environment import environment, sync_offline_switches
from kdgrid.store import read_store
from kdgrid.sweep_run import RunOptions, run_sweep
from tests.hub.hub_cache import offline_environment


def _online_but_pointed_at(root: Path, monkeypatch: pytest.MonkeyPatch, kdgrid_cache: Path) -> None:
    """The libraries read ``root``'s caches, online: as a user's shell after `kdgrid prefetch`."""
    env = offline_environment(root)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(name)
        monkeypatch.delenv(name, raising=False)
    for name, value in {**env, "KDGRID_CACHE": str(kdgrid_cache)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", env["HF_HUB_CACHE"])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", Path(env["HF_DATASETS_CACHE"]))


def _no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every attempt to resolve a host name or open a connection is recorded, and fails."""
    attempts: list[str] = []

    def refuse(what: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> Any:
            attempts.append(f"{what}{args[1:] if what == 'connect' else args}")
            raise OSError(f"network access in a test: {what}")

        return refused

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    return attempts


def test_in_process_jobs_run_offline_without_any_network_attempt(
    small_hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _online_but_pointed_at(small_hub, monkeypatch, tmp_path / "kdgrid-cache")
    sweep = tmp_path / "mrpc.json"
    fixed = {"task": "mrpc", "teacher": "bert-base", "student": "bert-tiny", "init": "pretrain", "epochs": 1,
             "batch_size": 8, "max_length": 32, "max_train_samples": 16}  # fmt: skip
    sweep.write_text(json.dumps({"name": "offline", "fixed": fixed, "axes": {"seed": [0]}}))
    attempts = _no_network(monkeypatch)

    outcome = run_sweep(
        sweep,
        tmp_path / "store",
        RunOptions(executor_settings={"local_workers": 0, "local_progress": False}),
    )

    assert attempts == []
    assert outcome.ok and outcome.done_now == 1, outcome.failed_now
    assert list(read_store(tmp_path / "store")["status"]) == ["done"]
    # the run's environment is undone: this process is online again, as it was
    assert huggingface_hub.constants.HF_HUB_OFFLINE is False and datasets.config.HF_HUB_OFFLINE is False


def test_the_offline_switches_follow_the_environment_and_are_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    sync_offline_switches()
    assert not huggingface_hub.is_offline_mode() and not datasets.config.HF_HUB_OFFLINE
    with environment({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}):
        assert huggingface_hub.is_offline_mode()  # what transformers asks before a download
        assert datasets.config.HF_HUB_OFFLINE and datasets.config.HF_DATASETS_OFFLINE
    assert not huggingface_hub.is_offline_mode() and not datasets.config.HF_DATASETS_OFFLINE
    with environment({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "0"}):  # each library's own rule
        assert huggingface_hub.is_offline_mode() and not datasets.config.HF_HUB_OFFLINE
