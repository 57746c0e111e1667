"""`run_job`: train a group of students against one teacher pass, and the trainer's public API.

A job is a list of trials sharing `kdgrid.trial.group_key`; they see the same batches in the same order (drawn
from the job's data-order seed, `kdgrid.trial.data_order_seed`: students of one job may differ in seed), so the
teacher runs once per batch (`kdgrid.core.job.loaded_job`) and every student trains on its features (`kdgrid.core.training.student`:
each student owns its weights, optimizer and RNG stream, so a trial trained in a group of N gives exactly the
same weights and metrics as the trial trained alone on CPU in deterministic mode). Teacher-side loss targets are
computed once per batch too (`kdgrid.core.teacher.targets`: one memo per batch, passed to every student's step).

A trial that fails (bad config, a NaN/inf loss, an exception in its step) is reported ``failed`` with the step,
loss term and layer pair where that applies; its group-mates go on. Device, precision and compilation settings:
`kdgrid.core.model.runtime`.

The trainer's steps, for executors and benchmarks that drive them one by one (all importable from here):
`make_runtime` -> `load_job` -> `set_up_trial` -> `setup_student` per trial -> per batch `teacher_forward`, then
`train_step` per student -> `end_epoch` per student -> `finish_student`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kdgrid.core.data.batching import train_batches
from kdgrid.core.job import phases
from kdgrid.core.job.loaded_job import LoadedJob, TeacherInfo, load_job, teacher_forward
from kdgrid.core.method_registry import evaluates_only, step_hooks
from kdgrid.core.model.capture import FeatureCapture
from kdgrid.core.model.runtime import Runtime, make_runtime
from kdgrid.core.options import DEFAULT_AUTO_BATCHES
from kdgrid.core.step_hooks import CALIBRATION, TRAINING, StepHooks
from kdgrid.core.teacher.gate import TeacherGateRefused
from kdgrid.core.teacher.share import record_teacher_pass
from kdgrid.core.teacher.targets import TeacherTargets, shared_teacher_targets
from kdgrid.core.training.objective import DivergenceError, captured_layers
from kdgrid.core.training.student import (
    StudentRun,
    end_epoch,
    finish_student,
    mark_failed,
    setup_student,
    train_step,
    utc_now,
)
from kdgrid.core.training.trial_setup import TrialSetup, set_up_trial, validate_trials
from kdgrid.errors import ConfigError
from kdgrid.result import Fence, TrialResult
from kdgrid.trial import GROUP_DESCRIPTION, Trial, data_order_seed, group_key

__all__ = [
    "DEFAULT_AUTO_BATCHES",
    "LoadedJob",
    "Runtime",
    "StudentRun",
    "TeacherTargets",
    "TrialSetup",
    "calibrate_auto_weights",
    "end_epoch",
    "finish_student",
    "load_job",
    "make_runtime",
    "run_job",
    "set_up_trial",
    "setup_student",
    "teacher_capture_needs",
    "teacher_forward",
    "train_step",
    "validate_trials",
]


def teacher_capture_needs(runs: list[StudentRun]) -> tuple[frozenset[str], frozenset[int]]:
    """What the teacher pass must capture for these students: the union of their features, and of the teacher
    layers they are matched to (only those are kept while the students train)."""
    needs: set[str] = {"logits"}
    layers: set[int] = set()
    for run in runs:
        if run.capture is not None and run.plan is not None:
            needs |= run.capture.needs
            layers |= captured_layers(run.plan.terms, 1, run.plan.teacher.shape.layers)
        for hook in run.hooks:  # what a method's own objective reads of the teacher (a teacher-forced stage's)
            method_needs, method_layers = hook.teacher_capture(run)
            needs |= method_needs
            layers |= method_layers
    return frozenset(needs), frozenset(layers)


def calibrate_auto_weights(
    runs: list[StudentRun],
    job: LoadedJob,
    capture: FeatureCapture,
    seed: int,
    on_result: Callable[[TrialResult], None] | None = None,
) -> None:
    """Set the auto weights of every uncalibrated student on the first warm-up batches of epoch 1, in the order
    ``seed`` draws (the job's data-order seed, `kdgrid.trial.data_order_seed`), in eval mode, without gradients
    or random draws: calibration leaves the student exactly as it was. A student whose calibration raises is
    failed and finished (reported to ``on_result``)."""
    pending = [
        r
        for r in runs
        if r.active and r.objective is not None and r.objective.auto and not r.objective.calibrated
    ]
    if not pending:
        return
    phases.phase(phases.CALIBRATING)
    batches = train_batches(job.tokenized["train"], pending[0].trial.batch_size, seed, 0)
    counts = {r.trial.trial_id: int(r.trial.option("auto_batches", DEFAULT_AUTO_BATCHES)) for r in pending}
    n = min(max(counts.values()), len(batches))
    sums: dict[str, dict[str, float]] = {r.trial.trial_id: {} for r in pending}
    job_hooks = step_hooks(pending[0].trial)  # the teacher's batch: every trial of a job reads it alike
    for index, batch in enumerate(batches[:n]):
        batch = job.runtime.to_device(batch)
        teacher = teacher_forward(job, capture, teacher_batch(job_hooks, job, batch, CALIBRATION, index, pending))
        with shared_teacher_targets(TeacherTargets()):  # this batch's teacher-side targets, for every student
            for run in pending:
                if index >= counts[run.trial.trial_id] or not run.active:
                    continue
                assert run.objective is not None and run.capture is not None
                run.model.eval()
                try:
                    with torch.no_grad(), job.runtime.autocast():
                        features = run.features_of(job, batch, CALIBRATION, index)
                        values = run.objective.term_values(features, teacher, batch["labels"])
                except Exception as error:
                    mark_failed(run.result, error, failed_in="auto-weight calibration")
                    finish_student(run, on_result, None)
                    continue
                for name, value in values.items():
                    sums[run.trial.trial_id][name] = sums[run.trial.trial_id].get(name, 0.0) + float(value)
    for run in pending:
        if not run.active:
            continue
        used = min(counts[run.trial.trial_id], n)
        means = {k: v / used for k, v in sums[run.trial.trial_id].items()}
        assert run.objective is not None
        run.objective.calibrate(means)
        run.result.weights = run.objective.weights()
        run.result.extra["auto_calibration"] = {"batches": used, "means": means}


def teacher_batch(
    hooks: list[StepHooks],
    job: LoadedJob,
    batch: dict[str, torch.Tensor],
    phase: int,
    index: int,
    students: list[StudentRun],
) -> dict[str, torch.Tensor]:
    """The batch the job's shared teacher pass reads: ``batch`` as the methods of the job's trials transform it
    (``hooks``: the first trial's; what they do to the teacher's input is part of the group key; ``students``: the
    students that read the pass, for a transform that reads a student, MaskedKD's)."""
    for hook in hooks:
        batch = hook.teacher_batch(job, batch, phase, index, students)
    return batch


def _mark_failed(run: StudentRun, error: Exception, **where: int) -> None:
    """A student's step or end of epoch raised: a divergence is recorded with the step, term and layer pair where
    the loss stopped being finite; any other error with ``where`` (``failed_at_step`` or ``failed_at_epoch``)."""
    if isinstance(error, DivergenceError):
        pair = list(error.pair) if error.pair else None
        mark_failed(run.result, error, diverged_at_step=error.step, diverged_term=error.term, diverged_pair=pair)
    else:
        mark_failed(run.result, error, **where)


def run_job(
    trials: list[Trial],
    *,
    checkpoint_dir: Path | None = None,
    device: str = "auto",
    on_result: Callable[[TrialResult], None] | None = None,
    on_model: Callable[[Trial, Any], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    fence: Fence | None = None,
) -> list[TrialResult]:
    """Train every trial of a job (they must share `group_key`) against one teacher pass per batch.

    Returns one `TrialResult` per trial, in the order given; ``on_result`` is called as each finishes. A trial
    that cannot be set up or diverges is ``failed``; the others go on. A job-level failure (the teacher or the
    data cannot be loaded, the teacher gate refuses the teacher: `kdgrid.core.teacher.gate`) fails every trial
    with that error, before any student is built. With ``checkpoint_dir``, each trial saves its state
    at the end of every epoch and a rerun continues from there (a finished trial's checkpoint is removed).
    ``on_model(trial, model)`` (optional, not needed by executors) receives each finished student's model, e.g.
    to save it or, in tests, to compare weights. ``on_step(done, total)`` (optional) is called after every
    shared batch with the job's batches done and its total (epochs x batches per epoch), for progress bars.
    ``fence(trial_id)`` (optional, `kdgrid.result.Fence`) is asked before each file of a trial is written
    or removed (epoch checkpoints, the kept student, ReAugKD's knowledge base and student): where it says the
    trial is no longer this process's, nothing is.
    Evaluation-only trials (a method's ``evaluates_only``: ReAugKD's) train nothing: they run after the job's
    students, so one trained in the same job is saved by then.
    """
    if not trials:
        return []
    keys = {group_key(t) for t in trials}
    if len(keys) > 1:
        raise ConfigError(f"the trials of one job must agree on {GROUP_DESCRIPTION}")
    checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    runtime = make_runtime(device)
    first = trials[0]
    results: dict[int, TrialResult] = {}

    def failed_before_training(trial: Trial, error: BaseException) -> TrialResult:
        # a refused teacher: every row of the job carries the gate's scores
        extra = {"teacher_gate": error.report} if isinstance(error, TeacherGateRefused) else {}
        result = mark_failed(TrialResult(trial=trial, status="failed", started_at=utc_now()), error, **extra)
        result.device = runtime.description
        if on_result is not None:
            on_result(result)
        return result

    try:
        job = load_job(first, runtime)
    except Exception as error:
        return [failed_before_training(trial, error) for trial in trials]

    teacher_info = TeacherInfo(job, first.batch_size)
    phases.phase(phases.SETTING_UP)
    runs: list[StudentRun] = []
    for index, trial in enumerate(trials):
        if evaluates_only(trial):
            continue
        try:
            run = setup_student(set_up_trial(trial, job.teacher), job, checkpoint_dir)
            run.teacher_info = teacher_info
            run.fence = fence
            runs.append(run)
        except Exception as error:
            results[index] = failed_before_training(trial, error)
            runs.append(StudentRun(plan=None, result=results[index], finished=True))

    def finish(run: StudentRun) -> None:
        finish_student(run, on_result, checkpoint_dir, on_model)

    teacher_capture = FeatureCapture(job.teacher_model, *teacher_capture_needs(runs))
    data_seed = data_order_seed(first)  # the same for every trial of the job (part of `group_key`)
    job_hooks = step_hooks(first)
    calibrate_auto_weights(runs, job, teacher_capture, data_seed, on_result)

    for epoch in range(first.epochs):
        for run in runs:
            if run.active and run.epochs_done >= first.epochs:
                finish(run)  # resumed after its last epoch's checkpoint
        active = [r for r in runs if r.active and r.epochs_done == epoch]
        if not active:
            continue
        teacher_capture.set_needs(*teacher_capture_needs(active))
        phases.phase(phases.TRAINING)
        for step_in_epoch, batch in enumerate(
            train_batches(job.tokenized["train"], first.batch_size, data_seed, epoch)
        ):
            live = [r for r in active if r.active]
            if not live:
                break
            batch = runtime.to_device(batch)
            started = time.perf_counter()
            step = epoch * job.steps_per_epoch + step_in_epoch + 1
            teacher = teacher_forward(job, teacher_capture, teacher_batch(job_hooks, job, batch, TRAINING, step, live))
            teacher_seconds = time.perf_counter() - started
            share = teacher_seconds / len(live)
            targets = TeacherTargets()  # teacher-side loss targets: once per batch, not per student
            for run in live:
                record_teacher_pass(run.result.extra, teacher_seconds, len(live))
                t0 = time.perf_counter()
                try:
                    train_step(run, job, batch, teacher, step, targets)
                except Exception as error:
                    _mark_failed(run, error, failed_at_step=step)
                    finish(run)
                run.seconds += time.perf_counter() - t0 + share
            del teacher, targets  # before the next batch's teacher pass: one set of features at a time
            if on_step is not None:
                on_step(step, first.epochs * job.steps_per_epoch)
        phases.phase(phases.EVALUATING, epoch=epoch + 1)
        for run in active:
            if not run.active:
                continue
            t0 = time.perf_counter()
            try:
                end_epoch(run, job, epoch, checkpoint_dir)
            except Exception as error:
                _mark_failed(run, error, failed_at_epoch=epoch + 1)
            run.seconds += time.perf_counter() - t0
            if not run.active or run.epochs_done >= run.trial.epochs:
                finish(run)
        phases.epoch_ended(epoch + 1, (r.result for r in active), job.task.dev_sets[0], job.task.primary_metric)
    for run in runs:
        if run.active:  # every epoch was already done (resumed at the very end)
            finish(run)
    teacher_capture.remove()
    trained = iter(run.result for run in runs)
    return [
        evaluate_only(trial, job, teacher_info, on_result) if evaluates_only(trial) else next(trained)
        for trial in trials
    ]


def evaluate_only(
    trial: Trial, job: LoadedJob, teacher_info: TeacherInfo, on_result: Callable[[TrialResult], None] | None
) -> TrialResult:
    """An evaluation-only trial's result (the first of its methods' `StepHooks.evaluate` that gives one), or its
    failure."""
    started_at = utc_now()
    try:
        results = (hook.evaluate(job, teacher_info, started_at) for hook in step_hooks(trial))
        result = next((r for r in results if r is not None), None)
        if result is None:
            raise ConfigError(f"trial {trial.trial_id} evaluates only, but none of its methods evaluates it")
        result.ended_at = utc_now()
    except Exception as error:
        result = mark_failed(TrialResult(trial=trial, status="failed", started_at=started_at), error)
        result.device = job.runtime.description
    if on_result is not None:
        on_result(result)
    return result
