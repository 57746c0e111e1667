"""A diverged student inside a job: failed at the guard's check, before it is evaluated or checkpointed, with the
first diverged step, term and pair recorded in its row."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from kdgrid.core.training.finite_guard import CHECK_EVERY_STEPS
from tests.core.test_train_core import make_trial, run


def test_a_divergence_is_found_at_the_end_of_the_epoch_with_its_first_step(
    teacher: str, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    diverged = make_trial(teacher, knowledge=("value_relation",), strategy="Last-1", beta=math.inf)
    healthy = make_trial(teacher, knowledge=("pkd",), strategy="Last")
    (bad, good), _ = run([diverged, healthy], checkpoint_dir=tmp_path)
    steps = 96 // 16  # the task's training examples / batch size: one epoch
    assert steps < CHECK_EVERY_STEPS  # so the epoch's end is the first check
    assert bad.status == "failed" and bad.error_type == "DivergenceError"
    assert bad.extra["diverged_at_step"] == 1 and bad.extra["diverged_term"] == "value_relation@2-3"
    assert bad.extra["diverged_pair"] == [2, 3]
    assert bad.error_message.startswith("diverged at step 1: loss term 'value_relation@2-3'")
    assert f"(found by the finiteness check of steps 1-{steps})" in bad.error_message
    assert bad.curve == [] and bad.best_epoch is None  # never evaluated
    assert good.status == "done" and len(good.curve) == 2
    assert list(tmp_path.glob(f"*{diverged.trial_id}*")) == []  # never checkpointed
