"""A job function for chains of trials (teacher assistants) in executor tests: the real worker and store, a fake
core that trains nothing but takes the chain's two steps for real.

`chain_run_job` is `tests.launch.fakes.fake_run_job`'s contract (each trial's behaviour from its ``test_*``
options: ``test_raise``, ``test_raise_once``, ``test_log``, ...) plus what a chain needs of the core:

- a trial whose teacher is an assistant's student resolves that teacher as the real core does
  (`kdgrid.core.model.shapes.resolve_teacher`: the saved weights checked against the hash the assistant's done row
  recorded); a refusal fails the trial with its message;
- a done trial hands its "model" to ``on_model``: `FakeStudent`, whose ``save_pretrained`` writes a BERT config
  of the trial's student shape and weights bytes derived from the trial id, so the worker keeps it as it keeps a
  real student (`kdgrid.core.training.student_export.save_student`, with the assistant's teacher's tokenizer).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import resolve_teacher, student_shape
from kdgrid.core.model.trained_teacher import WEIGHTS_FILE
from kdgrid.launch.worker import run_job_to_store
from kdgrid.result import TrialResult
from kdgrid.trial import Trial, assistant_id
from tests.launch.fakes import _run_one, each_trial


class FakeStudent:
    """Stands for a trained student: ``save_pretrained`` writes a real config and fake weights."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial

    def save_pretrained(self, path: Path, **_: Any) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        bert_config(student_shape(self.trial.student), 2).save_pretrained(path)
        (Path(path) / WEIGHTS_FILE).write_bytes(fake_weights(self.trial))


# Set (to any text) to make every student trained from then on differ from the one trained before: training
# that is not bit-identical from run to run, as on a GPU.
SALT_VARIABLE = "KDGRID_TEST_WEIGHTS_SALT"


def fake_weights(trial: Trial) -> bytes:
    salt = os.environ.get(SALT_VARIABLE, "")
    return hashlib.sha256(f"weights of {trial.trial_id}{salt}".encode()).digest() * 4


def chain_run_job(
    trials: list[Trial],
    *,
    checkpoint_dir: Path | None = None,
    on_result: Callable[[TrialResult], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    on_model: Callable[[Trial, Any], None] | None = None,
) -> list[TrialResult]:
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None

    def run_one(trial: Trial) -> TrialResult:
        extra = {}
        if assistant_id(trial.teacher) is not None:
            extra["fake_teacher_source"] = resolve_teacher(trial.teacher, trial.task).source
        result = _run_one(trial, folder, on_step)
        result.extra.update(extra)
        if on_model is not None:
            on_model(trial, FakeStudent(trial))
        return result

    return each_trial(trials, run_one, on_result)


def chain_job_to_store(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
) -> None:
    """`run_job_to_store` with `chain_run_job` as its core."""
    run_job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir,
                     run_job=chain_run_job)  # fmt: skip
