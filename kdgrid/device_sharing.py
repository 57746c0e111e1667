"""How a job shares its device with other jobs: what executors tell their jobs and rows record beside latency.

A latency (Table 2) measured while other jobs run on the same GPU, or on the same CPU cores, includes their work.
The executors therefore tell each job how its device is shared (``KDGRID_DEVICE_SHARING``, set in the job's
process): the local executor's workers per GPU (``local_jobs_per_gpu``, or workers round robin over the GPUs) or
workers on the CPU, Ray's GPU fraction per job (``ray_gpus_per_job``) or jobs at once on the CPUs. A job that
is told nothing had its device to itself (jobs one after another in one process, one SLURM task per
allocation): `EXCLUSIVE`. Every done row records it (``extra["latency_sharing"]``), and the tables refuse to put
latencies measured under different sharing in one table (`analysis.tidy`). Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

SHARING_VARIABLE = "KDGRID_DEVICE_SHARING"
EXCLUSIVE = "exclusive"
UNRECORDED = "unrecorded"  # rows written before the sharing was recorded


def current_sharing() -> str:
    """How this process's device is shared, as its executor said (`EXCLUSIVE` when it said nothing)."""
    return os.environ.get(SHARING_VARIABLE, "").strip() or EXCLUSIVE


def local_sharing(gpu: str | None, slot_gpus: Sequence[str | None]) -> str:
    """The sharing of a local worker on ``gpu`` (None: the CPU) among the pool's ``slot_gpus``."""
    if gpu is None:
        workers = sum(1 for slot in slot_gpus if slot is None)
        return EXCLUSIVE if workers <= 1 else f"local: {workers} workers on the CPU"
    mates = sum(1 for slot in slot_gpus if slot == gpu)
    return EXCLUSIVE if mates <= 1 else f"local: {mates} jobs per GPU"


def ray_sharing(gpus_per_job: float, concurrent_jobs: int) -> str:
    """The sharing of a Ray job: its GPU fraction, or (CPU jobs) the jobs at once on the CPUs."""
    if gpus_per_job > 0:
        return EXCLUSIVE if gpus_per_job >= 1 else f"ray: GPU fraction {gpus_per_job:g} per job"
    return EXCLUSIVE if concurrent_jobs <= 1 else f"ray: up to {concurrent_jobs} jobs on the CPUs"
