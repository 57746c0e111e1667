"""``optimizer: dot_adam``: an Adam form of DOT, **kdgrid's own extension, not the paper's**. DOT (Zhao, Song &
Qiu, "DOT: A Distillation-Oriented Trainer", ICCV 2023) is SGD with separate momenta for the task and the
distillation gradients (`kdgrid.core.methods.dot.optimizer`); SGD at the paper's learning rates leaves a
BERT-style student at chance, so this form carries DOT's split momenta into the AdamW the student otherwise uses.

For a parameter p with a task gradient ``g_task`` and a distillation gradient ``g_kd`` (`kdgrid.core.methods.
grad_split.split`), step ``t`` (1-based, counted per parameter as torch's AdamW counts it) is::

    p      <- p (1 - lr wd)                                  (decoupled weight decay, as AdamW; wd per group)
    m_task <- b_task m_task + (1 - b_task) g_task            b_task = beta1 - Delta
    m_kd   <- b_kd   m_kd   + (1 - b_kd)   g_kd              b_kd   = beta1 + Delta
    v      <- beta2 v + (1 - beta2) (g_task + g_kd)^2        (one second moment, of the summed gradient)
    p      <- p - lr (m_task / c_task + m_kd / c_kd) / (sqrt(v / (1 - beta2^t)) + eps)

with ``beta1, beta2, eps`` those of the student's AdamW (`DOT_ADAM_BETAS`, `DOT_ADAM_EPS`: torch's defaults,
which ``optimizer: adamw`` runs with), ``Delta`` the option ``dot_delta`` (default 0.075, DOT's), all moments
starting at zero. ``c`` is each first moment's bias correction, ``1 - (product of the betas that moment was
decayed by)``: ``1 - b_task^t`` and ``1 - b_kd^t`` for a parameter with both gradients at every step (every
parameter of a kdgrid trial has the same sides at every step), and the exact correction of an average whose
decay changed otherwise. With ``Delta = 0`` both first moments decay alike and their sum is AdamW's first moment
of ``g_task + g_kd``: the step is AdamW's (tested against ``torch.optim.AdamW``).

A parameter with one of the two gradients only (a projection: distillation only) steps as plain AdamW on that
gradient, the analogue of DOT's one-sided step at the mean momentum: that side's first moment decays by
``beta1``, ``v`` takes that gradient's square, and ``p <- p - lr (m / c) / (sqrt(v_hat) + eps)``; the other
first moment is left as it is. Biases and LayerNorm weights get no weight decay (`kdgrid.core.optim.
decay_groups`). The learning rate is the trial's ``lr`` under the usual warm-up and linear decay: AdamW's rate.
Its state per parameter is three tensors the size of the parameter (two first moments, one second moment) and
the step count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from kdgrid.core.methods.dot.optimizer import SplitGradients
from kdgrid.core.methods.dot.spec import DEFAULT_DOT_DELTA, DOT_ADAM_BETAS, DOT_ADAM_EPS


class DotAdam(SplitGradients, torch.optim.Optimizer):
    """AdamW with DOT's split first moments (kdgrid's extension; the module says how it steps);
    `set_gradients` before each `step`."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float,
        betas: tuple[float, float] = DOT_ADAM_BETAS,
        delta: float = DEFAULT_DOT_DELTA,
        eps: float = DOT_ADAM_EPS,
        weight_decay: float = 0.0,
    ) -> None:
        beta1, beta2 = betas
        if not (beta1 - delta >= 0 and beta1 + delta < 1):
            raise ValueError(f"dot_adam's first-moment betas {beta1} -+ {delta} must lie in [0, 1)")
        if not 0 <= beta2 < 1:
            raise ValueError(f"dot_adam's beta2 {beta2} must lie in [0, 1)")
        super().__init__(
            params, {"lr": lr, "betas": betas, "delta": delta, "eps": eps, "weight_decay": weight_decay}
        )

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:  # type: ignore[override]
        for group, p, g_task, g_kd in self.split_steps():
            lr, (beta1, beta2), delta = group["lr"], group["betas"], group["delta"]
            eps, wd = group["eps"], group["weight_decay"]
            state = self.state[p]
            if not state:
                state["step"] = torch.tensor(0.0)
                state["task_moment"] = torch.zeros_like(p)
                state["distill_moment"] = torch.zeros_like(p)
                state["second_moment"] = torch.zeros_like(p)
                # the product of the betas each first moment has been decayed by (its bias correction: 1 - it)
                # (plain floats: a checkpoint restores them as they were, where a tensor would be cast to the
                # parameter's dtype)
                state["task_decay"], state["distill_decay"] = 1.0, 1.0
            state["step"] += 1
            t = float(state["step"])
            if wd:
                p.mul_(1 - lr * wd)  # AdamW's decoupled decay, before the moments' step
            both = g_task is not None and g_kd is not None
            # (gradient, its first moment, that moment's decay product, its beta); one side only: AdamW's beta1
            sides = []
            if g_task is not None:
                sides.append((g_task, "task_moment", "task_decay", beta1 - delta if both else beta1))
            if g_kd is not None:
                sides.append((g_kd, "distill_moment", "distill_decay", beta1 + delta if both else beta1))
            total = sum(g for g, *_ in sides)
            v = state["second_moment"]
            v.mul_(beta2).addcmul_(total, total, value=1 - beta2)
            denom = (v.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)  # sqrt(v_hat) + eps, as torch's AdamW
            update = torch.zeros_like(p)
            for g, moment, decay, beta in sides:
                m = state[moment]
                m.mul_(beta).add_(g, alpha=1 - beta)
                state[decay] *= beta
                update.add_(m, alpha=1 / (1 - state[decay]))
            p.addcdiv_(update, denom, value=-lr)
