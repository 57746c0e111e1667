"""The loss of MOHAWK's teacher-forced stages 1 and 2 (`kdgrid.core.methods.mohawk.spec`).

Each student layer l is fed the teacher's hidden state entering teacher layer l (captured by the shared teacher
pass as ``layer_input``), and its mixer is compared with teacher layer l: stage 1 its mixing matrices with the
teacher's attention probabilities (`losses.matrix_orientation`), stage 2 its sub-layer output with the teacher's
self-attention output (`losses.hidden_alignment`). The terms are named ``mohawk_matrix@l-l`` /
``mohawk_hidden@l-l``, each weighted by the trial's ``beta``. The student's own forward pass is not read, so its
other weights get no gradient (AdamW leaves a parameter without a gradient as it is).

Stage 1's terms are recomputed in the backward pass (activation checkpointing, per layer), so its ``L^2``
intermediates are held for one layer at a time. The trial's hooks (`kdgrid.core.methods.mohawk.hooks`) put these
terms in the trial's `kdgrid.core.training.objective.Objective` in place of eq. 9's (their weights as
``extra_terms``, their values as ``own_values``), so the rest of the training loop (weights in the row, the
finiteness guard, checkpoints) treats them as any terms.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from kdgrid.core.methods.mohawk.losses import hidden_alignment, matrix_orientation, teacher_probabilities
from kdgrid.core.methods.mohawk.spec import TERM_NAMES, stage_of
from kdgrid.core.model.capture import Features
from kdgrid.core.model.ssm.model import SSMForSequenceClassification
from kdgrid.trial import Trial


def _orientation(
    mixer: torch.nn.Module, entering: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """One layer's stage-1 term: its mixer's matrices of the teacher's input against the teacher's attention."""
    return matrix_orientation(mixer.matrices(entering, mask), target, mask)


TEACHER_NEEDS = {1: frozenset({"layer_input", "scores"}), 2: frozenset({"layer_input", "attention_output"})}


class TeacherForcedTerms:
    """Stage 1 or 2 of MOHAWK for one trial's student (module docstring)."""

    def __init__(self, model: SSMForSequenceClassification, trial: Trial) -> None:
        stage = stage_of(trial)
        assert stage in TERM_NAMES, stage
        self.mohawk_stage = stage
        self.model = model
        self.layer_numbers = tuple(range(1, model.config.shape.layers + 1))
        self.betas = {f"{TERM_NAMES[stage]}@{n}-{n}": float(trial.beta) for n in self.layer_numbers}
        # what the shared teacher pass must capture for them, on which teacher layers
        self.teacher_forced_needs = TEACHER_NEEDS[stage]
        self.teacher_forced_layers = frozenset(self.layer_numbers)

    def weights(self) -> dict[str, float]:
        """Each term's weight: the trial's ``beta`` (the rules refuse ``beta: auto``)."""
        return dict(self.betas)

    def values(self, teacher: Features) -> dict[str, torch.Tensor]:
        """Each layer's term (0-dim float32) from the teacher's features of the batch."""
        mask = teacher.mask
        values: dict[str, torch.Tensor] = {}
        with torch.autocast(device_type=mask.device.type, enabled=False):
            for layer_number in self.layer_numbers:
                entering = teacher.layer_feature("layer_input", layer_number).float()
                mixer = self.model.layers[layer_number - 1].mixer
                name = f"{TERM_NAMES[self.mohawk_stage]}@{layer_number}-{layer_number}"
                if self.mohawk_stage == 1:
                    target = teacher_probabilities(teacher.layer_feature("scores", layer_number), mask)
                    # recomputed in the backward pass: a layer's [B, H, L, L] intermediates live one layer at a
                    # time, not every layer's until the step's backward pass
                    values[name] = checkpoint(_orientation, mixer, entering, target, mask, use_reentrant=False)
                else:
                    target = teacher.layer_feature("attention_output", layer_number)
                    values[name] = hidden_alignment(mixer(entering, mask), target, mask)
        return values
