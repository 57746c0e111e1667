"""The one rule for the CPU threads of every process that trains, whichever executor started it.

A process that trains uses ``T`` threads for torch's intra-op pool and for the BLAS/OpenMP libraries below it:

1. the executor's explicit setting, where it has one (``local_threads``);
2. else ``OMP_NUM_THREADS`` from the environment, where it holds a whole number >= 1 (set by the user, by a
   parent kdgrid process for its workers, or by Ray for an actor: its ``num_cpus``);
3. else the CPUs this process may use (its affinity mask and cgroup quota, `kdgrid.cpus.usable_cpus`; under
   SLURM the task's own CPUs) divided by the training processes that share them: ``local_workers`` for the local
   executor's worker processes, 1 for `run`'s own process (``local_workers=0``), a SLURM array task or a Ray
   actor.

Torch's default is the machine's physical cores, whatever else runs: two students' processes on a 2-core machine
shared with other work then fight for the cores (benchmarks/README.md measures it). The rule is applied where a
process starts training (`use_threads`): ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS``
are set (read by torch when it is imported later, and inherited by children), and ``torch.set_num_threads`` is
called when torch is imported already. `run`'s own process restores what it had after the run
(`threads_for_training`). Torch-free unless torch is imported already.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, MutableMapping

from kdgrid.cpus import threads_per_worker

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def training_threads(
    requested: int | None, processes: int = 1, environ: MutableMapping[str, str] | None = None
) -> int:
    """The threads of one of ``processes`` training processes on this process's CPUs (see the module)."""
    if requested:
        return int(requested)
    text = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if text.isdigit() and int(text) >= 1:
        return int(text)
    return threads_per_worker(processes)


def use_threads(threads: int) -> None:
    """Make this process (and the processes it starts) train with ``threads`` threads."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def threads_for_training(threads: int) -> Iterator[None]:
    """`use_threads` inside, this process's variables and torch's thread count as they were after."""
    saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    torch = sys.modules.get("torch")
    saved_torch = torch.get_num_threads() if torch is not None else None
    use_threads(threads)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if saved_torch is not None and torch is not None:
            torch.set_num_threads(saved_torch)
