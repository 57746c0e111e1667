"""One student inside a job: its set-up, its training step, its end of epoch and its finish.

Each student owns its weights, projections, AdamW optimizer, linear warm-up/decay scheduler and RNG stream:
dropout draws from the global torch RNG, so each student's generator state is swapped in around its own step and
swapped out after (`StudentRun.own_rng`). Evaluation draws nothing (eval mode). Hence the invariant the tests
check: a trial trained in a group of N gives exactly the same weights and metrics as the trial trained alone (CPU,
deterministic mode).
"""

from __future__ import annotations

import contextlib
import math
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from kdgrid.core.job.init import build_student
from kdgrid.core.job.loaded_job import LoadedJob, TeacherInfo
from kdgrid.core.method_registry import step_hooks
from kdgrid.core.model.capture import FeatureCapture, Features
from kdgrid.core.model.evaluate import evaluate_dev_sets, measure_latency_ms
from kdgrid.core.model.runtime import Runtime, compile_forward
from kdgrid.core.model.ssm.capture import SSMCapture, capture_student
from kdgrid.core.optim import build_optimizer, scaled_step
from kdgrid.core.optimizers import DEFAULT_OPTIMIZER, LEARNED_LR_SCALE, OPTIMIZER
from kdgrid.core.step_hooks import TRAINING, StepHooks
from kdgrid.core.teacher.targets import TeacherTargets, shared_teacher_targets
from kdgrid.core.training.checkpoint import load_checkpoint, remove_checkpoint, save_checkpoint
from kdgrid.core.training.finite_guard import FiniteGuard
from kdgrid.core.training.objective import DivergenceError, Objective, captured_layers, teacher_needs
from kdgrid.core.training.step_curves import StepCurves, gradient_norm
from kdgrid.core.training.trial_setup import TrialSetup
from kdgrid.device_sharing import current_sharing
from kdgrid.predictions import DevSetPredictions, TrialPredictions
from kdgrid.result import Fence, TrialResult
from kdgrid.trial import Trial

# transformers' names for turning on activation checkpointing (``activation_checkpointing_enable`` from v5 on).
CHECKPOINTING_METHODS = ("activation_checkpointing_enable", "gradient_checkpointing_enable")


