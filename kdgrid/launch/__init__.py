"""Executors: where jobs run. ``local`` (this machine, the default), ``ray`` (Ray Tune) and ``slurm`` (submitit).

All of them run a job function per job (`kdgrid.launch.worker`; default `kdgrid.launch.worker.run_job_to_store`) on the jobs of one `kdgrid.launch.job.Launch`;
build one with `get_executor(name, **settings)`. An executor's module is imported only when it is built (Ray and
submitit are heavy), Ray only when a RayExecutor runs.
"""

from kdgrid.launch.base import EXECUTORS, Executor, get_executor

__all__ = ["EXECUTORS", "Executor", "get_executor"]
