"""`RunSettings`: how one pre-training run executes, apart from its recipe; torch-free, so that the command line
builds it without importing the training modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunSettings:
    """How a run executes (none of it is part of the recipe's key).

    Attributes:
        micro_batch: sequences per forward pass on one process.
        checkpoint_every: write a step checkpoint every this many optimizer steps.
        stop_after: stop after this many steps of this run, with a checkpoint (a time-limited job); ``None``: go
            on to the recipe's last step.
        work_dir: where step checkpoints go; ``None``: the recipe's (`kdgrid.core.pretrained.artifacts.work_dir`).
        device: ``auto`` (this process's GPU where there is one, else the CPU), ``cpu`` or ``cuda``.
        progress: show a progress bar (process 0).
    """

    micro_batch: int = 32
    checkpoint_every: int = 1000
    stop_after: int | None = None
    work_dir: Path | None = None
    device: str = "auto"
    progress: bool = True
