"""MOHAWK's stage 3 at the student's start: the teacher's embeddings, feed-forwards, LayerNorms, pooler and
classifier copied into the SSM student (`kdgrid.core.model.ssm.model.transfer_from_bert`); its mixers are kept as
the stage before left them (or fresh, for stage 3 alone); the copied classifier's outputs put in the task's label
order (`align_transferred_head`). The stage then trains with kdgrid's own objective."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from kdgrid.core.methods.mohawk.spec import stage_of
from kdgrid.core.model.ssm.model import SSMForSequenceClassification, transfer_from_bert
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

EXTRA_KEY = "mohawk_transferred"  # a row's ``extra``: how many parameter tensors stage 3 copied from the teacher


def prepare_student(
    trial: Trial, model: SSMForSequenceClassification, teacher_model: nn.Module | None
) -> dict[str, Any]:
    """Apply the trial's stage-3 weight transfer to ``model`` (in place); the facts a row records. Nothing for
    another stage or a trial without one."""
    if stage_of(trial) != 3:
        return {}
    if teacher_model is None:
        raise ConfigError("MOHAWK stage 3 copies the teacher's weights: the job's teacher model is needed")
    try:
        copied = transfer_from_bert(model, teacher_model)
    except ValueError as error:
        raise ConfigError(f"MOHAWK stage 3: {error}") from None
    return {EXTRA_KEY: len(copied)}


def align_transferred_head(trial: Trial, model: SSMForSequenceClassification, columns: Sequence[int] | None) -> None:
    """After stage 3's transfer, put the copied classifier's outputs in the task's label order: ``columns[j]`` is
    the teacher output that means label j (`kdgrid.core.teacher.label_order.LabelOrder.columns`; None or the identity:
    nothing to do), since every student's outputs are in the task's order while a checkpoint's are its
    trainer's."""
    if stage_of(trial) != 3 or columns is None or list(columns) == list(range(len(columns))):
        return
    index = torch.tensor(list(columns), device=model.classifier.weight.device)
    with torch.no_grad():
        model.classifier.weight.copy_(model.classifier.weight[index].clone())
        model.classifier.bias.copy_(model.classifier.bias[index].clone())
