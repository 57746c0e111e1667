"""Soft targets (Hinton, Vinyals & Dean, "Distilling the Knowledge in a Neural Network", 2015, eq. 1 and §2).

The soft loss of one example is the cross-entropy between the teacher's and the student's distributions at
temperature T, ``q_c = exp(z_c / T) / sum_j exp(z_j / T)``::

    L_soft = - mean_b sum_c q^T_bc log q^S_bc

Hinton et al. multiply it by T^2 so that its gradients keep their size as T changes; the distillation paper kdgrid
reproduces (its eq. 9, TextBrewer's ``kd_ce_loss``) does not. Written in numpy, float64.
"""

from __future__ import annotations

import numpy as np

from tests.method_references._numpy import log_softmax, softmax


def soft_loss(student: np.ndarray, teacher: np.ndarray, temperature: float, t2: bool = False) -> float:
    """``L_soft`` of logits ``[B, C]``; times T^2 with ``t2``."""
    q_t = softmax(teacher / temperature)
    loss = float(-(q_t * log_softmax(student / temperature)).sum(axis=1).mean())
    return loss * temperature**2 if t2 else loss


def hard_loss(student: np.ndarray, labels: np.ndarray) -> float:
    """Cross-entropy with the gold labels, ``- mean_b log softmax(z_b)_{y_b}``."""
    return float(-log_softmax(student)[np.arange(len(labels)), labels].mean())
