"""CTKD's global learned temperature (Li, Li, Yang, Yang, Cheng & Yang, "Curriculum Temperature for Knowledge
Distillation", AAAI 2023), as the authors' code computes it (zhengli97/CTKD: ``models/temp_global.py``,
``helper/loops.py``, ``train_student.py`` and ``scripts/run_cifar_distill.sh``), written again in plain torch.

- The temperature is ``T = t_start + t_end * sigmoid(theta)`` with ``t_start = 1``, ``t_end = 20`` and ``theta``
  one parameter initialised to 1, so T starts at ``1 + 20 sigmoid(1) = 15.62`` whatever ``--kd_T`` says.
- A gradient-reversal layer passes T forward unchanged and multiplies its gradient by ``-lambda``.
- ``lambda`` rises by half a cosine over the first ``decay_loops = 10`` epochs (of 240), per 1-based epoch e::

      lambda(e) = (1 - cos(pi * min(e, 10) / 10)) / 2          (lambda(1) = 0.024, 1 from epoch 10 on)

  (their ``CosineDecay(max 0, min -1)`` gives ``-lambda``, the factor the reversal layer multiplies by).
- The distillation loss whose gradient T receives is ``KL(p_T || p_S) * T^2`` (batch mean of the KL), weighted by
  ``-a 0.9`` beside the cross-entropy's ``-r 0.1``.
- ``theta`` is trained with the student's SGD (lr 0.05, momentum 0.9, weight decay 5e-4).
"""

from __future__ import annotations

import math

import torch

T_START, T_END, THETA_0, RAMP_EPOCHS = 1.0, 20.0, 1.0, 10


def temperature(theta: torch.Tensor) -> torch.Tensor:
    """``T = 1 + 20 sigmoid(theta)``."""
    return T_START + T_END * torch.sigmoid(theta)


def initial_temperature() -> float:
    return T_START + T_END / (1.0 + math.exp(-THETA_0))


def reversal_strength(epoch: int) -> float:
    """``lambda`` of the 1-based ``epoch``."""
    return (1.0 - math.cos(math.pi * min(epoch, RAMP_EPOCHS) / RAMP_EPOCHS)) / 2.0


def kl_t2(student: torch.Tensor, teacher: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``KL(p_T || p_S) * T^2``, the batch mean of the per-example KL."""
    log_s = torch.log_softmax(student / t, dim=-1)
    log_t = torch.log_softmax(teacher / t, dim=-1)
    return (log_t.exp() * (log_t - log_s)).sum(dim=-1).mean() * t**2


def theta_gradient(student: torch.Tensor, teacher: torch.Tensor, theta: float, strength: float) -> float:
    """The gradient ``theta`` receives from the distillation loss (weight 1) through the reversal layer:
    ``-lambda d(KL T^2)/d theta`` (float64 autograd)."""
    parameter = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    loss = kl_t2(student.double(), teacher.double(), temperature(parameter))
    (grad,) = torch.autograd.grad(loss, parameter)
    return -strength * float(grad)
