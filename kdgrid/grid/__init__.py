"""The grid language: sweep files to validated, canonical trials, and trials to jobs sharing a teacher pass.

`load_sweep(path)` parses, validates (every problem at once) and expands a sweep file into a `Sweep`;
`plan_jobs(trials)` groups trials by `kdgrid.trial.group_key` and splits big groups.

The names below are imported when first used (PEP 562): a light module of the grid (``limits``, ``spec``) is
imported without the expansion's validation rules and their imports, so ``kdgrid --help`` starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kdgrid.grid.expand import PlannedTrial, Sweep, load_sweep, store_problems
    from kdgrid.grid.plan import (
        Job,
        checkpoint_dir_for,
        estimate_job_memory_gb,
        estimate_trial_memory_gb,
        group_hash,
        plan_jobs,
    )

_HOMES = {
    "PlannedTrial": "expand", "Sweep": "expand", "load_sweep": "expand", "store_problems": "expand",
    "Job": "plan", "checkpoint_dir_for": "plan", "estimate_job_memory_gb": "plan",
    "estimate_trial_memory_gb": "plan", "group_hash": "plan", "plan_jobs": "plan",
}  # fmt: skip

__all__ = [
    "Job",
    "PlannedTrial",
    "Sweep",
    "checkpoint_dir_for",
    "estimate_job_memory_gb",
    "estimate_trial_memory_gb",
    "group_hash",
    "load_sweep",
    "plan_jobs",
    "store_problems",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
