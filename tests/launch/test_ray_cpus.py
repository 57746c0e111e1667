"""The Ray executor counts the CPUs this process may use (affinity mask, cgroup quota), never the machine's cores."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest

from kdgrid.launch import ray as ray_executor
from kdgrid.launch.ray import RayExecutor


@pytest.fixture
def three_of_64_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the machine: never what is used
    monkeypatch.setattr(ray_executor, "usable_cpus", lambda: 3)  # what SLURM or the container grants


@pytest.mark.usefixtures("three_of_64_cpus")
def test_concurrent_jobs_are_bounded_by_the_usable_cpus() -> None:
    assert RayExecutor().concurrent_jobs() == (3, "3 CPUs / 1 per job")
    assert RayExecutor(ray_cpus_per_job=2).concurrent_jobs() == (1, "3 CPUs / 2 per job")
    assert RayExecutor(ray_num_cpus=8, ray_cpus_per_job=2).concurrent_jobs() == (4, "8 CPUs / 2 per job")


@pytest.mark.usefixtures("three_of_64_cpus")
def test_the_local_runtime_is_started_with_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    fake = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: calls.append(kw))
    monkeypatch.setitem(sys.modules, "ray", fake)
    assert RayExecutor()._init_ray() is True
    assert RayExecutor(ray_num_cpus=5)._init_ray() is True
    assert [c["num_cpus"] for c in calls] == [3, 5] and calls[0]["address"] == "local"
