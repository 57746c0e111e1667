"""A dual-head student (option ``dual_head: true``): a task head and a distillation head on one shared encoder.

After Yang, Zong, Huang, Feng & An, "Dual-Head Knowledge Distillation: Enhancing Logits Utilization with an
Auxiliary Head" (arXiv:2411.08937, 2024): the gradients of the task loss and of a distillation loss on logits
conflict in the shared linear classifier but not in the backbone, so the classifier is split in two.

- the **task head** is the student's own classifier (``BertForSequenceClassification.classifier``); only the
  hard-label loss reads its logits (``Features.logits``);
- the **distillation head** (`DISTILL_HEAD`, a ``Linear(width, num_labels)`` drawn like BERT's classifier:
  N(0, 0.02^2) weights, zero bias, from the trial's seed + 3 so no other draw moves) reads the same input as the
  classifier (BERT's pooled [CLS] vector after the classifier's dropout, captured by a forward pre-hook); only
  the soft-label loss reads its logits (``Features.distill_logits``, `kdgrid.core.training.objective`);
- the encoder gets both gradients.

**Evaluation uses the task head**: the model's forward pass is unchanged, so dev scores, predictions and latency
are the task head's (tested). The distillation head is saved with the model in epoch checkpoints and is not counted
in ``student_params`` (it is not part of the deployed student; ``extra["distill_head_params"]`` counts it). A
trained student saved for others to load (a teacher assistant, ReAugKD's student, ``kdgrid trial --save-student``)
goes through `kdgrid.core.model.added_parts.save_deployed`, which leaves the head out (`attach_distill_head`
marks it as added): the folder is a plain
``BertForSequenceClassification`` whose classifier is the task head, the one evaluated.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from kdgrid.core.methods.dual_head.loss import binary_loss_per_example
from kdgrid.core.methods.dual_head.spec import DUAL_HEAD_LOSS, SOFTMAX_HEAD_LOSS, head_loss
from kdgrid.core.model.added_parts import deployed_parameter_count, mark_added
from kdgrid.core.model.capture import Features
from kdgrid.core.step_hooks import StepHooks
from kdgrid.errors import ConfigError

DISTILL_HEAD = "kdgrid_distill_head"
_INIT_STD = 0.02  # BERT's initializer_range, as the classifier it sits beside


class _ClassifierInput:
    """Forward pre-hook on the classifier that keeps its input of the last forward pass."""

    def __init__(self) -> None:
        self.value: torch.Tensor | None = None
        self.suspended = False  # `classifier_input_suspended`: keep nothing

    def __call__(self, module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        if not self.suspended:
            self.value = args[0]


def attach_distill_head(model: nn.Module, seed: int) -> int:
    """Add the distillation head to ``model`` (a ``BertForSequenceClassification``) as the submodule
    `DISTILL_HEAD`, with the hook that feeds it; returns its parameter count. Draws from its own seeded
    generator state, leaving the global RNG as it was."""
    classifier = model.classifier
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 3)
        head = nn.Linear(classifier.in_features, classifier.out_features)
        nn.init.normal_(head.weight, std=_INIT_STD)
        nn.init.zeros_(head.bias)
    head.to(device=classifier.weight.device, dtype=classifier.weight.dtype)
    model.add_module(DISTILL_HEAD, head)
    mark_added(model, DISTILL_HEAD)  # left out of the deployed student (saved, counted)
    hook = _ClassifierInput()
    classifier.register_forward_pre_hook(hook)
    model._kdgrid_classifier_input = hook  # read by `with_distill_logits`
    return sum(p.numel() for p in head.parameters())


def has_distill_head(model: nn.Module) -> bool:
    return hasattr(model, DISTILL_HEAD)


def with_distill_logits(model: nn.Module, features: Features) -> Features:
    """``features`` of ``model``'s last forward pass with the distillation head's logits added; unchanged for a
    model without the head."""
    if not has_distill_head(model):
        return features
    pooled = model._kdgrid_classifier_input.value
    if pooled is None:
        raise RuntimeError("the dual-head student's classifier saw no input in this forward pass")
    return dataclasses.replace(features, distill_logits=getattr(model, DISTILL_HEAD)(pooled))


@contextlib.contextmanager
def classifier_input_suspended(model: nn.Module) -> Iterator[None]:
    """Inside, a forward pass that is not the training step's (LKD's held-out batch) leaves the classifier input
    the hook keeps as it was: neither that pass's pooled vector nor its graph is held. Nothing for a model
    without the head."""
    if not has_distill_head(model):
        yield
        return
    hook = model._kdgrid_classifier_input
    previous, hook.suspended = hook.suspended, True
    try:
        yield
    finally:
        hook.suspended = previous


class DualHeadHooks(StepHooks):
    """The dual head's part in a student's training: the second head added before the student is placed, its
    logits added to every forward pass's features, its own loss in place of the soft-label cross-entropy (the
    authors' binary forms; `kdgrid.core.methods.dual_head.loss`), the deployed student's parameter count without
    it, and the classifier input kept by nothing during another method's held-out pass."""

    def __init__(self, trial: Any) -> None:
        self.loss = head_loss(trial)

    def build_objective(self, objective: Any) -> None:
        if objective.regression and self.loss != SOFTMAX_HEAD_LOSS:
            raise ConfigError(
                f"option {DUAL_HEAD_LOSS}={self.loss!r} compares class logits as binary events: a regression "
                f"task's dual head needs {DUAL_HEAD_LOSS}: {SOFTMAX_HEAD_LOSS} (its squared distance)"
            )

    def soft_per_example(self, objective: Any, logits_s: Any, logits_t: Any, temperature: Any) -> Any:
        if self.loss == SOFTMAX_HEAD_LOSS:
            return None
        return binary_loss_per_example(self.loss, logits_s, logits_t, temperature)

    def formulation(self, objective: Any) -> dict[str, str]:
        return {DUAL_HEAD_LOSS: self.loss}

    def prepare_model(self, run: Any, job: Any, model: nn.Module) -> None:
        run.result.extra["distill_head_params"] = attach_distill_head(model, run.trial.seed)

    def set_up(self, run: Any, job: Any) -> None:
        run.result.student_params = deployed_parameter_count(run.model)

    def features(self, run: Any, features: Features) -> Features:
        return with_distill_logits(run.model, features)

    def suspended(self, run: Any) -> contextlib.AbstractContextManager[None]:
        return classifier_input_suspended(run.model)


def step_hooks(trial: Any) -> DualHeadHooks:
    """The hooks of a dual-head trial."""
    return DualHeadHooks(trial)
