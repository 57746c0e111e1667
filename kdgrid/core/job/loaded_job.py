"""What a job's students share: the task, its tokenized splits, the teacher (loaded once) and its forward pass.

A job is a list of trials sharing `kdgrid.trial.group_key` (task, teacher, data-order seed, batch size, max
length, epochs, max_train_samples, teacher options): they see the same batches in the same order, so the teacher
runs once per batch, under ``torch.no_grad``, capturing the union of what the students' knowledge needs
(`teacher_forward`).

Before any student exists, `load_job` resolves which task label each teacher output means
(`kdgrid.core.teacher.label_order`) and gates the teacher (`kdgrid.core.teacher.gate`: a teacher kdgrid did not
fine-tune must beat the majority class, in its label order and no other); `teacher_forward` hands every student
the teacher's logits already in the task's label order.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kdgrid.core.data import TaskSpec, get_task
from kdgrid.core.data.batching import train_batches
from kdgrid.core.data.holdout import HeldOut, split_off
from kdgrid.core.data.tokenization import tokenize_task
from kdgrid.core.job import phases
from kdgrid.core.model.capture import FeatureCapture, Features
from kdgrid.core.model.evaluate import dev_fingerprint, evaluate_dev_sets, gold_labels
from kdgrid.core.model.models import load_teacher, load_tokenizer
from kdgrid.core.model.runtime import Runtime
from kdgrid.core.model.shapes import ResolvedTeacher, resolve_teacher
from kdgrid.core.model.teacher_cache import TEACHER_INFO
from kdgrid.core.options import MAX_DEV_SAMPLES
from kdgrid.core.teacher.gate import check_teacher
from kdgrid.core.teacher.label_order import LabelOrder, resolve_label_order
from kdgrid.core.teacher.options import declared_label_order, gate_enabled, teacher_option_problems
from kdgrid.errors import ConfigError
from kdgrid.predictions import DevSetPredictions, TrialPredictions
from kdgrid.trial import LKD_HOLDOUT, Trial, data_order_seed


@dataclass
class LoadedJob:
    """The shared part of a job.

    Attributes:
        task: the task's spec.
        teacher: where the teacher comes from and its shape.
        teacher_model: the teacher, placed on the runtime's device, eval mode, no gradients.
        tokenized: the task's tokenized splits by name (``train`` and the dev sets).
        runtime: device and precision settings.
        steps_per_epoch: batches per epoch (the same for every student of the job).
        label_order: which task label each teacher output means; None = the outputs are in the task's order.
        teacher_gate: the teacher gate's verdict and scores (`kdgrid.core.teacher.gate.check_teacher`).
        dev_fingerprints: ``{dev_set: fingerprint}`` of the dev sets the job scores (after any
            ``max_dev_samples`` cut; `kdgrid.core.model.evaluate.dev_fingerprint`), recorded with every prediction.
    """

    task: TaskSpec
    teacher: ResolvedTeacher
    teacher_model: Any
    tokenized: dict[str, Any]
    runtime: Runtime
    steps_per_epoch: int
    label_order: LabelOrder | None = None
    teacher_gate: dict[str, Any] = field(default_factory=dict)
    dev_fingerprints: dict[str, str] = field(default_factory=dict)
    held_out: HeldOut | None = None  # LKD's held-out split of the training data (`kdgrid.core.data.holdout`)

    def dev_sets(self) -> dict[str, Any]:
        """The tokenized dev sets the job scores, by name, in the task's order."""
        return {name: self.tokenized[name] for name in self.task.dev_sets}

    def dev_predictions(self, predicted: dict[str, np.ndarray]) -> TrialPredictions:
        """A student's per-example predictions (`DevOutcome.predicted`) with the dev sets' gold labels and
        fingerprints; no teacher yet (`TeacherInfo.add_teacher` adds it when the trial finishes)."""
        regression = self.task.is_regression
        return {
            name: DevSetPredictions(
                gold_labels(self.tokenized[name], regression), values, None, self.dev_fingerprints[name]
            )
            for name, values in predicted.items()
        }


