"""AdaKD's instance-level trade-off (Ganguly, Nayak, Rao, Deb & AP, "AdaKD: Dynamic Knowledge Distillation of ASR
models using Adaptive Loss Weighting", arXiv:2405.08019, 2024).

The difficulty of instance i is the teacher's loss on it, ``d_i``; its weight ``alpha_i = exp(-1 / sqrt(d_i))``
trades the instance's distillation loss against its task loss, unnormalised::

    L = mean_i [ alpha_i L_KD,i + (1 - alpha_i) L_task,i ]

An instance the teacher finds easy (small d_i, alpha_i near 0) leans on its task loss, a hard one on distillation.
Here ``L_KD,i`` is the soft-label cross-entropy at temperature T and ``L_task,i`` the cross-entropy with the gold
label; ``d_i`` the teacher's cross-entropy with the gold label. (The paper's difficulty factor is built from the
teacher's loss; any further scaling it applies is not reproduced here.) Written in numpy, float64.
"""

from __future__ import annotations

import numpy as np

from tests.method_references._numpy import log_softmax, softmax


def teacher_difficulty(teacher: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``d_i``: the teacher's cross-entropy with the gold label, ``[B]``."""
    return -log_softmax(teacher)[np.arange(len(labels)), labels]


def adakd_alpha(difficulty: np.ndarray) -> np.ndarray:
    """``alpha_i = exp(-1 / sqrt(d_i))`` (0 at d_i = 0)."""
    with np.errstate(divide="ignore"):
        return np.exp(-1.0 / np.sqrt(difficulty))


def adakd_loss(student: np.ndarray, teacher: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """The paper's ``L`` for logits ``[B, C]``."""
    alpha = adakd_alpha(teacher_difficulty(teacher, labels))
    kd = -(softmax(teacher / temperature) * log_softmax(student / temperature)).sum(axis=1)
    task = -log_softmax(student)[np.arange(len(labels)), labels]
    return float((alpha * kd + (1 - alpha) * task).mean())
