"""DOT, the Distillation-Oriented Trainer (Zhao, Song & Qiu, "DOT: A Distillation-Oriented Trainer", ICCV 2023),
one step as the authors' code computes it (megvii-research/mdistiller, ``mdistiller/engine/dot.py``, with
``momentum = mu - Delta`` and ``momentum_kd = mu + Delta`` as its trainer sets them), written again in plain torch.

For a parameter p with both a task gradient g_t and a distillation gradient g_d (weight decay wd on the task side)::

    v_t <- (mu - Delta) v_t + g_t + wd p        (a buffer starts as the first gradient, i.e. from zero)
    v_d <- (mu + Delta) v_d + g_d
    p   <- p - lr (v_t + v_d)

A parameter with one of the two gradients only keeps one buffer, at the mean momentum ``mu``, with the weight
decay on the side it has: ``v <- mu v + g + wd p``, ``p <- p - lr v``.
"""

from __future__ import annotations

import torch


class ReferenceDOT:
    """The step above for a list of parameters (plain tensors, updated in place)."""

    def __init__(self, params: list[torch.Tensor], lr: float, mu: float, delta: float, wd: float) -> None:
        self.params, self.lr, self.mu, self.delta, self.wd = params, lr, mu, delta, wd
        self.task: dict[int, torch.Tensor] = {}
        self.distill: dict[int, torch.Tensor] = {}

    def _momentum(
        self, buffers: dict[int, torch.Tensor], i: int, momentum: float, grad: torch.Tensor
    ) -> torch.Tensor:
        buffers[i] = grad.clone() if i not in buffers else momentum * buffers[i] + grad
        return buffers[i]

    def step(self, task: list[torch.Tensor | None], distill: list[torch.Tensor | None]) -> None:
        for i, (p, g_t, g_d) in enumerate(zip(self.params, task, distill, strict=True)):
            both = g_t is not None and g_d is not None
            update = torch.zeros_like(p)
            if g_t is not None:
                update += self._momentum(
                    self.task, i, self.mu - self.delta if both else self.mu, g_t + self.wd * p
                )
            if g_d is not None:
                grad = g_d if both else g_d + self.wd * p
                update += self._momentum(self.distill, i, self.mu + self.delta if both else self.mu, grad)
            p -= self.lr * update
