"""The CPUs a process may use: its affinity mask capped by its cgroup's quota (v2 ``cpu.max`` of its own cgroup
and its parents, v1 ``cfs_quota_us``), read from a fake cgroup tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kdgrid import cpus
from kdgrid.cpus import cgroup_cpu_limit, threads_per_worker, usable_cpus


def cgroup_tree(root: Path, files: dict[str, str], own: str | None = None) -> Path:
    """A cgroup mount at ``root`` with ``files`` (relative path -> text) and a ``/proc/self/cgroup`` naming the
    process's own v2 cgroup ``own``; returns that file's path."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    proc = root.parent / "proc-self-cgroup"
    proc.write_text(f"0::{own}\n" if own else "")
    return proc


@pytest.fixture
def eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the machine's count is never what is used


@pytest.mark.usefixtures("eight_cpus")
def test_without_a_quota_the_affinity_mask_decides(tmp_path: Path) -> None:
    proc = cgroup_tree(tmp_path / "cg", {"cpu.max": "max 100000"})
    assert cgroup_cpu_limit(tmp_path / "cg", proc) is None
    assert usable_cpus(tmp_path / "cg", proc) == 8


@pytest.mark.usefixtures("eight_cpus")
def test_the_own_cgroups_quota_and_its_parents_cap_the_cpus(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    proc = cgroup_tree(
        root,
        {
            "cpu.max": "max 100000",
            "slurm/cpu.max": "600000 100000",  # 6 CPUs for the whole allocation
            "slurm/job_7/cpu.max": "250000 100000",  # 2.5 for this job: 2 threads at full speed
        },
        own="/slurm/job_7",
    )
    assert cgroup_cpu_limit(root, proc) == 2.5
    assert usable_cpus(root, proc) == 2


@pytest.mark.usefixtures("eight_cpus")
def test_a_v1_quota_counts_and_minus_one_means_none(tmp_path: Path) -> None:
    root = tmp_path / "v1"
    proc = cgroup_tree(root, {"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000"})
    assert usable_cpus(root, proc) == 3
    (root / "cpu/cpu.cfs_quota_us").write_text("-1\n")
    assert usable_cpus(root, proc) == 8


@pytest.mark.usefixtures("eight_cpus")
def test_a_quota_below_one_cpu_still_gives_one_thread(tmp_path: Path) -> None:
    proc = cgroup_tree(tmp_path / "cg", {"cpu.max": "50000 100000"})
    assert usable_cpus(tmp_path / "cg", proc) == 1


def test_threads_per_worker_divide_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpus, "usable_cpus", lambda: 6)
    assert [threads_per_worker(w) for w in (1, 2, 4, 12)] == [6, 3, 1, 1]


def test_the_local_executor_gives_its_workers_threads_from_the_usable_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workers on a machine of 64 cores whose affinity mask allows 2: one thread each, not 32."""
    from kdgrid.launch.local import LocalExecutor

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # the rule reads it first (a test process may set it)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda *args: None)
    assert LocalExecutor(workers=2).worker_threads(2) == 1
    assert LocalExecutor(workers=2, threads=3).worker_threads(2) == 3  # as set
