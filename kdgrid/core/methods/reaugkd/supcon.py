"""The supervised contrastive loss of Khosla et al., "Supervised Contrastive Learning", NeurIPS 2020 (their
``L_out^sup``, eq. 2), which ReAugKD uses to train the teacher's projection head (Zhang et al., ACL 2023, A.2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from kdgrid.errors import ConfigError


def supcon_loss(features: Tensor, labels: Tensor, tau: float = 0.07) -> Tensor:
    """Khosla et al.'s ``L_out^sup`` over one batch.

    With ``z_i`` the L2-normalised features, ``A(i)`` every other example of the batch and ``P(i)`` the other
    examples of i's class::

        l_i  = -1/|P(i)| sum_{p in P(i)} log( exp(z_i . z_p / tau) / sum_{a in A(i)} exp(z_i . z_a / tau) )
        loss = mean of l_i over the anchors i with |P(i)| >= 1

    Anchors without a positive are left out of the mean (Khosla et al.'s released code divides by |P(i)| and
    would give NaN there). ReAugKD's eq. 4 writes the sum over ``P(i)`` with a 1/N factor and a denominator over
    all k including i; kdgrid follows Khosla et al., whose loss the paper says it adopts (docs/reaugkd.md).

    Args:
        features: ``[N, d]`` embeddings (not necessarily normalised).
        labels: ``[N]`` integer class ids.
        tau: the temperature, > 0 (ReAugKD: 0.07).

    Returns:
        A 0-dim tensor; 0 when no anchor has a positive (nothing to pull together).
    """
    if features.dim() != 2 or labels.dim() != 1 or labels.shape[0] != features.shape[0]:
        raise ConfigError(
            f"supcon_loss: features must be [N, d] and labels [N], got {tuple(features.shape)} and "
            f"{tuple(labels.shape)}"
        )
    if not tau > 0:
        raise ConfigError(f"supcon_loss: tau must be > 0, got {tau}")
    z = F.normalize(features.float(), dim=-1, eps=1e-12)
    n = z.shape[0]
    self_mask = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = (z @ z.T / tau).masked_fill(self_mask, float("-inf"))  # A(i): every example but i
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    positives = (labels[:, None] == labels[None, :]) & ~self_mask
    counts = positives.sum(dim=1)
    anchors = counts > 0
    if not anchors.any():
        return z.sum() * 0.0
    per_anchor = -(log_prob.masked_fill(~positives, 0.0).sum(dim=1)[anchors] / counts[anchors])
    return per_anchor.mean()
