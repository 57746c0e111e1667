"""Per-example weights: how much each example's distillation loss counts, from what the teacher says about it.

A weight function is registered with `register_example_weight` and chosen by the trial option ``example_weight``
(default ``uniform``: every example counts the same, and the objective computes exactly what it computes without
weights). It receives an `ExampleBatch` (the teacher's and the student's logits, the gold labels, the teacher's
own loss per example) and returns raw weights ``[B]``, finite and >= 0; `normalised_weights` divides them by their
batch mean, so the weights of a batch average 1 and the loss keeps its scale::

    w_i = r_i / mean_j r_j                soft = mean_i w_i * soft_i          (soft_i: example i's soft loss)

The weights scale the soft-label (distillation) term; they carry no gradient (the raw weights are detached).
The built-in ones:

- ``uniform``: ``r_i = 1``.
- ``teacher_loss``: ``r_i = l^T_i``, the teacher's own loss on example i (cross-entropy against the gold label, or
  squared error for regression): examples the teacher finds hard count more, the instance weighting of
  AdaKD-style methods (the difficulty measured by the teacher's loss).
- ``adakd_batchnorm``: ``r_i = f(l^T_i)`` with ``f`` the option ``adakd_function`` (AdaKD's ``exp(-1/sqrt(l))`` by
  default; `kdgrid.core.adakd`), normalised as above.
- ``adakd``: the same ``r_i``, read by the objective as AdaKD's per-instance trade-off between the soft and the
  hard term, unnormalised (`kdgrid.core.adakd.trade_off_alphas`), not through `normalised_weights`.

A weight function uses tensor methods only (``x.exp()``, ``x.softmax(-1)``, ``x.new_ones(n)``), so this registry,
and the names a sweep validates against, import no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kdgrid.core.adakd import ADAKD, ADAKD_BATCHNORM, adakd
from kdgrid.core.named_registry import registrar, registration_problem
from kdgrid.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor

DEFAULT_EXAMPLE_WEIGHT = "uniform"


@dataclass(frozen=True)
class ExampleBatch:
    """What a weight function may read about one batch (every tensor detached, float32).

    Attributes:
        student_logits: ``[B, C]`` (C = 1 for regression).
        teacher_logits: ``[B, C]``.
        labels: ``[B]`` gold labels (class ids, or floats for regression).
        teacher_loss: ``[B]`` the teacher's loss per example: cross-entropy of its logits against the gold
            label (natural log), or squared error for regression.
        regression: the task has one output.
        progress: the training progress in [0, 1] (`kdgrid.core.schedules.progress`).
        options: the trial's options (a weight function may read its own registered options).
    """

    student_logits: Tensor
    teacher_logits: Tensor
    labels: Tensor
    teacher_loss: Tensor
    regression: bool
    progress: float
    options: dict[str, Any]


ExampleWeight = Callable[[ExampleBatch], "Tensor"]
EXAMPLE_WEIGHTS: dict[str, ExampleWeight] = {}


# ``@register_example_weight(name)``: register the decorated ``ExampleBatch -> raw weights [B]`` function as ``name``.
register_example_weight = registrar(EXAMPLE_WEIGHTS, "example weight")


@register_example_weight("uniform")
def uniform(batch: ExampleBatch) -> Tensor:
    return batch.teacher_loss.new_ones(batch.teacher_loss.shape[0])


@register_example_weight("teacher_loss")
def teacher_loss(batch: ExampleBatch) -> Tensor:
    return batch.teacher_loss


# AdaKD's instance weighting (kdgrid.core.adakd): the weight grows with the teacher's loss, by a chosen function;
# ``adakd`` is its trade-off (the objective reads it), ``adakd_batchnorm`` kdgrid's earlier normalised soft weight.
register_example_weight(ADAKD)(adakd)
register_example_weight(ADAKD_BATCHNORM)(adakd)


def example_weight_problem(value: object) -> str | None:
    """Why ``value`` is not a registered example weight (None when it is); names the allowed ones."""
    return registration_problem(value, EXAMPLE_WEIGHTS, "example weight")


def normalised_weights(name: str, batch: ExampleBatch) -> Tensor:
    """The weights ``[B]`` of ``name`` for ``batch``, divided by their mean (so they average 1).

    Raises:
        ConfigError: an unknown name, or raw weights of the wrong shape, negative, non-finite, or all zero (the
            loss would be silently wrong).
    """
    problem = example_weight_problem(name)
    if problem:
        raise ConfigError(problem)
    raw = EXAMPLE_WEIGHTS[name](batch).detach().float()
    size = batch.teacher_loss.shape[0]
    if tuple(raw.shape) != (size,):
        raise ConfigError(f"example weight {name!r} gave shape {list(raw.shape)}; expected [{size}]")
    if not bool(raw.isfinite().all()) or bool((raw < 0).any()):
        raise ConfigError(f"example weight {name!r} gave a negative or non-finite weight: {raw.tolist()}")
    mean = raw.mean()
    if not bool(mean > 0):
        raise ConfigError(f"example weight {name!r} gave all-zero weights for a batch of {size}")
    return raw / mean
