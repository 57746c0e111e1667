"""DOT, the Distillation-Oriented Trainer (Zhao, Song & Qiu, "DOT: A Distillation-Oriented Trainer", ICCV 2023):
SGD whose task and distillation gradients keep separate momenta.

For every parameter p with task gradient ``g_task`` and distillation gradient ``g_kd`` (`kdgrid.core.methods.grad_split.split`:
the hard-label term versus everything else of the objective, each weighted), one step is::

    v_task <- (mu - Delta) * v_task + g_task + wd * p      (wd: the parameter group's weight decay)
    v_kd   <- (mu + Delta) * v_kd   + g_kd
    p      <- p - lr * (v_task + v_kd)

with ``mu = 0.9`` (`kdgrid.core.methods.dot.spec.DOT_MOMENTUM`) and ``Delta`` the option ``dot_delta`` (default
0.075, the paper's). A larger distillation momentum lets the distillation gradient dominate the direction over
steps, which is DOT's remedy for the conflict between the two. Weight decay is added to the task side (coupled,
as in SGD); parameters with ``wd = 0`` (biases, LayerNorm) get none (`kdgrid.core.optim.decay_groups`). Buffers
start at zero, so the first step is ``p - lr * (g_task + wd p + g_kd)``. A parameter with a gradient on one side
only (a projection has no task gradient) steps by the option ``dot_form``:

- ``paper`` (default; the authors' code, megvii-research/mdistiller ``engine/dot.py``): that side's buffer alone,
  at the mean momentum ``mu``, with the weight decay on that side: ``v <- mu v + g + wd p``, ``p <- p - lr v``;
  the other buffer is left as it is;
- ``kdgrid`` (kdgrid's earlier form): the missing gradient counts as zero, both buffers decay by their own
  momenta and both step the parameter, the weight decay on the task side. The learning rate is the trial's ``lr``, scaled
by the usual warm-up/decay schedule: DOT is SGD, so its learning rate is SGD's (the paper's CIFAR runs: 0.05 to
0.1), not AdamW's. kdgrid's own Adam form of it (not the paper's) is `kdgrid.core.methods.dot.adam`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from kdgrid.core.methods.dot.spec import (
    DEFAULT_DOT_DELTA,
    DEFAULT_DOT_FORM,
    DOT_ADAM,
    DOT_ADAM_FORMULATION,
    DOT_FORM,
    DOT_FORMS,
    DOT_MOMENTUM,
)
from kdgrid.core.optimizers import OPTIMIZER
from kdgrid.core.step_hooks import StepHooks
from kdgrid.errors import ConfigError

# one parameter's step: its parameter group, the parameter, its task and its distillation gradient (None: none)
SplitStep = tuple[dict[str, Any], torch.Tensor, torch.Tensor | None, torch.Tensor | None]


class SplitGradients:
    """What DOT's optimizers share: the step's task and distillation gradients, given apart before each step
    (`set_gradients`) and taken once by the step (`take_gradients`)."""

    _split: tuple[dict[torch.Tensor, torch.Tensor], dict[torch.Tensor, torch.Tensor]] | None = None

    def set_gradients(
        self,
        params: Sequence[torch.Tensor],
        task: Sequence[torch.Tensor | None],
        distill: Sequence[torch.Tensor | None],
    ) -> None:
        """The next step's task and distillation gradients of ``params`` (None: no gradient on that side)."""
        self._split = (
            {p: g for p, g in zip(params, task, strict=True) if g is not None},
            {p: g for p, g in zip(params, distill, strict=True) if g is not None},
        )

    def take_gradients(self) -> tuple[dict[torch.Tensor, torch.Tensor], dict[torch.Tensor, torch.Tensor]]:
        """(task, distillation) gradients by parameter, for this step only; refused when none were given."""
        if self._split is None:
            raise RuntimeError(
                f"{type(self).__name__}.step needs the task and distillation gradients: call set_gradients first"
            )
        split, self._split = self._split, None
        return split

    def split_steps(self) -> Iterator[SplitStep]:
        """This step's (parameter group, parameter, task gradient, distillation gradient), for every parameter
        with a gradient on at least one side (None: none on that side); takes the gradients (`take_gradients`)."""
        task, distill = self.take_gradients()
        for group in self.param_groups:  # type: ignore[attr-defined]  # the torch.optim.Optimizer mixed in
            for p in group["params"]:
                g_task, g_kd = task.get(p), distill.get(p)
                if g_task is not None or g_kd is not None:
                    yield group, p, g_task, g_kd


class DOT(SplitGradients, torch.optim.Optimizer):
    """SGD with separate task and distillation momenta; `set_gradients` before each `step`."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float,
        momentum: float = DOT_MOMENTUM,
        delta: float = DEFAULT_DOT_DELTA,
        weight_decay: float = 0.0,
        form: str = DEFAULT_DOT_FORM,
    ) -> None:
        if not (momentum - delta >= 0 and momentum + delta < 1):
            raise ValueError(f"DOT momenta {momentum} -+ {delta} must lie in [0, 1)")
        if form not in DOT_FORMS:
            raise ValueError(f"DOT form {form!r}; allowed: {', '.join(DOT_FORMS)}")
        self.form = form
        super().__init__(
            params, {"lr": lr, "momentum": momentum, "delta": delta, "weight_decay": weight_decay}
        )

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:  # type: ignore[override]
        for group, p, g_task, g_kd in self.split_steps():
            lr, mu, delta, wd = group["lr"], group["momentum"], group["delta"], group["weight_decay"]
            state = self.state[p]
            if not state:
                state["task_momentum"] = torch.zeros_like(p)
                state["distill_momentum"] = torch.zeros_like(p)
            v_task, v_kd = state["task_momentum"], state["distill_momentum"]
            if self.form == "paper" and (g_task is None or g_kd is None):  # one side: the authors' step
                buffer, grad = (v_task, g_task) if g_kd is None else (v_kd, g_kd)
                buffer.mul_(mu).add_(grad)
                if wd:
                    buffer.add_(p, alpha=wd)
                p.sub_(buffer, alpha=lr)
                continue
            v_task.mul_(mu - delta)
            if g_task is not None:
                v_task.add_(g_task)
            if wd:
                v_task.add_(p, alpha=wd)
            v_kd.mul_(mu + delta)
            if g_kd is not None:
                v_kd.add_(g_kd)
            p.sub_(v_task + v_kd, alpha=lr)


class DotHooks(StepHooks):
    """The check of DOT (or kdgrid's Adam form, ``dot_adam``) once its student is set up: no fp16 loss scaling
    (the split gradients reach the optimizer unscaled, so a scaler would neither unscale them nor see an
    overflow); and what the row measured: DOT's one-sided form, or that ``dot_adam`` is kdgrid's extension."""

    def __init__(self, trial: Any) -> None:
        self.optimizer = str(trial.option(OPTIMIZER))
        self.form = str(trial.option(DOT_FORM) or DEFAULT_DOT_FORM)

    def formulation(self, objective: Any) -> dict[str, str]:
        if self.optimizer == DOT_ADAM:
            return {OPTIMIZER: DOT_ADAM_FORMULATION}
        return {DOT_FORM: self.form}

    def set_up(self, run: Any, job: Any) -> None:
        if run.scaler is not None:
            raise ConfigError(
                f"optimizer {self.optimizer!r} takes no fp16 loss scaling: run it with KDGRID_AMP=bf16 or off"
            )


def step_hooks(trial: Any) -> DotHooks:
    """The hooks of a trial with ``optimizer: dot`` or ``dot_adam``."""
    return DotHooks(trial)
