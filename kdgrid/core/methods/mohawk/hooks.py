"""MOHAWK's part in a student's training (`kdgrid.core.step_hooks.StepHooks`), by stage (`spec.stage_of`):

- stages 1 and 2 (teacher-forced): the trial's objective trains on the stage's own terms in place of eq. 9's
  (`objective.TeacherForcedTerms`: their weights as `extra_terms`, their values as `own_values`), which feed each
  student mixer the teacher's input to that layer; the shared teacher pass captures what they read
  (`teacher_capture`: ``layer_input`` and the attention scores or the attention sub-layer's output, on every
  layer); and the student runs no forward pass of its own (`student_features`: zero logits and the batch's mask),
  so a stage costs the teacher pass and the mixers alone;
- stage 3: before the student is placed, the teacher's embeddings, feed-forwards, LayerNorms, pooler and
  classifier are copied into it, the classifier's outputs put in the task's label order (`prepare_model`:
  `transfer.prepare_student`, `transfer.align_transferred_head`); it then trains on eq. 9 as any trial.
"""

from __future__ import annotations

from typing import Any

import torch

from kdgrid.core.methods.mohawk.objective import TeacherForcedTerms
from kdgrid.core.methods.mohawk.spec import TEACHER_FORCED_STAGES, stage_of
from kdgrid.core.methods.mohawk.transfer import align_transferred_head, prepare_student
from kdgrid.core.model.capture import Features
from kdgrid.core.step_hooks import StepHooks
from kdgrid.trial import Trial

TRANSFER_STAGE = 3


class MohawkHooks(StepHooks):
    """One trial's MOHAWK stage (module docstring)."""

    def __init__(self, trial: Trial, stage: int) -> None:
        self.trial = trial
        self.stage = stage
        self.terms: TeacherForcedTerms | None = None  # a teacher-forced stage's, once its student is built

    def prepare_model(self, run: Any, job: Any, model: Any) -> None:
        if self.stage in TEACHER_FORCED_STAGES:
            self.terms = TeacherForcedTerms(model, self.trial)
        elif self.stage == TRANSFER_STAGE:
            run.result.extra.update(prepare_student(self.trial, model, job.teacher_model))
            align_transferred_head(self.trial, model, None if job.label_order is None else job.label_order.columns)

    def extra_terms(self, objective: Any) -> dict[str, float]:
        return {} if self.terms is None else self.terms.weights()

    def own_values(self, objective: Any, student: Any, teacher: Any, labels: Any) -> dict[str, Any] | None:
        return None if self.terms is None else self.terms.values(teacher)

    def teacher_capture(self, run: Any) -> tuple[frozenset[str], frozenset[int]]:
        if self.terms is None:
            return frozenset(), frozenset()
        return self.terms.teacher_forced_needs, self.terms.teacher_forced_layers

    def student_features(self, run: Any, job: Any, batch: dict[str, Any], phase: int, index: int) -> Any:
        if self.terms is None:
            return None
        mask = batch["attention_mask"]
        config = run.model.config
        logits = torch.zeros(mask.shape[0], config.num_labels, device=mask.device)
        return Features(logits=logits, mask=mask, heads=config.shape.heads)


def step_hooks(trial: Trial) -> MohawkHooks | None:
    """The hooks of a MOHAWK stage's trial (None without ``mohawk_stage``)."""
    stage = stage_of(trial)
    return None if stage is None else MohawkHooks(trial, stage)
