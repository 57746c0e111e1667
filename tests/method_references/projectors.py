"""Projectors: the projector ensemble of Chen, Wang, Liu, Xu, de Hoog & Huang ("Improved Feature Distillation via
Projector Ensemble", NeurIPS 2022; the authors' code, chenyd7/PEFD, ``helper/loops.py``) and the spectral-norm
regulariser of Yoshida & Miyato ("Spectral Norm Regularization for Improving the Generalizability of Deep
Learning", arXiv:1705.10941, 2017, eq. 3).

Projector ensemble, as the authors' code computes it: M linear projectors ``P_m(x) = W_m x + b_m`` of the
student's feature, each followed by a ReLU, averaged; the loss is one minus the cosine to the teacher's feature,
averaged over the batch (their ``-b`` weight, 25 on CIFAR-100, multiplies it; no soft-label term)::

    y_b   = (1 / M) sum_m ReLU(W_m s_b + b_m)
    L_PE  = (1 / B) sum_b (1 - <y_b, t_b> / (|y_b| |t_b|))

Their features are one vector per image (the pooled, post-ReLU penultimate layer); applied to a BERT's hidden
states, the vectors are the tokens', and the mean runs over the real tokens.

Spectral norm: ``(lambda / 2) sum_W sigma_max(W)^2``; here the unweighted ``(1/2) sum sigma_max^2``, with
sigma_max from numpy's SVD. Written in numpy, float64.
"""

from __future__ import annotations

import math

import numpy as np


def ensemble_cosine_loss(
    student: np.ndarray, teacher: np.ndarray, members: list[tuple[np.ndarray, np.ndarray]]
) -> float:
    """``L_PE`` over every vector of ``student`` ``[..., d_S]`` against ``teacher`` ``[..., d_T]``; ``members`` the
    (weight ``[d_T, d_S]``, bias ``[d_T]``) of each linear projector."""
    y = np.mean([np.maximum(student @ w.T + b, 0.0) for w, b in members], axis=0)
    cosine = (y * teacher).sum(-1) / (np.linalg.norm(y, axis=-1) * np.linalg.norm(teacher, axis=-1))
    return float((1.0 - cosine).mean())


def gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU, ``x Phi(x)``."""
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def mlp_ensemble(student: np.ndarray, members: list[list[tuple[np.ndarray, np.ndarray]]]) -> np.ndarray:
    """kdgrid's documented ensemble: the mean over members of ``Linear -> GELU -> Linear``."""
    outputs = [gelu(student @ w1.T + b1) @ w2.T + b2 for (w1, b1), (w2, b2) in members]
    return np.mean(outputs, axis=0)


def spectral_penalty(weights: list[np.ndarray]) -> float:
    """``(1/2) sum_W sigma_max(W)^2``."""
    return float(sum(0.5 * np.linalg.svd(w, compute_uv=False)[0] ** 2 for w in weights))
