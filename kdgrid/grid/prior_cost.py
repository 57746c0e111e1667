"""What a sweep will cost before any of its trials has run: FLOPs from the model shapes, at a measured speed.

For each job (trials sharing one teacher pass): ``epochs x training examples`` sequences, each padded to
``max_length`` tokens (an upper bound: batches are padded to their longest sequence only), costing one teacher
forward pass (shared by the job's students) plus, per student, a forward and a backward pass (3 x its forward
FLOPs). Forward FLOPs per sequence: `kdgrid.core.model.shapes.StudentShape.flops_per_sequence`, from the student's
shape and the teacher's (`kdgrid.core.trial_rules.teacher_shape`: its config where this machine has it, else the
shape declared for a paper teacher). Training examples: the GLUE training-set sizes, a synthetic task's own size,
an offline corpus's training split as its ``split.json`` records it (once fetched), capped by
``max_train_samples``; a trial whose task's size is unknown here (a local task of your own files without a cap, a
corpus not fetched yet) is left out and counted.

The speed: ``KDGRID_FLOPS_PER_S`` when set; else the offline demo's measured time (`DEMO_SECONDS`, the 52 trials
from a fresh clone on 2 idle CPU cores) against the demo sweep's own FLOP count by the same formula, so that the
padding upper bound and the non-matrix work (loss terms, optimizer, evaluation) are priced as the demo paid
them. On a GPU the default is far too slow: set the variable, or read the store-based estimate once a few trials
are done (`kdgrid.grid.state.estimate_cost`).
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kdgrid.assets import corpus_files
from kdgrid.core.data import get_task
from kdgrid.core.model.shapes import student_shape
from kdgrid.core.trial_rules import teacher_shape
from kdgrid.env_numbers import positive_from_env
from kdgrid.errors import AssetMissingError, ConfigError
from kdgrid.trial import Trial

# Training-set sizes of the GLUE tasks (the `datasets` "glue" configurations' train splits; Wang et al. 2018).
GLUE_TRAIN_EXAMPLES = {
    "cola": 8_551,
    "sst2": 67_349,
    "mrpc": 3_668,
    "qqp": 363_846,
    "stsb": 5_749,
    "mnli": 392_702,
    "qnli": 104_743,
    "rte": 2_490,
    "wnli": 635,
}
DEMO_SECONDS = 451.0
"""The demo sweep's 52 trials, measured from a fresh clone on 2 idle CPU cores (the README's figure)."""
SPEED_ENV = "KDGRID_FLOPS_PER_S"
TRAINING_FACTOR = 3  # forward + backward ~ 3 forward passes


@functools.cache
def corpus_train_size(name: str) -> int | None:
    """Training examples of an offline corpus, as its split recorded them when it was fetched (None before)."""
    try:
        record = json.loads(corpus_files(name).split.read_text())
    except AssetMissingError:
        return None
    return int(record["train_size"])


def train_examples(trial: Trial) -> int | None:
    """Training examples one epoch of ``trial`` reads, or None where this machine cannot tell without its data."""
    spec = get_task(trial.task)
    size: int | None = None
    if spec.source == "glue":
        size = GLUE_TRAIN_EXAMPLES.get(spec.name)
    elif spec.source == "synthetic":
        size = int(spec.param("train_size"))
    elif spec.param("asset") is not None:
        size = corpus_train_size(str(spec.param("asset")))
    cap = trial.max_train_samples
    if cap is not None:
        return cap if size is None else min(size, cap)
    return size


def job_flops(job: list[Trial]) -> float | None:
    """Training FLOPs of one job (see the module docstring); None when its size or teacher shape is unknown."""
    first = job[0]
    examples = train_examples(first)
    teacher = teacher_shape(first.teacher, first.task)
    if examples is None or teacher is None:
        return None
    length = first.max_length
    per_sequence = teacher.flops_per_sequence(length) + sum(
        TRAINING_FACTOR * student_shape(trial.student).flops_per_sequence(length) for trial in job
    )
    return float(first.epochs * examples * per_sequence)


@dataclass(frozen=True)
class PriorCost:
    """A sweep's a-priori cost: FLOPs, seconds at ``flops_per_s``, and the trials that could not be priced."""

    flops: float
    seconds: float
    flops_per_s: float
    speed_basis: str
    unpriced_trials: int

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "seconds": round(self.seconds, 1), "hours": round(self.seconds / 3600, 3),
                "flops_per_s": self.flops_per_s, "speed_basis": self.speed_basis,
                "unpriced_trials": self.unpriced_trials}  # fmt: skip


@functools.cache
def _demo_speed() -> float:
    """FLOP/s of the demo as measured: its FLOPs (this formula) over `DEMO_SECONDS`."""
    from kdgrid.bundled_sweeps import bundled_sweep
    from kdgrid.grid.expand import load_sweep
    from kdgrid.grid.plan import plan_jobs

    path = bundled_sweep("demo")
    if path is None:
        raise ConfigError("the demo sweep is missing from this installation; set KDGRID_FLOPS_PER_S")
    jobs = plan_jobs([planned.trial for planned in load_sweep(path).trials])
    flops = [job_flops(job) for job in jobs]
    return sum(f for f in flops if f is not None) / DEMO_SECONDS


def speed() -> tuple[float, str]:
    """(FLOP/s, where it comes from): ``KDGRID_FLOPS_PER_S``, else the demo's measured speed.

    Raises:
        ConfigError: a ``KDGRID_FLOPS_PER_S`` that is not a number > 0.
    """
    value = positive_from_env(SPEED_ENV, math.nan, expected="FLOP/s > 0 (e.g. 2e12)")
    if not math.isnan(value):
        return value, f"{SPEED_ENV}={os.environ[SPEED_ENV].strip()}"
    rate = _demo_speed()
    return rate, (
        f"the demo's measured speed ({rate / 1e9:.0f} GFLOP/s: {DEMO_SECONDS:.0f} s on 2 CPU cores); "
        f"set {SPEED_ENV} for this machine"
    )


def prior_cost(jobs: Iterable[list[Trial]]) -> PriorCost:
    """The a-priori cost of ``jobs`` (lists of trials sharing a teacher pass, as `kdgrid.grid.plan_jobs` makes)."""
    total, unpriced = 0.0, 0
    for job in jobs:
        flops = job_flops(job)
        if flops is None:
            unpriced += len(job)
        else:
            total += flops
    rate, basis = speed()
    return PriorCost(total, total / rate, rate, basis, unpriced)
