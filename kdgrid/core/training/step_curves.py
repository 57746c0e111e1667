"""Step-level curves of one student: what its optimiser saw, every N steps, kept in its row.

A row's per-epoch curve (`kdgrid.result.TrialResult.curve`) has one point per epoch: three points for a run of
hundreds of steps, too few to see a projector overfit or two gradients fight within an epoch. `StepCurves`
records, every ``every`` optimizer steps of a student (and at its last step):

- ``terms``: each loss term's *unweighted* mean over the steps since the last point (``soft``, ``hard``,
  ``hidden_mse@1-6``, ...), the objective's own term names (docs/design.md, "The objective");
- ``weighted``: each term's weight at the point's step times that mean: what the optimiser was minimising
  (a term of weight 0 is 0; under LKD the learned multipliers are not included);
- ``total``: the mean of the weighted total the step back-propagated (``Objective.total``);
- ``lr``: the learning rate of the student's first parameter group used at the point's step;
- ``grad_norm``: the L2 norm of the student's and its projections' gradients at the point's step, before any
  clipping (unscaled under fp16 loss scaling; 0 under the DOT optimizer, which is handed its two gradients
  directly instead of through ``.grad``);
- ``cosine``: where the trial logs the task/distillation gradient cosine (option ``grad_cosine_batches``,
  `kdgrid.core.methods.grad_split.split`), the mean of the cosines sampled since the last point (None where none was);
- ``mapping``: a learnable strategy's mapping (`kdgrid.core.mapping.LayerMapping.summary`, e.g. LAD's gate
  weights ``[L_S][L_T]``) at the steps in ``mapping.steps``, at most `MAPPING_SNAPSHOTS` of them.

Points are at the job's 1-based global steps (``steps``: epoch e's step s is ``(e - 1) * S + s`` for S steps per
epoch), so a resumed trial continues its curve. ``every`` is ``ceil(total_steps / points)`` with ``points`` from
`KDGRID_STEP_CURVE_POINTS` (default `DEFAULT_POINTS`): a bounded number of points per row whatever the run's
length. Numbers are rounded to `SIGNIFICANT_DIGITS` significant digits. The measured size is in docs/design.md.

The recorder only reads: training is bit for bit the same with or without it (the per-step sums stay on the
device; the host reads them once per point). The record is plain data (lists and numbers), kept in
`TrialResult.step_curves` and so in the epoch checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from kdgrid.env_numbers import positive_from_env

DEFAULT_POINTS = 100  # points per trial: 2-7 kB a row compacted (docs/design.md), ~0.2 GB for 30,000 rows
POINTS_ENV = "KDGRID_STEP_CURVE_POINTS"
MAPPING_SNAPSHOTS = 10  # a learned mapping is a matrix per point: fewer snapshots than points
SIGNIFICANT_DIGITS = 4
FORMAT = 1  # the record's own format version (``format``), for readers of rows written by later kdgrids
SERIES = ("total", "lr", "grad_norm", "cosine")


def points_per_trial() -> int:
    """How many points a trial's curves hold at most (`POINTS_ENV`, else `DEFAULT_POINTS`)."""
    return int(positive_from_env(POINTS_ENV, DEFAULT_POINTS, expected="a whole number of points > 0"))


def every_for(total_steps: int, points: int) -> int:
    """Steps between two points so that ``total_steps`` give at most ``points`` points (>= 1)."""
    return max(1, math.ceil(max(1, total_steps) / max(1, points)))


def rounded(value: float) -> float | None:
    """``value`` to `SIGNIFICANT_DIGITS` significant digits; None for NaN and infinities (JSON has none)."""
    if not math.isfinite(value):
        return None
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def _rounded_tree(value: Any) -> Any:
    if isinstance(value, float):
        return rounded(value)
    if isinstance(value, list):
        return [_rounded_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded_tree(v) for k, v in value.items()}
    return value


