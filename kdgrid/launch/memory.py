"""How much memory one job may use where it will run: the ``auto`` default of ``--memory-budget-gb``.

The planner (`kdgrid.grid.plan.plan_jobs`) splits a group of trials into jobs whose estimated peak
(`kdgrid.grid.memory_estimate`) is at most a budget. The right budget is that of ONE job on the machine where jobs run, which only the
executor knows (how many jobs share a GPU or a node's RAM); each executor's ``memory_budget()`` derives it from
the readers below. Every amount is in GiB (what SLURM's ``--mem=32GB`` and `estimate_trial_memory_gb` mean by GB).

The readers are small module-level functions so tests can fake them (``monkeypatch.setattr(memory, "ram_gb",
...)``); executors call them through this module. Nothing here imports torch: GPUs are read with ``nvidia-smi``,
which leaves CUDA uninitialized in the launching process (a process that has initialized CUDA cannot fork
workers that use it, which would break ``local_start_method=fork``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Of the memory a job may use, leave this share to what the estimate leaves out: the CUDA context or the Python
# process and its libraries, the tokenized data, the allocator's fragmentation.
SAFETY_FRACTION = 0.9
GIB = 2**30
# cgroup v1 writes "no limit" as a huge number (about 2^63 rounded to a page); anything above 2^60 means none.
NO_CGROUP_LIMIT = 2**60
CGROUP_ROOT = Path("/sys/fs/cgroup")
# GPUs are named by nvidia-smi's indices here, which follow the PCI bus; CUDA numbers them fastest first unless
# told otherwise, so a process handed ``CUDA_VISIBLE_DEVICES=1`` must also be handed this to use the GPU whose
# memory its budget was computed from (they differ on machines with mixed GPUs).
DEVICE_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@dataclass(frozen=True)
class MemoryBudget:
    """The memory one job's students may need together, and where that figure came from.

    Attributes:
        gb: GiB per job, or None for no budget (groups are then split by ``--max-group-size`` only).
        basis: one line for people, e.g. ``"auto: 20.7 GB = 0.9 x 23.0 GB of RAM / 1 job at a time"``.
    """

    gb: float | None
    basis: str


def per_job(total_gb: float, what: str, jobs: float, share: str) -> MemoryBudget:
    """``SAFETY_FRACTION x total_gb / jobs``, with its basis written out.

    Args:
        total_gb: the memory the jobs share (GiB), e.g. one GPU's or the machine's RAM.
        what: what ``total_gb`` is, for the basis ("of RAM", "of GPU memory (the smallest visible GPU)").
        jobs: how many jobs share it at once (>= 1; may be fractional for Ray's GPU fractions).
        share: how ``jobs`` came about, for the basis ("2 local workers", "1 job at a time").
    """
    gb = SAFETY_FRACTION * total_gb / jobs
    return MemoryBudget(gb, f"auto: {gb:.1f} GB = {SAFETY_FRACTION:g} x {total_gb:.1f} GB {what} / {share}")


# -- readers --------------------------------------------------------------------------------------------------------
def physical_ram_bytes() -> int:
    """The machine's physical memory in bytes (total, not available: it does not change between ``kdgrid plan``
    and ``kdgrid run``, so both plan the same jobs)."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():  # "max" (cgroup v2: no limit) or unreadable
        return None
    value = int(text)
    return value if 0 < value < NO_CGROUP_LIMIT else None


def cgroup_limit_bytes(root: Path = CGROUP_ROOT) -> int | None:
    """The memory limit of this process's cgroup in bytes (a container's or a SLURM job's), None if there is none.

    Looks at cgroup v2 (``memory.max`` at the root, as a container sees its own cgroup, and at this process's
    path from ``/proc/self/cgroup``) and v1 (``memory/memory.limit_in_bytes``); the smallest limit found wins.
    """
    candidates = [root / "memory.max", root / "memory" / "memory.limit_in_bytes"]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            relative = path.lstrip("/")
            if not relative:
                continue
            if hierarchy == "0" and controllers == "":
                candidates.append(root / relative / "memory.max")
            elif "memory" in controllers.split(","):
                candidates.append(root / "memory" / relative / "memory.limit_in_bytes")
    except OSError:
        pass
    limits = [limit for limit in map(_read_limit, candidates) if limit is not None]
    return min(limits) if limits else None


def ram_gb() -> float:
    """This machine's RAM in GiB, capped by this process's cgroup memory limit where that is lower."""
    total = physical_ram_bytes()
    limit = cgroup_limit_bytes()
    return (min(total, limit) if limit is not None else total) / GIB


def gpu_device_present() -> bool:
    """Whether this machine has a GPU driver's device node (NVIDIA's, or ROCm's ``/dev/kfd``): a cheap test that
    spares CPU-only machines any ``nvidia-smi`` or torch call."""
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd"))


def _visible(index: str, uuid: str, visible: list[str]) -> bool:
    return any(entry == index or (entry.startswith("GPU-") and uuid.startswith(entry)) for entry in visible)


def gpu_memory_gb() -> list[float]:
    """Total memory (GiB) of each GPU this process may use; [] on a machine without one.

    Read with ``nvidia-smi`` (no torch import, CUDA left uninitialized), keeping the GPUs that
    ``CUDA_VISIBLE_DEVICES`` names by index or UUID. Where that does not work (no ``nvidia-smi``, MIG devices,
    ROCm) but a GPU device node exists, a child Python process asks torch.
    """
    visible_env = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = None if visible_env is None else [v.strip() for v in visible_env.split(",") if v.strip()]
    if visible == []:
        return []
    if not gpu_device_present():
        return []
    by_index_or_uuid = visible is None or all(v.isdigit() or v.startswith("GPU-") for v in visible)
    if shutil.which("nvidia-smi") and by_index_or_uuid:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=30, check=True,
            ).stdout  # fmt: skip
            rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line.strip()]
            return [
                float(mib) / 1024
                for index, uuid, mib in rows
                if visible is None or _visible(index, uuid, visible)
            ]
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return _gpu_memory_gb_from_torch()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them: its entries where it is set, else
    the indices ``0 .. n-1`` of the GPUs found (`gpu_memory_gb`); [] without a GPU."""
    visible_env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible_env is not None:
        named = [v.strip() for v in visible_env.split(",") if v.strip()]
        return named if gpu_memory_gb() else []
    return [str(index) for index in range(len(gpu_memory_gb()))]


def _gpu_memory_gb_from_torch() -> list[float]:
    """GPU memory as torch sees it, asked in a child process (so this one never initializes CUDA)."""
    script = (
        "import torch\n"
        "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
        "print(' '.join(str(torch.cuda.get_device_properties(i).total_memory) for i in range(n)))\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        return [int(value) / GIB for value in out.split()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