def utc_now() -> str:
    """The current time as rows record it (ISO-8601, UTC, seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def primary_score(scores: dict[str, dict[str, float]], dev_set: str, metric: str) -> float:
    """The score best-epoch selection compares (-inf when missing or NaN, so any real score beats it)."""
    value = scores.get(dev_set, {}).get(metric, float("nan"))
    return -math.inf if math.isnan(value) else value


@dataclass
class StudentRun:
    """One trial's training state inside a job."""

    plan: TrialSetup | None  # None for a trial that failed before it could be planned
    result: TrialResult
    model: Any = None
    objective: Objective | None = None
    capture: FeatureCapture | SSMCapture | None = None
    optimizer: torch.optim.Optimizer | None = None
    scheduler: Any = None
    scaler: Any = None
    cpu_rng: torch.Tensor | None = None
    cuda_rng: torch.Tensor | None = None
    epochs_done: int = 0
    finished: bool = False
    best_primary: float = -math.inf
    sums: dict[str, torch.Tensor] = field(default_factory=dict)
    steps_in_epoch: int = 0
    seconds: float = 0.0
    teacher_info: TeacherInfo | None = None  # the job's teacher facts and predictions, added to the row
    finite_guard: FiniteGuard = field(default_factory=FiniteGuard)  # loss finiteness, read every N steps
    # The parts of the trial's methods in its training (`kdgrid.core.step_hooks`), in registration order.
    hooks: list[StepHooks] = field(default_factory=list)
    max_grad_norm: float | None = None  # the option, read once at set-up (None or 0: no clipping)
    fence: Fence | None = None  # asked before each file of the trial is written (`kdgrid.result.Fence`)
    curves: StepCurves | None = None  # the step-level curves of the row (kdgrid.core.training.step_curves)

    @property
    def trial(self) -> Trial:
        return self.result.trial

    @property
    def active(self) -> bool:
        """Still training: not finished and not failed."""
        return not self.finished and self.result.status == "done"

    def features_of(self, job: LoadedJob, batch: dict[str, torch.Tensor], phase: int, index: int) -> Features:
        """This student's features of ``batch``: the batch as its methods transform it (masking), the forward pass
        through its capture, and what its methods add (a second head's logits). ``phase`` and ``index``:
        `kdgrid.core.step_hooks.TRAINING` and the job's step, or ``CALIBRATION`` and the warm-up batch."""
        assert self.capture is not None
        for hook in self.hooks:
            batch = hook.student_batch(self, job, batch, phase, index)
        own = (f for h in self.hooks if (f := h.student_features(self, job, batch, phase, index)) is not None)
        features = next(own, None)  # a method's in place of the pass (a teacher-forced objective reads none)
        if features is None:
            features = self.capture(batch)
        for hook in self.hooks:
            features = hook.features(self, features)
        return features

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Inside, a forward pass of the student that is not the training step's (a held-out batch) leaves the
        capture's and every method's hooks as they were: nothing of that pass is kept."""
        assert self.capture is not None
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.capture.suspended())
            for hook in self.hooks:
                stack.enter_context(hook.suspended(self))
            yield

    @contextlib.contextmanager
    def own_rng(self, runtime: Runtime) -> Iterator[None]:
        """Run with this student's RNG stream as the global one; save where it got to afterwards."""
        cuda = runtime.device.type == "cuda"
        saved_cpu = torch.get_rng_state()
        saved_cuda = torch.cuda.get_rng_state(runtime.device) if cuda else None
        assert self.cpu_rng is not None
        torch.set_rng_state(self.cpu_rng)
        if cuda and self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, runtime.device)
        try:
            yield
        finally:
            self.cpu_rng = torch.get_rng_state()
            torch.set_rng_state(saved_cpu)
            if cuda:
                self.cuda_rng = torch.cuda.get_rng_state(runtime.device)
                torch.cuda.set_rng_state(saved_cuda, runtime.device)

    def checkpoint_state(self) -> dict[str, Any]:
        """Everything a rerun needs to continue after this epoch (`restore` reads it back)."""
        assert self.objective is not None and self.optimizer is not None
        methods = {type(h).__name__: state for h in self.hooks if (state := h.checkpoint_state()) is not None}
        return {
            **({"methods": methods} if methods else {}),
            "trial_id": self.trial.trial_id,
            "model": self.model.state_dict(),
            "objective": self.objective.state_dict(),
            "betas": dict(self.objective.betas),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "cpu_rng": self.cpu_rng,
            "cuda_rng": self.cuda_rng,
            "epochs_done": self.epochs_done,
            "best_primary": self.best_primary,
            "result": {
                "scores": self.result.scores,
                "last_scores": self.result.last_scores,
                "best_epoch": self.result.best_epoch,
                "curve": self.result.curve,
                "loss_terms": self.result.loss_terms,
                "step_curves": self.result.step_curves,
                "started_at": self.result.started_at,
                "extra": self.result.extra,
                "predictions": predictions_to_checkpoint(self.result.predictions),
            },
            "seconds": self.seconds,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a `checkpoint_state`."""
        assert self.objective is not None and self.optimizer is not None
        self.model.load_state_dict(state["model"])
        self.objective.betas.update(state["betas"])
        self.objective.load_state_dict(state["objective"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state["scaler"] is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.cpu_rng = state["cpu_rng"]
        self.cuda_rng = state["cuda_rng"]
        self.epochs_done = state["epochs_done"]
        self.best_primary = state["best_primary"]
        for key, value in state["result"].items():
            setattr(self.result, key, predictions_from_checkpoint(value) if key == "predictions" else value)
        self.result.extra["resumed_from_epoch"] = self.epochs_done
        self.seconds = state["seconds"]
        for hook in self.hooks:
            saved = state.get("methods", {}).get(type(hook).__name__)
            if saved is not None:
                hook.restore(saved)


def predictions_to_checkpoint(predictions: TrialPredictions) -> dict[str, dict[str, Any]]:
    """The best epoch's predictions as a checkpoint holds them (tensors and strings: read with weights_only)."""
    return {
        name: {
            "gold": torch.from_numpy(dev.gold),
            "student": torch.from_numpy(dev.student),
            "fingerprint": dev.fingerprint,
        }
        for name, dev in predictions.items()
    }


def predictions_from_checkpoint(saved: dict[str, dict[str, Any]]) -> TrialPredictions:
    """`predictions_to_checkpoint` reversed (the teacher's are added when the trial finishes)."""
    return {
        name: DevSetPredictions(dev["gold"].numpy(), dev["student"].numpy(), None, dev["fingerprint"])
        for name, dev in saved.items()
    }


def mark_failed(result: TrialResult, error: BaseException, **extra: Any) -> TrialResult:
    """``result`` marked ``failed`` with the error's type, message and traceback, and ``extra`` recorded."""
    result.status = "failed"
    result.error_type = type(error).__name__
    result.error_message = str(error)
    result.traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    result.ended_at = utc_now()
    result.extra.update(extra)
    return result


def setup_student(plan: TrialSetup, job: LoadedJob, checkpoint_dir: Path | None = None) -> StudentRun:
    """A planned trial's student ready to train: model, projections, optimizer, scheduler and RNG stream, all
    seeded by the trial's seed; restored from ``checkpoint_dir`` when it holds the trial's last epoch."""
    trial = plan.trial
    result = TrialResult(trial=trial, status="done", device=job.runtime.description, started_at=utc_now())
    run = StudentRun(plan=plan, result=result)
    num_labels = job.task.num_labels
    model, info = build_student(trial, plan.shape, num_labels, plan.teacher, job.teacher_model)
    result.extra.update(info)
    run.hooks = step_hooks(trial)  # the trial's methods' parts in its training
    handed: dict[str, Any] = {}
    for hook in run.hooks:
        handed.update(hook.objective_kwargs(run, job))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(trial.seed + 1)  # projections: their own seeded draw, independent of the model's
        objective = Objective(
            trial, plan.terms, plan.shape, plan.teacher.shape, job.task.is_regression, hooks=run.hooks, **handed
        )
        torch.manual_seed(trial.seed + 2)  # the student's RNG stream for dropout
        run.cpu_rng = torch.get_rng_state()
    runtime = job.runtime
    if runtime.device.type == "cuda":
        gen = torch.Generator(device=runtime.device).manual_seed(trial.seed + 2)
        run.cuda_rng = gen.get_state()
    checkpointable = any(hasattr(model, name) for name in CHECKPOINTING_METHODS)  # not an SSM student
    if plan.shape.width >= runtime.checkpoint_width and checkpointable:
        # Non-reentrant: the Q/K/V our hooks capture inside a checkpointed layer stay in the autograd graph, so
        # knowledge on them still trains the student (the reentrant variant would run them without gradients).
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        result.extra["gradient_checkpointing"] = True
    for hook in run.hooks:
        hook.prepare_model(run, job, model)
    run.model = runtime.place(model)
    run.objective = objective.to(runtime.device)
    needs = teacher_needs(plan.terms, run.objective.specs)
    layers = captured_layers(plan.terms, 0, plan.shape.layers)
    run.capture = capture_student(run.model, needs, layers)
    total_steps = job.steps_per_epoch * trial.epochs
    run.optimizer, run.scheduler = build_optimizer(
        [run.model, run.objective],
        trial.lr,
        trial.weight_decay,
        total_steps,
        trial.warmup_ratio,
        kind=trial.option(OPTIMIZER) or DEFAULT_OPTIMIZER,
        options=dict(trial.options),
        learned=run.objective.learned_modules(),
        learned_lr_scale=trial.option(LEARNED_LR_SCALE),
    )
    run.scaler = runtime.grad_scaler()
    run.max_grad_norm = trial.option("max_grad_norm")
    run.curves = StepCurves.for_student(result, total_steps, num_labels)
    if runtime.compile:
        run.model.forward = compile_forward(run.model)
    result.layer_pairs = plan.used_pairs
    result.student_params = sum(p.numel() for p in run.model.parameters())
    result.student_flops = plan.shape.flops_per_sequence(trial.max_length, num_labels)
    mapping_params = sum(p.numel() for p in run.objective.mapping.parameters()) if run.objective.mapping else 0
    learned = run.objective.learned_parameter_count()
    result.extra["projection_params"] = sum(p.numel() for p in run.objective.parameters()) - learned
    if run.objective.mapping is not None:
        result.extra["mapping_params"] = mapping_params
    result.extra["teacher_source"] = plan.teacher.source
    result.extra["steps_per_epoch"] = job.steps_per_epoch
    for hook in run.hooks:  # the methods' checks and records (a curriculum refuses a stage with no step)
        hook.set_up(run, job)
    state = load_checkpoint(checkpoint_dir, trial.trial_id)
    if state is not None:
        run.restore(state)
    result.weights = run.objective.weights()
    return run


def train_step(
    run: StudentRun,
    job: LoadedJob,
    batch: dict[str, torch.Tensor],
    teacher: Features,
    step: int,
    targets: TeacherTargets | None = None,
) -> None:
    """One optimizer step of one student on ``batch`` against the teacher's features of that batch.

    Args:
        batch: the batch on the job's device (``Runtime.to_device``).
        teacher: `teacher_forward`'s features of the same batch.
        step: the job's 1-based step (named by a `DivergenceError`).
        targets: the batch's memo of teacher-side loss targets (Gram products, head-mean attention,
            relations, ...): pass the same `TeacherTargets` to every student of one batch, and a new one for
            the next batch, so each target is computed once per batch; ``None`` computes them for this student.
            Shared or not, the student trains exactly the same.

    Raises:
        DivergenceError: a loss term (or the total) was NaN or infinite at this step or one since the last
            check (`kdgrid.core.training.finite_guard`: the host reads that every `CHECK_EVERY_STEPS` steps, not every
            step); the student's state is then undefined.
    """
    assert run.objective is not None and run.capture is not None and run.optimizer is not None
    memo = shared_teacher_targets(targets) if targets is not None else contextlib.nullcontext()
    run.objective.set_progress(step - 1, job.steps_per_epoch * run.trial.epochs)
    for hook in run.hooks:
        hook.before_step(run, job, step)
    with run.own_rng(job.runtime), memo:
        run.model.train()
        with job.runtime.autocast():
            features = run.features_of(job, batch, TRAINING, step)
            values = run.objective.term_values(features, teacher, batch["labels"])
            total = run.objective.total(values)
        if run.curves is not None:
            run.curves.observe(values, total)
        # No host sync per step: the guard is read every N steps and at the epoch's end.
        run.finite_guard.observe(values, total, step)
        if run.finite_guard.due(step):
            run.finite_guard.check(run.objective, step)
        scaler = run.scaler
        # A method may take the step's gradients itself (DOT's split, LKD's lookahead); else the backward pass.
        taken = [hook.gradients(run, job, values, step) for hook in run.hooks]
        if not any(taken):
            (scaler.scale(total) if scaler is not None else total).backward()
        for hook in run.hooks:
            hook.after_backward(run)  # e.g. a curriculum's frozen layers lose their gradients
        max_norm = run.max_grad_norm
        curve_point = run.curves is not None and run.curves.due(step)
        if max_norm or curve_point:
            if scaler is not None:
                scaler.unscale_(run.optimizer)  # clip (and measure) the true gradients, not the scaled ones
            params = [p for g in run.optimizer.param_groups for p in g["params"]]
            norm = torch.nn.utils.clip_grad_norm_(params, float(max_norm)) if max_norm else gradient_norm(params)
            if curve_point:
                assert run.curves is not None
                mapping = run.objective.mapping.summary() if run.objective.mapping is not None else None
                lr = float(run.optimizer.param_groups[0]["lr"])
                run.curves.close(step, run.objective.weights(), lr, float(norm), mapping)
        # A scaler skips the step when a gradient is inf/NaN; the schedule then waits for the next real step.
        scaled_step(run.optimizer, run.scheduler, scaler)
        run.optimizer.zero_grad(set_to_none=True)
    for name, value in values.items():
        detached = value.detach().float()
        run.sums[name] = run.sums[name] + detached if name in run.sums else detached
    run.steps_in_epoch += 1


def end_epoch(run: StudentRun, job: LoadedJob, epoch: int, checkpoint_dir: Path | None = None) -> None:
    """Close a student's ``epoch`` (0-based): check its weights are finite, record the epoch's mean loss terms
    and dev scores, keep the best epoch's scores and per-example predictions, and save a checkpoint unless it was the last epoch.

    Raises:
        DivergenceError: a loss since the last check, or a parameter, is NaN or infinite.
    """
    assert run.objective is not None
    step = (epoch + 1) * job.steps_per_epoch
    run.finite_guard.check(run.objective, step)  # the epoch's last steps, before evaluating or checkpointing
    for name, param in run.model.named_parameters():
        if not torch.isfinite(param).all():
            raise DivergenceError(step, f"parameters ({name})", None, float("nan"))
    loss_terms = {k: float(v) / max(1, run.steps_in_epoch) for k, v in run.sums.items()}
    run.sums, run.steps_in_epoch = {}, 0
    with job.runtime.autocast():
        outcome = evaluate_dev_sets(
            run.model, job.task, job.dev_sets(), run.trial.batch_size, job.runtime.device
        )
    scores = outcome.scores
    run.epochs_done = epoch + 1
    result = run.result
    result.curve.append({"epoch": epoch + 1, "scores": scores, "loss_terms": loss_terms})
    result.last_scores = scores
    result.loss_terms = loss_terms
    primary = primary_score(scores, job.task.dev_sets[0], job.task.primary_metric)
    if result.best_epoch is None or primary > run.best_primary:
        run.best_primary, result.scores, result.best_epoch = primary, scores, epoch + 1
        result.predictions = job.dev_predictions(outcome.predicted)
    for hook in run.hooks:  # what the methods track per epoch (LKD's weights, the cosine, overfitting)
        hook.end_epoch(run, job, epoch)
    if checkpoint_dir is not None and run.epochs_done < run.trial.epochs:
        save_checkpoint(checkpoint_dir, run.trial.trial_id, run.checkpoint_state(), fence=run.fence)


def finish_student(
    run: StudentRun,
    on_result: Callable[[TrialResult], None] | None,
    checkpoint_dir: Path | None,
    on_model: Callable[[Trial, Any], None] | None = None,
) -> None:
    """Close a student (done or failed): measure a done student's latency, hand its model to ``on_model``, free
    its memory, add the teacher's facts and predictions, report the result to ``on_result`` and drop a done trial's checkpoint."""
    run.finished = True
    # a trial this process no longer holds writes nothing of its own (kept student, knowledge base) from here on
    held = run.fence is None or run.fence(run.trial.trial_id) is None
    for hook in run.hooks:
        if not held or run.result.status != "done" or run.model is None:
            break
        try:
            run.result.extra.update(hook.after_training(run, run.model))
        except Exception as error:
            mark_failed(run.result, error, failed_in=hook.after_training_failure)
    if run.result.status == "done" and run.model is not None:
        run.result.extra["latency_ms"] = measure_latency_ms(run.model, run.trial.max_length)
        # Who else used the device while it was measured (`kdgrid.device_sharing`): tables compare like with like.
        run.result.extra["latency_sharing"] = current_sharing()
        if on_model is not None and held:
            on_model(run.trial, run.model)
    run.result.ended_at = run.result.ended_at or utc_now()
    run.result.wall_time_s = round(run.seconds, 3)
    if run.capture is not None:
        run.capture.remove()
    if run.objective is not None:
        run.result.extra.update(run.objective.learned_parts())  # what a learnable mapping or temperature learned
    run.model = run.optimizer = run.scheduler = run.objective = None  # free memory for the mates
    if run.teacher_info is not None:
        run.result.extra.update(run.teacher_info())
        run.result.predictions = run.teacher_info.add_teacher(run.result.predictions)
    # asked again right before the row: a checkpoint is removed only while the trial is still this process's
    held = held and (run.fence is None or run.fence(run.trial.trial_id) is None)
    if on_result is not None:
        on_result(run.result)
    if run.result.status == "done" and held:
        remove_checkpoint(checkpoint_dir, run.trial.trial_id)
