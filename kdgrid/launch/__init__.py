"""Executors: where jobs run. ``local`` (this machine, the default), ``ray`` (Ray Tune) and ``slurm`` (submitit).

All of them run `kdgrid.launch.worker.run_job_to_store` per job; build one with `get_executor(name, **settings)`.
Ray and submitit are imported only when their executor is built.
"""

from kdgrid.launch.base import EXECUTORS, Executor, get_executor

__all__ = ["EXECUTORS", "Executor", "get_executor"]
