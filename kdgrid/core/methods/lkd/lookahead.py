"""LKD: loss weights learned by bi-level optimisation on a held-out split of the training data, with a one-step
lookahead, first order (trial option ``lkd_holdout``).

The loss weights are the outer variables, the student the inner ones. The outer objective is the student's task
loss on held-out training examples (never a dev set) after one step of the weighted inner objective; its gradient
with respect to the weights is taken through that one step (the one-step lookahead of Liu, Simonyan & Yang,
"DARTS: Differentiable Architecture Search", ICLR 2019, and of Ren, Zeng, Yang & Urtasun, "Learning to
Reweight Examples for Robust Deep Learning", ICML 2018, applied to a distillation objective's loss weights as in
learnable-loss-weight KD). kdgrid's form, for the trial's terms k (``soft``, ``hard``, each knowledge term) with
base weights ``b_k`` (soft_weight, alpha, beta or the calibrated ``auto`` weights):

    w_k(phi) = b_k * K * softmax(phi)_k          K terms; phi = 0 at the start, so w_k = b_k
    g_k      = grad_theta L_k(theta)             each term's gradient on the training batch
    theta'   = theta - eta * sum_k w_k g_k       the lookahead: one plain gradient step (eta: the student's
                                                 learning rate now, per parameter group)
    L_val    = the hard-label loss of the student at theta' on a held-out batch (cross-entropy; regression:
               squared error), in eval mode (no dropout)
    d L_val / d w_k = -eta * <grad_theta L_val(theta'), g_k>        (exact for the SGD lookahead: theta' is
                                                                    linear in w; the optimiser's own
                                                                    preconditioning is ignored: first order)
    phi.grad = sum_k (d L_val / d w_k) * d w_k / d phi

The student's own step is the usual one with the gradient ``sum_k w_k g_k`` (the weights at this step, without
gradient): AdamW (under the trial's learning rate, or ``learned_lr_scale`` times it for ``phi``) then moves theta
and phi together. A term of base weight 0 keeps weight 0. Cost per step: one backward pass per term (K of them,
instead of one), one student forward and backward on the held-out batch, and a copy of the student's parameters.

Held-out split: `kdgrid.core.data.holdout` (a fraction of the training examples, drawn from the trial's data-order
seed, out of the training batches; the option is part of the group key, so an LKD trial shares its teacher pass
only with trials holding out the same split). Held-out batches: the held-out examples in an order drawn from
``[seed, HELD_OUT_STREAM, pass]``, cut into batches of the trial's batch size, served one per step and cycled.

The row records ``extra.lkd``: the terms, the held-out split (fraction, examples, seed, SHA-256 of the indices),
and the trajectory of the weights' multipliers ``K softmax(phi)``: at the start and after every epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from kdgrid.core.data.batching import Batch

EXTRA_KEY = "lkd"


class LossWeights(nn.Module):
    """LKD's outer variables: ``phi`` ``[K]``, one per term of ``names``; multipliers ``K softmax(phi)``."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self.names = tuple(names)
        self.phi = nn.Parameter(torch.zeros(len(self.names)))

    def multipliers(self) -> Tensor:
        """``K softmax(phi)`` ``[K]``, with its graph to ``phi``."""
        return len(self.names) * torch.softmax(self.phi, dim=0)

    def as_dict(self) -> dict[str, float]:
        """The multipliers now, by term."""
        return dict(zip(self.names, self.multipliers().detach().cpu().tolist(), strict=True))


def weighted_terms(
    values: dict[str, Tensor], base: dict[str, float], weights: LossWeights
) -> tuple[list[str], list[float]]:
    """The terms of the step (those of ``values`` with a non-zero base weight) and their weights now: the base
    weight times the learned multiplier for the terms of ``weights``, the base weight alone for the others (a
    projector penalty)."""
    multipliers = weights.as_dict()
    names = [name for name in values if base.get(name, 0.0) != 0.0]
    return names, [base[name] * multipliers.get(name, 1.0) for name in names]


def lkd_gradients(
    values: dict[str, Tensor],
    base: dict[str, float],
    weights: LossWeights,
    params: Sequence[Tensor],
    rates: Sequence[float],
    validation_loss: Callable[[], Tensor],
) -> dict[str, float]:
    """Set the step's gradients: ``p.grad = sum_k w_k g_k`` for every parameter of ``params`` and ``phi.grad``
    the first-order hypergradient (module docstring). ``rates``: each parameter's learning rate now (eta);
    ``validation_loss()``: the held-out loss, called while the parameters are at ``theta'`` (restored bit for
    bit afterwards). Returns ``dL_val / dw_k`` by term (every term of the step; only those of ``weights`` reach
    ``phi``)."""
    names, w = weighted_terms(values, base, weights)
    per_term = [
        [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, params, strict=True)]
        for grads in (
            torch.autograd.grad(values[name], params, retain_graph=True, allow_unused=True) for name in names
        )
    ]
    combined = [sum(w_k * g[i] for w_k, g in zip(w, per_term, strict=True)) for i in range(len(params))]
    saved = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, g, eta in zip(params, combined, rates, strict=True):
            p.sub_(eta * g)
    try:
        loss = validation_loss()
        found = torch.autograd.grad(loss, params, allow_unused=True)
        v = [g if g is not None else torch.zeros_like(p) for g, p in zip(found, params, strict=True)]
    finally:
        with torch.no_grad():
            for p, original in zip(params, saved, strict=True):
                p.copy_(original)
    hyper = [
        -sum(eta * torch.sum(v_i * g_i) for eta, v_i, g_i in zip(rates, v, g_k, strict=True))
        for g_k in per_term
    ]
    for p, g in zip(params, combined, strict=True):
        p.grad = g.detach() if isinstance(g, Tensor) else torch.zeros_like(p)
    multipliers = weights.multipliers()
    index = {name: i for i, name in enumerate(weights.names)}
    outer = sum(
        h.detach() * base[name] * multipliers[index[name]]
        for name, h in zip(names, hyper, strict=True)
        if name in index
    )
    weights.phi.grad = (
        torch.autograd.grad(outer, weights.phi)[0]
        if isinstance(outer, Tensor)
        else torch.zeros_like(weights.phi)
    )
    return {name: float(h) for name, h in zip(names, hyper, strict=True)}


def validation_loss_fn(
    model: nn.Module, batch: Batch, regression: bool, logits_of: Callable[[nn.Module, Batch], Tensor]
) -> Callable[[], Tensor]:
    """The held-out loss of ``model`` on ``batch`` as LKD reads it: the hard-label loss (cross-entropy, or squared
    error for regression) of ``logits_of(model, batch)``, in eval mode (train mode restored after)."""

    def loss() -> Tensor:
        was_training = model.training
        model.eval()
        try:
            logits = logits_of(model, batch).float()
        finally:
            model.train(was_training)
        if regression:
            return torch.mean((logits.squeeze(-1) - batch["labels"].float()) ** 2)
        return nn.functional.cross_entropy(logits, batch["labels"])

    return loss
