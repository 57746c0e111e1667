"""Real runtimes for the executor tests: a single-node SLURM cluster and a local Ray runtime (session scope).

The job functions of the tests (`tests.launch.fakes`) run in other processes: local worker processes, Ray actors,
SLURM array tasks. They import them by reference, so the repository root goes first on the ``PYTHONPATH`` these
processes inherit (Ray's raylet and sbatch pass on the environment of this process).

The SLURM fixture starts the cluster of `slurm.local_cluster` (installing its Debian packages on first use)
or reuses one already running, and stops it at the end only if it started it. It skips, saying why, only where
the cluster cannot start here: not root, not Linux, or packages missing with no working apt-get. A cluster that
should start but does not is an error, not a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.trial import Trial
from slurm.local_cluster import LocalCluster, PackagesUnavailableError, cannot_start_reason

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def fakes_importable_by_job_processes() -> Iterator[None]:
    """The repository root first on ``PYTHONPATH`` for the session, so `tests.launch.fakes` imports anywhere."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *([saved] if saved else [])])
    yield
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[LocalCluster]:
    reason = cannot_start_reason()
    if reason is not None:
        pytest.skip(f"no local SLURM cluster: {reason}")
    cluster = LocalCluster()
    try:
        started = cluster.start()
    except PackagesUnavailableError as error:
        pytest.skip(f"no local SLURM cluster: {error}")
    saved = os.environ.get("SLURM_CONF")
    os.environ.update(cluster.env())
    yield cluster
    if saved is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = saved
    if started:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[None]:
    """One local Ray runtime for all Ray tests: 2 CPUs and 1 logical GPU (no real GPU needed)."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def real_job(tiny_teacher: str) -> list[Trial]:
    """One real job for the core: two tiny students sharing one teacher pass on a small synthetic task."""
    base = dict(task="synthetic-single-binary-n64-d32", teacher=tiny_teacher, student="w32-l2-h2-f64", init="random",
                batch_size=16, max_length=24, epochs=1, lr=2e-3, seed=1, options=NOT_MEANT_TO_BE_ACCURATE)  # fmt: skip
    return [Trial(**base), Trial(**base, knowledge=("hidden_mse",), strategy="Last")]  # type: ignore[arg-type]
