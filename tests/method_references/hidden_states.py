"""Hidden-state mimicry (TinyBERT: Jiao et al., "TinyBERT: Distilling BERT for Natural Language Understanding",
Findings of EMNLP 2020, eq. 8) and the value relation of MiniLMv2 (Wang et al., "MiniLMv2: Multi-Head
Self-Attention Relation Distillation for Compressing Pretrained Transformers", Findings of ACL 2021, eq. 1-4).

TinyBERT::

    L_hidn = MSE(H^S W_h, H^T)          H: [L, d] hidden states of one matched layer pair, W_h: [d_S, d_T]

(``MSE`` the mean over every element). MiniLMv2's value relation, with the values split into R relation heads of
width d_r = d / R on each side::

    VR_r = softmax(V_r V_r^T / sqrt(d_r))          row-wise, [L, L]
    L_VR = (1 / (R L)) sum_r sum_i KL(VR^T_r,i || VR^S_r,i)

averaged over the batch. Written in numpy, float64; every token real (the papers do not say how padding is read).
"""

from __future__ import annotations

import numpy as np

from tests.method_references._numpy import log_softmax


def hidden_mse(student: np.ndarray, teacher: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> float:
    """TinyBERT's ``MSE(H^S W_h + b, H^T)`` over ``[B, L, d]`` batches; ``weight`` ``[d_T, d_S]`` (torch's
    Linear layout), ``bias`` ``[d_T]``."""
    projected = student @ weight.T + bias
    return float(((projected - teacher) ** 2).mean())


def value_relation(v_student: np.ndarray, v_teacher: np.ndarray, relation_heads: int) -> float:
    """MiniLMv2's ``L_VR`` of values ``[B, L, d_S]`` and ``[B, L, d_T]`` with R relation heads."""

    def log_relation(v: np.ndarray) -> np.ndarray:
        b, length, width = v.shape
        heads = v.reshape(b, length, relation_heads, width // relation_heads).transpose(0, 2, 1, 3)
        scores = heads @ heads.transpose(0, 1, 3, 2) / np.sqrt(width // relation_heads)
        return log_softmax(scores)  # [B, R, L, L]

    log_t, log_s = log_relation(v_teacher), log_relation(v_student)
    kl = (np.exp(log_t) * (log_t - log_s)).sum(axis=-1)  # [B, R, L]
    return float(kl.mean())
