"""The grid language: sweep files to validated, canonical trials, and trials to jobs sharing a teacher pass.

`load_sweep(path)` parses, validates (every problem at once) and expands a sweep file into a `Sweep`;
`plan_jobs(trials)` groups trials by `kdgrid.trial.group_key` and splits big groups.
"""

from kdgrid.grid.expand import PlannedTrial, Sweep, load_sweep, store_problems
from kdgrid.grid.plan import (
    Job,
    checkpoint_dir_for,
    estimate_job_memory_gb,
    estimate_trial_memory_gb,
    group_hash,
    plan_jobs,
)

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
