"""LKD's part in a student's training (`kdgrid.core.step_hooks.StepHooks`): its learned loss weights, owned by
the trial's objective (one per term, the soft and hard labels included) and multiplying each term's weight in the
step's total, without gradient (the lookahead gives the weights theirs); its checks and record once the student
is set up, the step's gradients (the weighted terms' on the student and its projections, the first-order
hypergradient on the loss weights from the job's held-out batch of the step: `kdgrid.core.methods.lkd.lookahead`),
and the weights' trajectory after each epoch."""

from __future__ import annotations

from typing import Any

import torch

from kdgrid.core.methods.lkd.lookahead import EXTRA_KEY, LossWeights, lkd_gradients, validation_loss_fn
from kdgrid.core.step_hooks import StepHooks
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial


class LkdHooks(StepHooks):
    """One student's learned loss weights (they live in its objective: `Objective.loss_weights`)."""

    def build_objective(self, objective: Any) -> None:
        objective.loss_weights = LossWeights(["soft", "hard", *(term.name for term in objective.terms)])

    def step_weights(self, objective: Any, weights: dict[str, float]) -> dict[str, float]:
        multipliers = objective.loss_weights.as_dict()
        return {name: w * multipliers.get(name, 1.0) for name, w in weights.items()}

    def learned_modules(self, objective: Any) -> list[Any]:
        return [objective.loss_weights]

    def set_up(self, run: Any, job: Any) -> None:
        weights = run.objective.loss_weights
        if weights is None:
            return
        if run.scaler is not None:
            raise ConfigError("LKD (lkd_holdout) takes no fp16 loss scaling: run it with KDGRID_AMP=bf16 or off")
        if job.held_out is None:
            raise ConfigError("LKD (lkd_holdout): this job holds no split out of its training data")
        run.result.extra[EXTRA_KEY] = {
            "terms": list(weights.names),
            "held_out": job.held_out.record(),
            "trajectory": [list(weights.as_dict().values())],  # the start, then every epoch
        }

    def gradients(self, run: Any, job: Any, values: dict[str, torch.Tensor], step: int) -> bool:
        weights = run.objective.loss_weights
        if weights is None:
            return False
        phi = weights.phi
        pairs = [(p, group["lr"]) for group in run.optimizer.param_groups for p in group["params"] if p is not phi]
        batch = job.runtime.to_device(job.held_out.batch(step, run.trial.batch_size))

        def held_out_logits(model: torch.nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
            # In the step's precision; the student's hooks (Q/K/V, any method's) keep nothing of this pass, so its
            # activations and graph are freed once the hypergradient is taken.
            with job.runtime.autocast(), run.suspended():
                return model(**{k: v for k, v in b.items() if k != "labels"}).logits

        loss = validation_loss_fn(run.model, batch, job.task.is_regression, held_out_logits)
        lkd_gradients(
            values, run.objective.weights(), weights, [p for p, _ in pairs], [float(lr) for _, lr in pairs], loss
        )
        return True

    def end_epoch(self, run: Any, job: Any, epoch: int) -> None:
        if run.objective.loss_weights is not None:
            run.result.extra[EXTRA_KEY]["trajectory"].append(list(run.objective.loss_weights.as_dict().values()))


def step_hooks(trial: Trial) -> LkdHooks:
    """The hooks of a trial with ``lkd_holdout``."""
    return LkdHooks()
