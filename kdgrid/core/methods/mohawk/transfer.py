"""MOHAWK's stage 3 at the student's start: the teacher's embeddings, feed-forwards, LayerNorms, pooler and
classifier copied into the SSM student (`kdgrid.core.model.ssm.model.transfer_from_bert`); its mixers are kept as
the stage before left them (or fresh, for stage 3 alone). The stage then trains with kdgrid's own objective."""

from __future__ import annotations

from typing import Any

from torch import nn

from kdgrid.core.methods.mohawk.spec import stage_of
from kdgrid.core.model.ssm.model import SSMForSequenceClassification, transfer_from_bert
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

EXTRA_KEY = "mohawk_transferred"  # a row's ``extra``: how many parameter tensors stage 3 copied from the teacher


def prepare_student(trial: Trial, model: SSMForSequenceClassification, teacher_model: nn.Module | None) -> dict[str, Any]:
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
