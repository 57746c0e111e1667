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

from kdgrid.core.capture import FeatureCapture, Features
from kdgrid.core.checkpoint import load_checkpoint, remove_checkpoint, save_checkpoint
from kdgrid.core.dot import DOT
from kdgrid.core.dual_head import (
    attach_distill_head,
    classifier_input_suspended,
    own_parameter_count,
    with_distill_logits,
)
from kdgrid.core.evaluate import evaluate_dev_sets, measure_latency_ms
from kdgrid.core.finite_guard import FiniteGuard
from kdgrid.core.grad_split import CosineLog, gradient_cosine, split_gradients, task_and_distillation
from kdgrid.core.init import build_student
from kdgrid.core.layer_curriculum import EXTRA_KEY as CURRICULUM_KEY
from kdgrid.core.layer_curriculum import drop_frozen_gradients
from kdgrid.core.learned_lr import LEARNED_LR_SCALE
from kdgrid.core.lkd import EXTRA_KEY as LKD_KEY
from kdgrid.core.lkd import lkd_gradients, validation_loss_fn
from kdgrid.core.loaded_job import LoadedJob, TeacherInfo
from kdgrid.core.masking import TRAINING, student_input
from kdgrid.core.method_options import DOT_DELTA, DUAL_HEAD, OPTIMIZER
from kdgrid.core.methods.mohawk.objective import TeacherForcedObjective
from kdgrid.core.methods.mohawk.spec import is_teacher_forced
from kdgrid.core.methods.mohawk.transfer import align_transferred_head
from kdgrid.core.model.ssm.capture import SSMCapture, capture_student
from kdgrid.core.model.ssm.model import SSMForSequenceClassification
from kdgrid.core.objective import DivergenceError, Objective, captured_layers, teacher_needs
from kdgrid.core.optim import build_optimizer, scaled_step
from kdgrid.core.projector_overfit import EXTRA_KEY as OVERFIT_KEY
from kdgrid.core.projector_overfit import projector_overfit
from kdgrid.core.reaugkd import pipeline as reaugkd
from kdgrid.core.runtime import Runtime, compile_forward
from kdgrid.core.teacher.targets import TeacherTargets, shared_teacher_targets
from kdgrid.core.trial_setup import TrialSetup
from kdgrid.device_sharing import current_sharing
from kdgrid.errors import ConfigError
from kdgrid.predictions import DevSetPredictions, TrialPredictions
from kdgrid.result import TrialResult
from kdgrid.trial import Trial


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
    cosine: CosineLog | None = None  # the sampled task/distillation gradient cosines (kdgrid.core.grad_split)
    # ReAugKD (`kdgrid.core.reaugkd.pipeline.after_training`): run on the trained model when the student finishes
    after_training: Callable[[Any], dict[str, Any]] | None = None

    @property
    def trial(self) -> Trial:
        return self.result.trial

    @property
    def active(self) -> bool:
        """Still training: not finished and not failed."""
        return not self.finished and self.result.status == "done"

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
        return {
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
    align_transferred_head(trial, model, None if job.label_order is None else job.label_order.columns)
    result.extra.update(info)
    head = reaugkd.teacher_head_for(trial, job, plan.shape.width)  # None unless the trial is ReAugKD's
    if head is not None:
        run.after_training = lambda trained: reaugkd.after_training(trained, trial, job, head)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(trial.seed + 1)  # projections: their own seeded draw, independent of the model's
        if is_teacher_forced(trial):  # MOHAWK's stage 1 or 2: its own objective on the SSM student's mixers
            objective = TeacherForcedObjective(model, trial, plan.shape, plan.teacher.shape, job.task.is_regression)
        else:
            objective = Objective(
                trial, plan.terms, plan.shape, plan.teacher.shape, job.task.is_regression, teacher_head=head
            )
        torch.manual_seed(trial.seed + 2)  # the student's RNG stream for dropout
        run.cpu_rng = torch.get_rng_state()
    runtime = job.runtime
    if runtime.device.type == "cuda":
        gen = torch.Generator(device=runtime.device).manual_seed(trial.seed + 2)
        run.cuda_rng = gen.get_state()
    if plan.shape.width >= runtime.checkpoint_width and not isinstance(model, SSMForSequenceClassification):
        # Non-reentrant: the Q/K/V our hooks capture inside a checkpointed layer stay in the autograd graph, so
        # knowledge on them still trains the student (the reentrant variant would run them without gradients).
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        result.extra["gradient_checkpointing"] = True
    if trial.option(DUAL_HEAD):
        result.extra["distill_head_params"] = attach_distill_head(model, trial.seed)
    run.model = runtime.place(model)
    run.objective = objective.to(runtime.device)
    needs = teacher_needs(plan.terms, run.objective.specs)
    layers = captured_layers(plan.terms, 0, plan.shape.layers)
    run.capture = capture_student(run.model, needs, layers, own_pass=not is_teacher_forced(trial))
    total_steps = job.steps_per_epoch * trial.epochs
    run.optimizer, run.scheduler = build_optimizer(
        [run.model, run.objective],
        trial.lr,
        trial.weight_decay,
        total_steps,
        trial.warmup_ratio,
        kind=trial.option(OPTIMIZER) or "adamw",
        dot_delta=trial.option(DOT_DELTA),
        learned=run.objective.learned_modules(),
        learned_lr_scale=trial.option(LEARNED_LR_SCALE),
    )
    run.scaler = runtime.grad_scaler()
    if run.scaler is not None and isinstance(run.optimizer, DOT):
        raise ConfigError("optimizer 'dot' takes no fp16 loss scaling: run it with KDGRID_AMP=bf16 or off")
    if run.objective.loss_weights is not None:
        if run.scaler is not None:
            raise ConfigError("LKD (lkd_holdout) takes no fp16 loss scaling: run it with KDGRID_AMP=bf16 or off")
        if job.held_out is None:
            raise ConfigError("LKD (lkd_holdout): this job holds no split out of its training data")
        result.extra[LKD_KEY] = {
            "terms": list(run.objective.loss_weights.names),
            "held_out": job.held_out.record(),
            "trajectory": [list(run.objective.loss_weights.as_dict().values())],  # the start, then every epoch
        }
    run.cosine = CosineLog.for_trial(trial, job.steps_per_epoch)
    if runtime.compile:
        run.model.forward = compile_forward(run.model)
    result.layer_pairs = plan.used_pairs
    result.student_params = own_parameter_count(run.model)
    result.student_flops = plan.shape.flops_per_sequence(trial.max_length, num_labels)
    mapping_params = sum(p.numel() for p in run.objective.mapping.parameters()) if run.objective.mapping else 0
    learned = run.objective.learned_parameter_count()
    result.extra["projection_params"] = sum(p.numel() for p in run.objective.parameters()) - learned
    if run.objective.mapping is not None:
        result.extra["mapping_params"] = mapping_params
    result.extra["teacher_source"] = plan.teacher.source
    result.extra["steps_per_epoch"] = job.steps_per_epoch
    if run.objective.curriculum is not None:  # refuses a stage that would get no step
        result.extra[CURRICULUM_KEY] = run.objective.curriculum.summary(total_steps)
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
            check (`kdgrid.core.finite_guard`: the host reads that every `CHECK_EVERY_STEPS` steps, not every
            step); the student's state is then undefined.
    """
    assert run.objective is not None and run.capture is not None and run.optimizer is not None
    memo = shared_teacher_targets(targets) if targets is not None else contextlib.nullcontext()
    run.objective.set_progress(step - 1, job.steps_per_epoch * run.trial.epochs)
    with run.own_rng(job.runtime), memo:
        run.model.train()
        with job.runtime.autocast():
            own = student_input(job, run.trial, batch, TRAINING, step)  # masked distillation: the student side
            features = with_distill_logits(run.model, run.capture(own))
            values = run.objective.term_values(features, teacher, batch["labels"])
            total = run.objective.total(values)
        # No host sync per step: the guard is read every N steps and at the epoch's end.
        run.finite_guard.observe(values, total, step)
        if run.finite_guard.due(step):
            run.finite_guard.check(run.objective, step)
        scaler = run.scaler
        split = split_step(run, values)  # DOT's gradients, and the sampled cosine (kdgrid.core.grad_split)
        if run.objective.loss_weights is not None:  # LKD: the step's and the weights' gradients (kdgrid.core.lkd)
            lkd_step(run, job, values, step)
        elif split is None:
            (scaler.scale(total) if scaler is not None else total).backward()
        # A curriculum's layer stage: the layers outside it get no gradient (kdgrid.core.layer_curriculum).
        drop_frozen_gradients(run.model.named_parameters(), run.objective.trainable_layers())
        max_norm = run.trial.option("max_grad_norm")
        if max_norm:
            if scaler is not None:
                scaler.unscale_(run.optimizer)  # clip the true gradients, not the scaled ones
            torch.nn.utils.clip_grad_norm_(
                [p for g in run.optimizer.param_groups for p in g["params"]], float(max_norm)
            )
        # A scaler skips the step when a gradient is inf/NaN; the schedule then waits for the next real step.
        scaled_step(run.optimizer, run.scheduler, scaler)
        run.optimizer.zero_grad(set_to_none=True)
    for name, value in values.items():
        detached = value.detach().float()
        run.sums[name] = run.sums[name] + detached if name in run.sums else detached
    run.steps_in_epoch += 1


def lkd_step(run: StudentRun, job: LoadedJob, values: dict[str, torch.Tensor], step: int) -> None:
    """LKD's gradients for this step: the weighted terms' on the student and its projections, the first-order
    hypergradient on the loss weights from the job's held-out batch of this step (`kdgrid.core.lkd`)."""
    assert run.objective is not None and run.objective.loss_weights is not None and job.held_out is not None
    assert run.optimizer is not None
    phi = run.objective.loss_weights.phi
    pairs = [(p, group["lr"]) for group in run.optimizer.param_groups for p in group["params"] if p is not phi]
    batch = job.runtime.to_device(job.held_out.batch(step, run.trial.batch_size))
    capture = run.capture
    assert capture is not None

    def held_out_logits(model: torch.nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        # In the step's precision; the student's hooks (Q/K/V, a dual head's classifier input) keep nothing of
        # this pass, so its activations and graph are freed once the hypergradient is taken.
        with job.runtime.autocast(), capture.suspended(), classifier_input_suspended(model):
            return model(**{k: v for k, v in b.items() if k != "labels"}).logits

    loss = validation_loss_fn(run.model, batch, job.task.is_regression, held_out_logits)
    lkd_gradients(
        values,
        run.objective.weights(),
        run.objective.loss_weights,
        [p for p, _ in pairs],
        [float(lr) for _, lr in pairs],
        loss,
    )


def split_step(run: StudentRun, values: dict[str, torch.Tensor]) -> list[torch.Tensor | None] | None:
    """Take the step's task and distillation gradients apart where the trial needs them: every step under DOT
    (handed to the optimizer, which then needs no backward pass: returns the task gradients), and the sampled
    batches of the logged cosine (recorded; the graph is kept for the usual backward pass: returns None)."""
    assert run.objective is not None and run.optimizer is not None
    dot = isinstance(run.optimizer, DOT)
    sampled = run.cosine is not None and run.steps_in_epoch in run.cosine.batches
    if not (dot or sampled):
        return None
    params = [p for group in run.optimizer.param_groups for p in group["params"]]
    task, distill = task_and_distillation(values, run.objective.weights())
    g_task, g_kd = split_gradients(task, distill, params, keep_graph=not dot)
    if sampled:
        assert run.cosine is not None
        own = {id(p) for p in run.model.parameters()}
        shared = [i for i, p in enumerate(params) if id(p) in own]
        run.cosine.values.append(gradient_cosine([g_task[i] for i in shared], [g_kd[i] for i in shared]))
    if not dot:
        return None
    assert isinstance(run.optimizer, DOT)
    run.optimizer.set_gradients(params, g_task, g_kd)
    return g_task


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
    if run.cosine is not None:
        run.cosine.close_epoch(run.result.extra)
    if run.objective.loss_weights is not None:  # LKD's weights after each epoch
        run.result.extra[LKD_KEY]["trajectory"].append(list(run.objective.loss_weights.as_dict().values()))
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
    if run.epochs_done == run.trial.epochs and run.plan is not None:
        projected = [term.name for term in run.plan.terms if term.projected]
        verdict = projector_overfit(result.curve, projected, job.task.dev_sets[0], job.task.primary_metric)
        if verdict is not None:
            result.extra[OVERFIT_KEY] = verdict
    if checkpoint_dir is not None and run.epochs_done < run.trial.epochs:
        save_checkpoint(checkpoint_dir, run.trial.trial_id, run.checkpoint_state())


def finish_student(
    run: StudentRun,
    on_result: Callable[[TrialResult], None] | None,
    checkpoint_dir: Path | None,
    on_model: Callable[[Trial, Any], None] | None = None,
) -> None:
    """Close a student (done or failed): measure a done student's latency, hand its model to ``on_model``, free
    its memory, add the teacher's facts and predictions, report the result to ``on_result`` and drop a done trial's checkpoint."""
    run.finished = True
    if run.result.status == "done" and run.model is not None and run.after_training is not None:
        try:
            run.result.extra.update(run.after_training(run.model))
        except Exception as error:
            mark_failed(run.result, error, failed_in="ReAugKD: knowledge base, saved student or retrieval")
    if run.result.status == "done" and run.model is not None:
        run.result.extra["latency_ms"] = measure_latency_ms(run.model, run.trial.max_length)
        # Who else used the device while it was measured (`kdgrid.device_sharing`): tables compare like with like.
        run.result.extra["latency_sharing"] = current_sharing()
        if on_model is not None:
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
    if on_result is not None:
        on_result(run.result)
    if run.result.status == "done":
        remove_checkpoint(checkpoint_dir, run.trial.trial_id)
