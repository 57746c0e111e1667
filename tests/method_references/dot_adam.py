"""``optimizer: dot_adam``, kdgrid's own Adam form of DOT (not a paper's: from DOT's split momenta, Zhao, Song &
Qiu, "DOT: A Distillation-Oriented Trainer", ICCV 2023), written again in plain numpy from its documented equations.

For a parameter p with a task gradient g_t and a distillation gradient g_d, step t (1-based)::

    p   <- p (1 - lr wd)
    m_t <- b_t m_t + (1 - b_t) g_t        b_t = beta1 - Delta
    m_d <- b_d m_d + (1 - b_d) g_d        b_d = beta1 + Delta
    v   <- beta2 v + (1 - beta2) (g_t + g_d)^2
    p   <- p - lr (m_t / (1 - b_t^t) + m_d / (1 - b_d^t)) / (sqrt(v / (1 - beta2^t)) + eps)

A parameter with one of the two gradients only (the same side at every step) is AdamW on it: that side's first
moment at beta1, ``v`` of that gradient, ``p <- p - lr (m / (1 - beta1^t)) / (sqrt(v_hat) + eps)``.
"""

from __future__ import annotations

import numpy as np


class ReferenceDotAdam:
    """The step above for a list of numpy parameters (float64), each with its own weight decay."""

    def __init__(
        self, params: list[np.ndarray], wds: list[float], lr: float, beta1: float, beta2: float, delta: float,
        eps: float,
    ) -> None:  # fmt: skip
        self.params, self.wds = [p.copy() for p in params], wds
        self.lr, self.beta1, self.beta2, self.delta, self.eps = lr, beta1, beta2, delta, eps
        self.m_task = [np.zeros_like(p) for p in params]
        self.m_kd = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, task: list[np.ndarray | None], distill: list[np.ndarray | None]) -> None:
        self.t += 1
        t, lr, b1, b2 = self.t, self.lr, self.beta1, self.beta2
        for i, (g_t, g_d) in enumerate(zip(task, distill, strict=True)):
            p = self.params[i] * (1 - lr * self.wds[i])
            if g_t is not None and g_d is not None:
                bt, bd = b1 - self.delta, b1 + self.delta
                self.m_task[i] = bt * self.m_task[i] + (1 - bt) * g_t
                self.m_kd[i] = bd * self.m_kd[i] + (1 - bd) * g_d
                self.v[i] = b2 * self.v[i] + (1 - b2) * (g_t + g_d) ** 2
                first = self.m_task[i] / (1 - bt**t) + self.m_kd[i] / (1 - bd**t)
            else:
                g = g_t if g_t is not None else g_d
                moments = self.m_task if g_t is not None else self.m_kd
                moments[i] = b1 * moments[i] + (1 - b1) * g
                self.v[i] = b2 * self.v[i] + (1 - b2) * g**2
                first = moments[i] / (1 - b1**t)
            self.params[i] = p - lr * first / (np.sqrt(self.v[i] / (1 - b2**t)) + self.eps)
