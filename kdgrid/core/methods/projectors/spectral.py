"""The spectral-norm penalty on a trial's projections (option ``projector_spectral``, lambda).

Yoshida & Miyato, "Spectral Norm Regularization for Improving the Generalizability of Deep Learning"
(arXiv:1705.10941, 2017), eq. 3: the penalty ``(lambda / 2) * sum_W sigma_max(W)^2`` over the weight matrices W of
the regularised maps, where sigma_max is the largest singular value. Here W runs over the weight matrix of every
``nn.Linear`` of every projection of the trial (one for ``linear``, two per MLP, two per ensemble member); biases are
not penalised. The penalty is computed exactly (`torch.linalg.matrix_norm` with ``ord=2``, through an SVD), not
by power iteration as the paper does for large networks: projections are at most ``d_S x d_T`` (e.g. 768 x 1024),
and an exact value is what the test can check. Its gradient on W is ``lambda * sigma_max * u v^T`` (u, v the top
singular vectors).

The objective reports it as the loss term `SPECTRAL_TERM`, unweighted (``(1/2) sum sigma_max^2``), weighted by
lambda like any other term (`kdgrid.core.training.objective.Objective.weights`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from kdgrid.core.methods.projectors.overfit import EXTRA_KEY as OVERFIT_KEY
from kdgrid.core.methods.projectors.overfit import projector_overfit
from kdgrid.core.methods.projectors.spec import PROJECTOR_MEMBERS, PROJECTOR_SPECTRAL, member_kind
from kdgrid.core.step_hooks import StepHooks
from kdgrid.trial import Trial

SPECTRAL_TERM = "projector_spectral"


def spectral_weight(trial: Trial) -> float | None:
    """lambda of the trial's spectral penalty, None when it has none."""
    value = trial.option(PROJECTOR_SPECTRAL)
    return None if value is None else float(value)


def spectral_penalty(projections: Iterable[nn.Module]) -> torch.Tensor:
    """``(1/2) sum_W sigma_max(W)^2`` over every Linear weight of ``projections`` (0-dim float32; 0 when there are
    none)."""
    total = torch.zeros(())
    for projection in projections:
        for module in projection.modules():
            if isinstance(module, nn.Linear):
                sigma = torch.linalg.matrix_norm(module.weight.float(), ord=2)
                total = total.to(sigma.device) + 0.5 * sigma**2
    return total


class ProjectorHooks(StepHooks):
    """The projector methods' part in a trial's training: the ensemble's size for every projection, the spectral
    penalty as a term of eq. 9 (weighted by lambda), and the overfitting verdict after the last epoch
    (`kdgrid.core.methods.projectors.overfit`)."""

    def __init__(self, trial: Trial) -> None:
        self.members = trial.option(PROJECTOR_MEMBERS)
        self.member = member_kind(trial)
        self.spectral = spectral_weight(trial)

    def projection_kwargs(self) -> dict[str, Any]:
        return {"members": self.members, "member": self.member}

    def extra_terms(self, objective: Any) -> dict[str, float]:
        return {} if self.spectral is None else {SPECTRAL_TERM: self.spectral}

    def extra_values(self, objective: Any) -> dict[str, torch.Tensor]:
        return {} if self.spectral is None else {SPECTRAL_TERM: spectral_penalty(objective.projections.values())}

    def end_epoch(self, run: Any, job: Any, epoch: int) -> None:
        if run.epochs_done != run.trial.epochs or run.plan is None:
            return
        projected = [term.name for term in run.plan.terms if term.projected]
        verdict = projector_overfit(run.result.curve, projected, job.task.dev_sets[0], job.task.primary_metric)
        if verdict is not None:
            run.result.extra[OVERFIT_KEY] = verdict


def step_hooks(trial: Trial) -> ProjectorHooks:
    """The hooks of a trial whose knowledge may be projected."""
    return ProjectorHooks(trial)