def load_job(trial: Trial, runtime: Runtime) -> LoadedJob:
    """Load what the job of ``trial`` (any of its trials) shares: the task's data and the teacher, its label
    order resolved and the teacher gated.

    Raises:
        ConfigError: invalid teacher options (``teacher_label_order``, ``teacher_gate``).
        kdgrid.core.teacher.gate.TeacherGateRefused: the gate refused the teacher (nothing trains).
    """
    problems = teacher_option_problems(trial)
    if problems:
        raise ConfigError("; ".join(problems))
    task = get_task(trial.task)
    phases.phase(phases.LOADING_TEACHER)
    teacher = resolve_teacher(trial.teacher, trial.task)
    # a teacher declared not meant to be accurate (`teacher_gate: false`) may come without its classifier
    teacher_model = runtime.place(load_teacher(teacher, task.num_labels, fresh_head=not gate_enabled(trial)))
    label_order = resolve_label_order(
        task, teacher.source, teacher_model.config.id2label, declared_label_order(trial)
    )
    phases.phase(phases.LOADING_DATA)
    tokenizer = load_tokenizer(teacher)
    tokenized = tokenize_task(task, tokenizer, trial.max_length, max_train_samples=trial.max_train_samples)
    phases.phase(phases.GATING)
    gate = check_teacher(
        teacher=teacher,
        model=teacher_model,
        task=task,
        dev_split=tokenized[task.dev_sets[0]],
        max_length=trial.max_length,
        order=label_order,
        enabled=gate_enabled(trial),
        device=runtime.device,
        autocast=runtime.autocast,
    )
    dev_cap = trial.option(MAX_DEV_SAMPLES)
    if dev_cap is not None:  # after the gate, which judges the teacher on the whole dev set
        tokenized = tokenized.with_dev_sets_cut(dev_cap)
    held_out = None
    fraction = trial.option(LKD_HOLDOUT)
    if fraction is not None:  # part of the group key: every trial of the job holds out the same examples
        train, held, indices = split_off(tokenized["train"], float(fraction), data_order_seed(trial))
        tokenized = {**tokenized, "train": train}  # a new mapping: the tokenized task may be cached in memory
        held_out = HeldOut(held, indices, float(fraction), data_order_seed(trial))
    steps = len(train_batches(tokenized["train"], trial.batch_size, data_order_seed(trial), 0))
    fingerprints = {name: dev_fingerprint(tokenized[name]) for name in task.dev_sets}
    return LoadedJob(
        task, teacher, teacher_model, tokenized, runtime, steps, label_order, gate, fingerprints, held_out
    )


def teacher_forward(job: LoadedJob, capture: FeatureCapture, batch: dict[str, torch.Tensor]) -> Features:
    """The teacher's features of one batch (what ``capture`` is set to keep), without gradients; its logits
    ``[B, C]`` are in the task's label order (`LoadedJob.label_order`), whatever order the checkpoint has."""
    with torch.no_grad(), job.runtime.autocast():
        features = capture(batch)
    if job.label_order is not None:
        features.logits = job.label_order.align(features.logits)
    return features


class TeacherInfo:
    """What every row records of its teacher: its parameter count, its own dev scores ``{dev_set: {metric:
    value}}`` (the tables show them beside the students') and its per-example dev predictions (each row's
    ``predictions`` carry them beside the student's, so agreement and paired statistics need no teacher run).

    The teacher is evaluated once per job, when the job's first trial finishes: after training, so the
    evaluation reuses memory training freed instead of adding to the job's peak; its logits are read in the
    task's label order (`LoadedJob.label_order`) and it scores the very examples the students score (the job's dev
    sets, after any ``max_dev_samples`` cut). That one pass gives the predictions and, for a teacher kdgrid did
    not fine-tune (a Hub teacher), the scores; a teacher kdgrid fine-tuned brings its scores (on the full dev
    sets) and cache key in ``teacher.json``. (The teacher gate's pass is not reused: it scores at most 2,000
    examples of the first dev set and its verdict is cached across jobs.) Evaluation draws no random number (the
    students' streams are untouched); if it fails, rows say why (``teacher_predictions_error``, and
    ``teacher_scores_error`` when the scores came from it), carry no teacher predictions, and the trained
    students are kept.
    """

    def __init__(self, job: LoadedJob, batch_size: int) -> None:
        self._job = job
        self._batch_size = batch_size
        self._extra: dict[str, Any] | None = None
        self._predicted: dict[str, np.ndarray] = {}

    def __call__(self) -> dict[str, Any]:
        if self._extra is None:
            self._extra = self._compute()
        return self._extra

    def add_teacher(self, predictions: TrialPredictions) -> TrialPredictions:
        """``predictions`` (a student's) with the teacher's predictions of the same examples added; unchanged
        where the teacher could not be evaluated."""
        self()
        return {
            name: dataclasses.replace(dev, teacher=self._predicted[name]) if name in self._predicted else dev
            for name, dev in predictions.items()
        }

    def _compute(self) -> dict[str, Any]:
        job = self._job
        extra: dict[str, Any] = {
            "teacher_params": sum(p.numel() for p in job.teacher_model.parameters()),
            "teacher_gate": job.teacher_gate,
        }
        if job.label_order is not None:
            extra["teacher_label_order"] = job.label_order.record()
        try:
            with torch.no_grad():  # full precision, as the teacher's scores always were
                outcome = evaluate_dev_sets(
                    job.teacher_model,
                    job.task,
                    job.dev_sets(),
                    self._batch_size,
                    job.runtime.device,
                    align=job.label_order.align if job.label_order is not None else None,
                )
        except Exception as error:
            outcome = None
            extra["teacher_predictions_error"] = f"{type(error).__name__}: {error}"
        else:
            self._predicted = outcome.predicted
        path = Path(job.teacher.source) / TEACHER_INFO
        if job.teacher.is_local and path.is_file():
            info = json.loads(path.read_text())
            extra.update(teacher_scores=info.get("dev_scores"), teacher_key=info.get("key"))
        elif outcome is not None:
            extra["teacher_scores"] = outcome.scores
        else:
            extra["teacher_scores_error"] = extra["teacher_predictions_error"]
        return extra
