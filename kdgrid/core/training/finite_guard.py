"""The finiteness check of a student's loss without a host synchronisation per step: `FiniteGuard`.

Asking whether a loss on the GPU is finite (``if torch.isfinite(total)``) makes the host wait for every kernel
queued so far, once per student per step: the CPU can no longer queue the next step's work while the GPU runs this
one. The guard keeps its record on the loss's device instead: each step (`FiniteGuard.observe`) it notes, with
tensor operations only, the first step whose total loss was NaN or infinite and every term's unweighted value at
that step. The host reads that record once every `CHECK_EVERY_STEPS` steps (`FiniteGuard.due`) and before a
student is evaluated or checkpointed at the end of an epoch (`FiniteGuard.check`), and then refuses exactly as
`kdgrid.core.training.objective.Objective.check_finite` would have at that step: a `DivergenceError` naming the first
diverged step, the term and its layer pair, with the steps the check covered added to the message.

A student that diverged trains on for at most ``CHECK_EVERY_STEPS - 1`` steps before it is failed; its state is
undefined from the diverged step on, and it is never evaluated, checkpointed or written as done.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from kdgrid.core.training.objective import DivergenceError, Objective

CHECK_EVERY_STEPS = 50
"""Steps between two host reads of the guard: one synchronisation per 50 steps instead of one per step, and at
most 49 steps spent on a student that already diverged."""

_NONE = -1  # the first diverged step when none diverged


class FiniteGuard:
    """The first step of one student whose total loss was not finite, kept on the loss's device.

    Args:
        every: steps between two host reads (`due`); 1 checks every step (the old, synchronising behaviour).
    """

    def __init__(self, every: int = CHECK_EVERY_STEPS) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.every = every
        self._names: tuple[str, ...] = ()
        self._first_step: torch.Tensor | None = None  # int64 scalar: the first diverged step, or _NONE
        self._values: torch.Tensor | None = None  # float32 [terms + 1]: each term's value, then the total
        self._observed_from: int | None = None  # the first step observed since the last check

    def observe(self, values: Mapping[str, torch.Tensor], total: torch.Tensor, step: int) -> None:
        """Note step ``step``'s unweighted term values (0-dim tensors, `Objective.term_values`) and weighted
        ``total``; device operations only, nothing read back to the host."""
        names = tuple(values)
        stacked = torch.stack(
            [v.detach().float().reshape(()) for v in values.values()] + [total.detach().float()]
        )
        if self._first_step is None or names != self._names:
            self._names = names
            self._first_step = torch.full((), _NONE, dtype=torch.int64, device=stacked.device)
            self._values = torch.zeros_like(stacked)
        assert self._values is not None
        fresh = ~torch.isfinite(stacked[-1]) & (self._first_step == _NONE)
        self._first_step = torch.where(fresh, torch.full_like(self._first_step, step), self._first_step)
        self._values = torch.where(fresh, stacked, self._values)
        if self._observed_from is None:
            self._observed_from = step

    def due(self, step: int) -> bool:
        """Whether the host reads the record after step ``step`` (every `every` steps)."""
        return step % self.every == 0

    def check(self, objective: Objective, step: int) -> None:
        """Read the record (one synchronisation) and start a new one.

        Args:
            objective: the student's objective: its weights and layer pairs name the diverged term.
            step: the last step observed (named in the message with the first one the check covers).

        Raises:
            DivergenceError: a step since the last check had a NaN or infinite total loss; ``step`` is the first
                such step, the term and pair those `Objective.check_finite` names for that step's values.
        """
        if self._first_step is None:
            return
        first = int(self._first_step.item())
        observed_from, self._observed_from = self._observed_from, None
        if first == _NONE:
            return
        recorded = self._values.cpu()  # type: ignore[union-attr]
        terms = {name: recorded[i] for i, name in enumerate(self._names)}
        self._first_step = None
        try:
            objective.check_finite(terms, recorded[-1], first)
            # not reached: the recorded total is not finite, so check_finite raises
            error = DivergenceError(first, "total", None, float(recorded[-1]))
        except DivergenceError as found:
            error = found
        error.args = (f"{error.args[0]} (found by the finiteness check of steps {observed_from}-{step})",)
        raise error
