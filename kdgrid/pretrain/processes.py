"""Which process of a data-parallel run this is, from the launcher's environment.

Two launchers are understood:

- ``torchrun`` (one node or several): ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK`` (and ``MASTER_ADDR`` /
  ``MASTER_PORT``) are set for each process.
- SLURM, one task per GPU (``srun --ntasks-per-node=<GPUs> kdgrid pretrain ...``, or a submitit job of several
  tasks): ``SLURM_NTASKS``, ``SLURM_PROCID``, ``SLURM_LOCALID``; the job script exports ``MASTER_ADDR`` (the first
  node) and may export ``MASTER_PORT`` (default `DEFAULT_MASTER_PORT`). docs/pretrain.md has a job script.

Anything else is one process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kdgrid.errors import ConfigError

DEFAULT_MASTER_PORT = "29500"  # torchrun's default


@dataclass(frozen=True)
class ProcessPlace:
    """This process's place: ``rank`` of ``world_size`` processes, ``local_rank`` on its node (its GPU), and the
    environment variables `torch.distributed`'s ``env://`` initialisation reads (empty for one process)."""

    world_size: int
    rank: int
    local_rank: int
    environment: dict[str, str]


def process_place(env: Mapping[str, str]) -> ProcessPlace:
    """Read ``env`` (the process's environment); `ConfigError` for a SLURM job of several tasks whose script did
    not export ``MASTER_ADDR``."""
    if "WORLD_SIZE" in env:
        return ProcessPlace(
            int(env["WORLD_SIZE"]), int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0")), {}
        )
    tasks = int(env.get("SLURM_NTASKS", "1"))
    if tasks > 1 and "SLURM_PROCID" in env:
        if not env.get("MASTER_ADDR"):
            raise ConfigError(
                f"a SLURM job of {tasks} tasks: export MASTER_ADDR (the first node) in the job script, e.g. "
                'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
            )
        rank, local_rank = int(env["SLURM_PROCID"]), int(env.get("SLURM_LOCALID", "0"))
        exported = {
            "WORLD_SIZE": str(tasks),
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "MASTER_ADDR": env["MASTER_ADDR"],
            "MASTER_PORT": env.get("MASTER_PORT", DEFAULT_MASTER_PORT),
        }
        return ProcessPlace(tasks, rank, local_rank, exported)
    return ProcessPlace(1, 0, 0, {})
