"""The distillation head's loss of Dual-Head KD (Yang, Zong, Huang, Feng & An, "Dual-Head Knowledge Distillation:
Enhancing Logits Utilization with an Auxiliary Head", arXiv:2411.08937, 2024), as the authors' code computes it
(penghui-yang/DHKD: ``distiller_zoo/BinaryKL.py``, ``distiller_zoo/BinaryKLNorm.py``; ``train_student.py`` uses
BinaryKL-Norm for ``--distill dhkd``, temperature ``--BinaryKL_T`` 2; ``helper/loops.py`` feeds it the auxiliary
head's logits, and the cross-entropy the main head's).

Each class is a binary event with probability ``sigma(z / T)``; with ``eps = 1e-8`` clamping every probability into
[eps, 1 - eps] and N the batch::

    BinaryKL      = T^2 / N sum_b sum_c KL_bin(sigma(z^T_bc / T) || sigma(z^S_bc / T))
    BinaryKL-Norm = T^2 / N sum_b sum_c KL_bin(1/2 || sigma((z^S_bc - z^T_bc) / T))

with ``KL_bin(p || q) = p log(p / q) + (1 - p) log((1 - p) / (1 - q))``. BinaryKL-Norm is 0 exactly when the
student's logits equal the teacher's (it compares logit differences, not normalised probabilities). Written in
numpy, float64.
"""

from __future__ import annotations

import numpy as np

from tests.method_references._numpy import sigmoid

EPS = 1e-8


def _binary_kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    p, q = np.clip(p, EPS, 1 - EPS), np.clip(q, EPS, 1 - EPS)
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


def binary_kl(student: np.ndarray, teacher: np.ndarray, temperature: float) -> float:
    """BinaryKL of logits ``[N, C]``."""
    kl = _binary_kl(sigmoid(teacher / temperature), sigmoid(student / temperature))
    return float(temperature**2 * kl.sum() / student.shape[0])


def binary_kl_norm(student: np.ndarray, teacher: np.ndarray, temperature: float) -> float:
    """BinaryKL-Norm of logits ``[N, C]``."""
    kl = _binary_kl(np.full_like(student, 0.5), sigmoid((student - teacher) / temperature))
    return float(temperature**2 * kl.sum() / student.shape[0])