def gradient_norm(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """The L2 norm of the gradients of ``params`` flattened into one vector (0 when none has a gradient)."""
    norms = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    if not norms:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack(norms))


def new_record(every: int, total_steps: int, num_labels: int) -> dict[str, Any]:
    """An empty record (see the module); ``num_labels`` lets a reader place chance (ln C) for classification."""
    return {
        "format": FORMAT,
        "every": every,
        "total_steps": total_steps,
        "num_labels": num_labels,
        "steps": [],
        "terms": {},
        "weighted": {},
        **{name: [] for name in SERIES},
        "mapping": {"steps": [], "values": []},
    }


class StepCurves:
    """One student's recorder: `observe` every step, `close` at the steps `due` names, `observe_cosine` when a
    cosine is sampled. Writes into ``holder.step_curves`` (a `TrialResult`), looked up at each point, so a
    checkpoint's restore that replaces the record is followed."""

    def __init__(self, holder: Any, every: int, total_steps: int, num_labels: int) -> None:
        self.holder = holder
        self.every = every
        self.total_steps = total_steps
        self.mapping_every = every * max(1, math.ceil(points_per_trial() / MAPPING_SNAPSHOTS))
        if not holder.step_curves:
            holder.step_curves = new_record(every, total_steps, num_labels)
        self.sums: dict[str, torch.Tensor] = {}
        self.total_sum: torch.Tensor | None = None
        self.count = 0
        self.cosines: list[float] = []

    @classmethod
    def for_student(cls, holder: Any, total_steps: int, num_labels: int) -> StepCurves:
        return cls(holder, every_for(total_steps, points_per_trial()), total_steps, num_labels)

    def observe(self, values: Mapping[str, torch.Tensor], total: torch.Tensor) -> None:
        """Add one step's unweighted terms and weighted total (kept on the device: no host sync)."""
        for name, value in values.items():
            detached = value.detach().float()
            self.sums[name] = self.sums[name] + detached if name in self.sums else detached
        detached_total = total.detach().float()
        self.total_sum = detached_total if self.total_sum is None else self.total_sum + detached_total
        self.count += 1

    def observe_cosine(self, value: float) -> None:
        self.cosines.append(value)

    def due(self, step: int) -> bool:
        """Whether ``step`` (1-based, the job's) closes a point."""
        return step % self.every == 0 or step == self.total_steps

    def close(
        self,
        step: int,
        weights: Mapping[str, float],
        lr: float,
        grad_norm: float,
        mapping: Mapping[str, Any] | None = None,
    ) -> None:
        """Close the point of ``step``: the means since the last point, the weights, ``lr`` and ``grad_norm``
        of this step, and ``mapping`` (a learnable strategy's summary) when a snapshot is due."""
        if self.count == 0:
            return
        record = self.holder.step_curves
        index = len(record["steps"])
        record["steps"].append(step)
        means = {name: float(value) / self.count for name, value in self.sums.items()}
        for name, mean in means.items():
            # a term first seen late (a curriculum's stage) gets None for the points before it
            for key, value in (("terms", mean), ("weighted", weights.get(name, 1.0) * mean)):
                series = record[key].setdefault(name, [None] * index)
                series.append(rounded(value))
        for key in ("terms", "weighted"):
            for series in record[key].values():
                if len(series) < index + 1:
                    series.append(None)
        assert self.total_sum is not None
        record["total"].append(rounded(float(self.total_sum) / self.count))
        record["lr"].append(rounded(lr))
        record["grad_norm"].append(rounded(grad_norm))
        finite = [c for c in self.cosines if math.isfinite(c)]
        record["cosine"].append(rounded(sum(finite) / len(finite)) if finite else None)
        if mapping and (step % self.mapping_every == 0 or step == self.total_steps or index == 0):
            values = {k: v for k, v in mapping.items() if k != "method"}
            record["mapping"]["steps"].append(step)
            record["mapping"]["values"].append(_rounded_tree(values))
        self.sums, self.total_sum, self.count, self.cosines = {}, None, 0, []
