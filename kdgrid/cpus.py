"""The CPUs this process may use: its affinity mask and its cgroup's CPU quota, not the machine's core count.

``os.cpu_count()`` counts the machine's cores. Under SLURM (a task bound to some of them) and in containers (a
cgroup quota, e.g. ``docker --cpus 4``) a process may use far fewer, and threads per worker computed from the
machine's count would oversubscribe them: every worker's torch threads fight for the same few cores. Torch-free,
so the executors read it without importing torch.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")


def affinity_cpus() -> int:
    """The CPUs of this process's affinity mask (``os.sched_getaffinity``; the machine's count where the platform
    has no affinity masks, as macOS)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _own_cgroup_dirs(root: Path, proc_cgroup: Path) -> list[Path]:
    """The cgroup folders that may hold this process's quota, innermost first: its own v2 cgroup (``0::/path`` in
    ``/proc/self/cgroup``), then the root of the mount (inside a container, the container's own cgroup)."""
    folders: list[Path] = []
    for line in (_read(proc_cgroup) or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "" and path.startswith("/"):
            own = root / path.lstrip("/")
            while own != root and root in own.parents:
                folders.append(own)
                own = own.parent
    folders.append(root)
    return folders


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (quota / period), the smallest of its own and its parents'
    (cgroup v2 ``cpu.max``: ``"max 100000"`` = none, ``"200000 100000"`` = 2 CPUs; v1 ``cpu/cpu.cfs_quota_us``
    over ``cpu.cfs_period_us``, -1 = none); None without a quota or a cgroup file system."""
    limits: list[float] = []
    for folder in _own_cgroup_dirs(root, proc_cgroup):
        text = _read(folder / "cpu.max")
        if text:
            quota, _, period = text.partition(" ")
            if quota != "max" and quota.isdigit() and period.isdigit() and int(period) > 0:
                limits.append(int(quota) / int(period))
    quota_v1 = _read(root / "cpu" / "cpu.cfs_quota_us")
    period_v1 = _read(root / "cpu" / "cpu.cfs_period_us")
    if quota_v1 and period_v1 and quota_v1.isdigit() and period_v1.isdigit() and int(period_v1) > 0:
        limits.append(int(quota_v1) / int(period_v1))  # "-1" (no quota) is not digits
    return min(limits) if limits else None


def usable_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP) -> int:
    """The CPUs this process may keep busy: its affinity mask's, capped by its cgroup quota rounded down (a quota
    of 1.5 CPUs runs one thread at full speed; two would be throttled), at least 1."""
    cpus = affinity_cpus()
    limit = cgroup_cpu_limit(root, proc_cgroup)
    if limit is not None:
        cpus = min(cpus, max(1, math.floor(limit)))
    return cpus


def threads_per_worker(workers: int) -> int:
    """Torch threads for each of ``workers`` processes sharing this process's CPUs (`usable_cpus`), at least 1."""
    return max(1, usable_cpus() // max(1, workers))
