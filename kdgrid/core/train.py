"""`run_job`: train a group of students against one teacher pass (docs/design.md, "The shared teacher pass").

A job is a list of trials sharing `kdgrid.trial.group_key` (task, teacher, seed, batch size, max length, epochs,
max_train_samples): they see the same batches in the same order, so the teacher runs once per batch, under
``torch.no_grad``, capturing the union of what the students' knowledge needs, and every student trains on it.

Each student owns its weights, projections, AdamW optimizer, linear warm-up/decay scheduler and RNG stream:
dropout draws from the global torch RNG, so each student's generator state is swapped in around its own step and
swapped out after. Evaluation draws nothing (eval mode). Hence the invariant the tests check: a trial trained in
a group of N gives exactly the same weights and metrics as the trial trained alone (CPU, deterministic mode).

A trial that fails (bad config, a NaN/inf loss, an exception in its step) is reported ``failed`` with the step,
loss term and layer pair where that applies; its group-mates go on. On CUDA the forward passes run under bf16
autocast (``KDGRID_AMP=fp16`` for fp16 with a gradient scaler, ``off`` for fp32); ``KDGRID_COMPILE=1`` compiles
each student (experimental); students of width >= ``KDGRID_CHECKPOINT_WIDTH`` (default 1024) use gradient
checkpointing (on any device).
Nothing CUDA-only runs on the CPU path.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from kdgrid.core.capture import FeatureCapture, Features
from kdgrid.core.checkpoint import load_checkpoint, remove_checkpoint, save_checkpoint
from kdgrid.core.models import (
    ATTENTION_BY_DEVICE,
    ATTENTION_IMPLEMENTATION,
    ResolvedTeacher,
    StudentShape,
    resolve_teacher,
    student_shape,
)
from kdgrid.core.objective import (
    DivergenceError,
    Objective,
    Term,
    captured_layers,
    knowledge_terms,
    teacher_needs,
)
from kdgrid.core.teacher_targets import shared_teacher_targets
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.result import TrialResult
from kdgrid.trial import GROUP_FIELDS, Trial, group_key

DEFAULT_AUTO_BATCHES = 10  # warm-up batches that calibrate "auto" knowledge weights
PROJECTIONS = ("linear", "mlp", "none")


# ------------------------------------------------------------------------------------------------ validation


@dataclass(frozen=True)
class TrialPlan:
    """A validated trial: its student shape, its teacher, matched layer pairs and knowledge terms."""

    trial: Trial
    shape: StudentShape
    teacher: ResolvedTeacher
    pairs: list[tuple[int, int]]
    terms: list[Term]

    @property
    def used_pairs(self) -> list[tuple[int, int]]:
        """The pairs some knowledge term was applied on, in the strategy's order."""
        used = {term.pair for term in self.terms if term.pair is not None}
        return [pair for pair in self.pairs if pair in used]


def _check_numbers(trial: Trial) -> None:
    def need(ok: bool, key: str, allowed: str) -> None:
        if not ok:
            raise ConfigError(f"{key}={getattr(trial, key)!r} is invalid; allowed: {allowed}")

    need(trial.lr > 0 and math.isfinite(trial.lr), "lr", "a positive number")
    need(trial.temperature > 0, "temperature", "a positive number")
    need(trial.alpha >= 0, "alpha", "a number >= 0")
    need(trial.soft_weight >= 0, "soft_weight", "a number >= 0")
    need(trial.batch_size >= 1, "batch_size", "an integer >= 1")
    need(trial.max_length >= 8, "max_length", "an integer >= 8")
    need(trial.epochs >= 1, "epochs", "an integer >= 1")
    need(0 <= trial.warmup_ratio < 1, "warmup_ratio", "a number in [0, 1)")
    need(trial.weight_decay >= 0, "weight_decay", "a number >= 0")
    need(trial.projection in PROJECTIONS, "projection", ", ".join(PROJECTIONS))
    need(trial.max_train_samples is None or trial.max_train_samples >= 1, "max_train_samples", "None or >= 1")
    if isinstance(trial.beta, str):
        need(trial.beta == "auto", "beta", "a number >= 0 or 'auto'")
    else:
        need(trial.beta >= 0, "beta", "a number >= 0 or 'auto'")  # inf is allowed: it diverges, visibly
    need(
        trial.soft_weight > 0 or trial.alpha > 0 or bool(trial.knowledge),
        "soft_weight",
        "> 0 unless alpha > 0",
    )


def plan_trial(trial: Trial, teacher: ResolvedTeacher | None = None) -> TrialPlan:
    """Validate one trial without loading weights or data; raises `ConfigError` / `KdgridError` naming the key."""
    from kdgrid.core.data import get_task
    from kdgrid.core.init import check_init
    from kdgrid.core.matching import canonical_strategy, layer_pairs

    _check_numbers(trial)
    get_task(trial.task)
    shape = student_shape(trial.student)
    teacher = teacher or resolve_teacher(trial.teacher, trial.task)
    check_init(trial, shape, teacher)
    terms: list[Term] = []
    pairs: list[tuple[int, int]] = []
    if trial.knowledge:
        if not trial.strategy:
            raise ConfigError(
                f"knowledge {list(trial.knowledge)} needs a strategy (e.g. First, Last, Dilatation)"
            )
        strategy = canonical_strategy(trial.strategy)
        try:
            pairs = [(int(s), int(t)) for s, t in layer_pairs(strategy, shape.layers, teacher.shape.layers)]
        except ConfigError:
            raise
        except (ValueError, IndexError) as error:
            raise ConfigError(f"strategy {strategy!r}: {error}") from None
        for s, t in pairs:
            if not (0 <= s <= shape.layers and 0 <= t <= teacher.shape.layers):
                raise ConfigError(
                    f"strategy {strategy!r} pairs student layer {s} with teacher layer {t}: out of range for a "
                    f"{shape.layers}-layer student and a {teacher.shape.layers}-layer teacher"
                )
        terms = knowledge_terms(trial, pairs, shape, teacher.shape)
    heads = trial.relation_heads
    if heads is not None and (heads < 1 or shape.width % heads or teacher.shape.width % heads):
        raise ConfigError(
            f"relation_heads={heads} must divide the student's width {shape.width} and the teacher's "
            f"{teacher.shape.width}"
        )
    return TrialPlan(trial, shape, teacher, pairs, terms)


def validate_trials(trials: list[Trial]) -> list[TrialPlan]:
    """Validate a whole job before anything trains: every trial (all problems in one `ConfigError`, each
    prefixed by the trial id) and the shared group key."""
    if not trials:
        raise ConfigError("a job needs at least one trial")
    keys = {group_key(t) for t in trials}
    if len(keys) > 1:
        raise ConfigError(
            f"the trials of one job must agree on {', '.join(GROUP_FIELDS)}; found {len(keys)} different groups"
        )
    teachers: dict[str, ResolvedTeacher] = {}
    plans: list[TrialPlan] = []
    problems: list[str] = []
    for trial in trials:
        try:
            if trial.teacher not in teachers:
                teachers[trial.teacher] = resolve_teacher(trial.teacher, trial.task)
            plans.append(plan_trial(trial, teachers[trial.teacher]))
        except KdgridError as error:
            problems.append(f"trial {trial.trial_id} ({trial.student}, {list(trial.knowledge)}): {error}")
    if problems:
        raise ConfigError("invalid trial(s):\n" + "\n".join(problems))
    return plans


# ------------------------------------------------------------------------------------------------- the device


@dataclass(frozen=True)
class Runtime:
    """Where and how the job computes."""

    device: torch.device
    amp_dtype: torch.dtype | None  # autocast dtype on CUDA; None = fp32
    compile: bool
    checkpoint_width: int

    @property
    def description(self) -> str:
        if self.device.type == "cuda":
            return f"{self.device} ({torch.cuda.get_device_name(self.device)})"
        return str(self.device)

    def place(self, model: Any) -> Any:
        """``model`` on this device, with the attention kernel that is fastest there (`ATTENTION_BY_DEVICE`)."""
        model.config._attn_implementation = ATTENTION_BY_DEVICE.get(
            self.device.type, ATTENTION_IMPLEMENTATION
        )
        return model.to(self.device)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)


def make_runtime(device: str) -> Runtime:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    amp = os.environ.get("KDGRID_AMP", "bf16").lower()
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp) if dev.type == "cuda" else None
    return Runtime(
        device=dev,
        amp_dtype=amp_dtype,
        compile=os.environ.get("KDGRID_COMPILE", "0") == "1",
        checkpoint_width=int(os.environ.get("KDGRID_CHECKPOINT_WIDTH", "1024")),
    )


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _to(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _primary(scores: dict[str, dict[str, float]], dev_set: str, metric: str) -> float:
    value = scores.get(dev_set, {}).get(metric, float("nan"))
    return -math.inf if math.isnan(value) else value


# ------------------------------------------------------------------------------------------------ one student


@dataclass
class StudentRun:
    """One trial's training state inside a job."""

    plan: TrialPlan | None  # None for a trial that failed before it could be planned
    result: TrialResult
    model: Any = None
    objective: Objective | None = None
    capture: FeatureCapture | None = None
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
    teacher_info: Callable[[], dict[str, Any]] | None = None  # the job's `_TeacherInfo`, added to the row

    @property
    def trial(self) -> Trial:
        return self.result.trial

    @property
    def active(self) -> bool:
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
            },
            "seconds": self.seconds,
        }

    def restore(self, state: dict[str, Any]) -> None:
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
            setattr(self.result, key, value)
        self.result.extra["resumed_from_epoch"] = self.epochs_done
        self.seconds = state["seconds"]


# ------------------------------------------------------------------------------------------------------ a job


@dataclass
class _Job:
    task: Any
    teacher: ResolvedTeacher
    teacher_model: Any
    tokenized: dict[str, Any]
    runtime: Runtime
    steps_per_epoch: int


def _failed(result: TrialResult, error: BaseException, **extra: Any) -> TrialResult:
    result.status = "failed"
    result.error_type = type(error).__name__
    result.error_message = str(error)
    result.traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    result.ended_at = _now()
    result.extra.update(extra)
    return result


def _setup_student(plan: TrialPlan, job: _Job, checkpoint_dir: Path | None) -> StudentRun:
    from kdgrid.core.init import build_student
    from kdgrid.core.optim import build_optimizer

    trial = plan.trial
    result = TrialResult(trial=trial, status="done", device=job.runtime.description, started_at=_now())
    run = StudentRun(plan=plan, result=result)
    num_labels = job.task.num_labels
    model, info = build_student(trial, plan.shape, num_labels, plan.teacher, job.teacher_model)
    result.extra.update(info)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(trial.seed + 1)  # projections: their own seeded draw, independent of the model's
        objective = Objective(trial, plan.terms, plan.shape, plan.teacher.shape, job.task.is_regression)
        torch.manual_seed(trial.seed + 2)  # the student's RNG stream for dropout
        run.cpu_rng = torch.get_rng_state()
    runtime = job.runtime
    if runtime.device.type == "cuda":
        gen = torch.Generator(device=runtime.device).manual_seed(trial.seed + 2)
        run.cuda_rng = gen.get_state()
    if plan.shape.width >= runtime.checkpoint_width:
        # Non-reentrant: the Q/K/V our hooks capture inside a checkpointed layer stay in the autograd graph, so
        # knowledge on them still trains the student (the reentrant variant would run them without gradients).
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        result.extra["gradient_checkpointing"] = True
    run.model = runtime.place(model)
    run.objective = objective.to(runtime.device)
    specs = run.objective.specs
    needs = teacher_needs(plan.terms, specs)
    run.capture = FeatureCapture(run.model, needs, captured_layers(plan.terms, 0, plan.shape.layers))
    total_steps = job.steps_per_epoch * trial.epochs
    run.optimizer, run.scheduler = build_optimizer(
        [run.model, run.objective], trial.lr, trial.weight_decay, total_steps, trial.warmup_ratio
    )
    if runtime.amp_dtype == torch.float16:
        run.scaler = torch.amp.GradScaler("cuda")
    if runtime.compile:
        run.model.forward = torch.compile(run.model.forward)
    result.layer_pairs = plan.used_pairs
    result.student_params = sum(p.numel() for p in run.model.parameters())
    result.student_flops = plan.shape.flops_per_sequence(trial.max_length, num_labels)
    result.extra["projection_params"] = sum(p.numel() for p in run.objective.parameters())
    result.extra["teacher_source"] = plan.teacher.source
    result.extra["steps_per_epoch"] = job.steps_per_epoch
    state = load_checkpoint(checkpoint_dir, trial.trial_id)
    if state is not None:
        run.restore(state)
    result.weights = run.objective.weights()
    return run


def teacher_capture_needs(runs: list[StudentRun]) -> tuple[frozenset[str], frozenset[int]]:
    """What the teacher pass must capture for these students: the union of their features, and of the teacher
    layers they are matched to (only those are kept while the students train)."""
    needs: set[str] = {"logits"}
    layers: set[int] = set()
    for run in runs:
        if run.capture is not None and run.plan is not None:
            needs |= run.capture.needs
            layers |= captured_layers(run.plan.terms, 1, run.plan.teacher.shape.layers)
    return frozenset(needs), frozenset(layers)


def _teacher_forward(job: _Job, capture: FeatureCapture, batch: dict[str, torch.Tensor]) -> Features:
    with torch.no_grad(), job.runtime.autocast():
        return capture(batch)


def _calibrate(
    runs: list[StudentRun],
    job: _Job,
    capture: FeatureCapture,
    seed: int,
    on_result: Callable[[TrialResult], None] | None = None,
) -> None:
    """Set the auto weights of every uncalibrated student on the first warm-up batches of epoch 1 (eval mode,
    no gradients, no random draws: calibration leaves the student exactly as it was)."""
    from kdgrid.core.data import train_batches

    pending = [
        r
        for r in runs
        if r.active and r.objective is not None and r.objective.auto and not r.objective.calibrated
    ]
    if not pending:
        return
    batches = train_batches(job.tokenized["train"], pending[0].trial.batch_size, seed, 0)
    counts = {r.trial.trial_id: int(r.trial.option("auto_batches", DEFAULT_AUTO_BATCHES)) for r in pending}
    n = min(max(counts.values()), len(batches))
    sums: dict[str, dict[str, float]] = {r.trial.trial_id: {} for r in pending}
    for index, batch in enumerate(batches[:n]):
        batch = _to(batch, job.runtime.device)
        teacher = _teacher_forward(job, capture, batch)
        with shared_teacher_targets():
            for run in pending:
                if index >= counts[run.trial.trial_id] or not run.active:
                    continue
                assert run.objective is not None and run.capture is not None
                run.model.eval()
                try:
                    with torch.no_grad(), job.runtime.autocast():
                        values = run.objective.term_values(run.capture(batch), teacher, batch["labels"])
                except Exception as error:
                    _failed(run.result, error, failed_in="auto-weight calibration")
                    _finish(run, on_result, None)
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


def _train_step(
    run: StudentRun, job: _Job, batch: dict[str, torch.Tensor], teacher: Features, step: int
) -> None:
    assert run.objective is not None and run.capture is not None and run.optimizer is not None
    with run.own_rng(job.runtime):
        run.model.train()
        with job.runtime.autocast():
            values = run.objective.term_values(run.capture(batch), teacher, batch["labels"])
            total = run.objective.total(values)
        run.objective.check_finite(values, total, step)
        if run.scaler is not None:
            run.scaler.scale(total).backward()
            run.scaler.step(run.optimizer)
            run.scaler.update()
        else:
            total.backward()
            max_norm = run.trial.option("max_grad_norm")
            if max_norm:
                torch.nn.utils.clip_grad_norm_(
                    [p for g in run.optimizer.param_groups for p in g["params"]], float(max_norm)
                )
            run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad(set_to_none=True)
    for name, value in values.items():
        detached = value.detach().float()
        run.sums[name] = run.sums[name] + detached if name in run.sums else detached
    run.steps_in_epoch += 1


def _end_epoch(run: StudentRun, job: _Job, epoch: int, checkpoint_dir: Path | None) -> None:
    from kdgrid.core.evaluate import evaluate

    assert run.objective is not None
    step = (epoch + 1) * job.steps_per_epoch
    for name, param in run.model.named_parameters():
        if not torch.isfinite(param).all():
            raise DivergenceError(step, f"parameters ({name})", None, float("nan"))
    loss_terms = {k: float(v) / max(1, run.steps_in_epoch) for k, v in run.sums.items()}
    run.sums, run.steps_in_epoch = {}, 0
    dev = {name: job.tokenized[name] for name in job.task.dev_sets}
    with job.runtime.autocast():
        scores = evaluate(run.model, job.task, dev, run.trial.batch_size, job.runtime.device)
    run.epochs_done = epoch + 1
    result = run.result
    result.curve.append({"epoch": epoch + 1, "scores": scores, "loss_terms": loss_terms})
    result.last_scores = scores
    result.loss_terms = loss_terms
    primary = _primary(scores, job.task.dev_sets[0], job.task.primary_metric)
    if result.best_epoch is None or primary > run.best_primary:
        run.best_primary, result.scores, result.best_epoch = primary, scores, epoch + 1
    if checkpoint_dir is not None and run.epochs_done < run.trial.epochs:
        save_checkpoint(checkpoint_dir, run.trial.trial_id, run.checkpoint_state())


def _finish(
    run: StudentRun,
    on_result: Callable[[TrialResult], None] | None,
    checkpoint_dir: Path | None,
    on_model: Callable[[Trial, Any], None] | None = None,
) -> None:
    run.finished = True
    if run.result.status == "done" and run.model is not None:
        run.result.extra["latency_ms"] = measure_latency_ms(run.model, run.trial.max_length)
        if on_model is not None:
            on_model(run.trial, run.model)
    run.result.ended_at = run.result.ended_at or _now()
    run.result.wall_time_s = round(run.seconds, 3)
    if run.capture is not None:
        run.capture.remove()
    run.model = run.optimizer = run.scheduler = run.objective = None  # free memory for the mates
    if run.teacher_info is not None:
        run.result.extra.update(run.teacher_info())
    if on_result is not None:
        on_result(run.result)
    if run.result.status == "done":
        remove_checkpoint(checkpoint_dir, run.trial.trial_id)


def _load_job(trial: Trial, runtime: Runtime) -> _Job:
    from kdgrid.core.data import get_task, tokenize_task, train_batches
    from kdgrid.core.models import load_teacher, load_tokenizer

    task = get_task(trial.task)
    teacher = resolve_teacher(trial.teacher, trial.task)
    teacher_model = runtime.place(load_teacher(teacher, task.num_labels))
    tokenizer = load_tokenizer(teacher)
    tokenized = tokenize_task(task, tokenizer, trial.max_length, max_train_samples=trial.max_train_samples)
    steps = len(train_batches(tokenized["train"], trial.batch_size, trial.seed, 0))
    return _Job(task, teacher, teacher_model, tokenized, runtime, steps)


class _TeacherInfo:
    """What every row records of its teacher: its parameter count and its own dev scores ``{dev_set: {metric:
    value}}`` (the tables show them beside the students').

    A teacher kdgrid fine-tuned brings its scores and cache key in ``teacher.json``; any other (a Hub teacher) is
    evaluated once per job, when the job's first trial finishes: after training, so the evaluation reuses memory
    training freed instead of adding to the job's peak. Evaluation draws no random number (the students' streams
    are untouched); if it fails, rows say why (``teacher_scores_error``) and the trained students are kept.
    """

    def __init__(self, job: _Job, batch_size: int) -> None:
        self._job = job
        self._batch_size = batch_size
        self._extra: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self._extra is None:
            self._extra = self._compute()
        return self._extra

    def _compute(self) -> dict[str, Any]:
        from kdgrid.core.evaluate import evaluate
        from kdgrid.core.teacher import TEACHER_INFO

        job = self._job
        extra: dict[str, Any] = {"teacher_params": sum(p.numel() for p in job.teacher_model.parameters())}
        path = Path(job.teacher.source) / TEACHER_INFO
        if job.teacher.is_local and path.is_file():
            import json

            info = json.loads(path.read_text())
            extra.update(teacher_scores=info.get("dev_scores"), teacher_key=info.get("key"))
            return extra
        dev_sets = {name: job.tokenized[name] for name in job.task.dev_sets}
        try:
            with torch.no_grad():
                extra["teacher_scores"] = evaluate(
                    job.teacher_model, job.task, dev_sets, self._batch_size, job.runtime.device
                )
        except Exception as error:
            extra["teacher_scores_error"] = f"{type(error).__name__}: {error}"
        return extra


LATENCY_REPEATS = 10


def measure_latency_ms(model: torch.nn.Module, sequence_length: int) -> float:
    """Median wall time (ms) of the model's forward pass on one sequence of ``sequence_length`` tokens, batch 1,
    eval mode, on the model's device: the paper's "latency" (Table 2), measured where the trial ran (so it is
    only comparable between trials run on the same kind of machine)."""
    import statistics

    device = next(model.parameters()).device
    ids = torch.full((1, sequence_length), 1000, dtype=torch.long, device=device)
    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
    }
    was_training = model.training
    model.eval()
    times = []
    with torch.no_grad():
        for repeat in range(LATENCY_REPEATS + 2):  # two warm-up passes
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            model(**inputs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if repeat >= 2:
                times.append((time.perf_counter() - started) * 1000)
    model.train(was_training)
    return round(statistics.median(times), 3)


def run_job(
    trials: list[Trial],
    *,
    checkpoint_dir: Path | None = None,
    device: str = "auto",
    on_result: Callable[[TrialResult], None] | None = None,
    on_model: Callable[[Trial, Any], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> list[TrialResult]:
    """Train every trial of a job (they must share `group_key`) against one teacher pass per batch.

    Returns one `TrialResult` per trial, in the order given; ``on_result`` is called as each finishes. A trial
    that cannot be set up or diverges is ``failed``; the others go on. A job-level failure (the teacher or the
    data cannot be loaded) fails every trial with that error. With ``checkpoint_dir``, each trial saves its state
    at the end of every epoch and a rerun continues from there (a finished trial's checkpoint is removed).
    ``on_model(trial, model)`` (optional, not needed by executors) receives each finished student's model, e.g.
    to save it or, in tests, to compare weights. ``on_step(done, total)`` (optional) is called after every
    shared batch with the job's batches done and its total (epochs x batches per epoch), for progress bars.
    """
    if not trials:
        return []
    keys = {group_key(t) for t in trials}
    if len(keys) > 1:
        raise ConfigError(f"the trials of one job must agree on {', '.join(GROUP_FIELDS)}")
    checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    runtime = make_runtime(device)
    first = trials[0]
    results: dict[int, TrialResult] = {}

    def fail_all(error: BaseException) -> list[TrialResult]:
        out = []
        for index, trial in enumerate(trials):
            if index in results:
                out.append(results[index])
                continue
            result = _failed(TrialResult(trial=trial, status="failed", started_at=_now()), error)
            result.device = runtime.description
            if on_result is not None:
                on_result(result)
            out.append(result)
        return out

    try:
        job = _load_job(first, runtime)
    except Exception as error:
        return fail_all(error)

    teacher_info = _TeacherInfo(job, first.batch_size)
    runs: list[StudentRun] = []
    for index, trial in enumerate(trials):
        try:
            plan = plan_trial(trial, job.teacher)
            run = _setup_student(plan, job, checkpoint_dir)
            run.teacher_info = teacher_info
            runs.append(run)
        except Exception as error:
            result = _failed(TrialResult(trial=trial, status="failed", started_at=_now()), error)
            result.device = runtime.description
            results[index] = result
            if on_result is not None:
                on_result(result)
            runs.append(StudentRun(plan=None, result=result, finished=True))

    teacher_capture = FeatureCapture(job.teacher_model, *teacher_capture_needs(runs))
    _calibrate(runs, job, teacher_capture, first.seed, on_result)
    from kdgrid.core.data import train_batches

    for epoch in range(first.epochs):
        for run in runs:
            if run.active and run.epochs_done >= first.epochs:
                _finish(run, on_result, checkpoint_dir, on_model)  # resumed after its last epoch's checkpoint
        active = [r for r in runs if r.active and r.epochs_done == epoch]
        if not active:
            continue
        teacher_capture.set_needs(*teacher_capture_needs(active))
        for step_in_epoch, batch in enumerate(
            train_batches(job.tokenized["train"], first.batch_size, first.seed, epoch)
        ):
            live = [r for r in active if r.active]
            if not live:
                break
            batch = _to(batch, runtime.device)
            started = time.perf_counter()
            teacher = _teacher_forward(job, teacher_capture, batch)
            share = (time.perf_counter() - started) / len(live)
            step = epoch * job.steps_per_epoch + step_in_epoch + 1
            with shared_teacher_targets():  # teacher-side loss targets: once per batch, not per student
                for run in live:
                    t0 = time.perf_counter()
                    try:
                        _train_step(run, job, batch, teacher, step)
                    except DivergenceError as error:
                        _failed(
                            run.result,
                            error,
                            diverged_at_step=error.step,
                            diverged_term=error.term,
                            diverged_pair=list(error.pair) if error.pair else None,
                        )
                        _finish(run, on_result, checkpoint_dir, on_model)
                    except Exception as error:
                        _failed(run.result, error, failed_at_step=step)
                        _finish(run, on_result, checkpoint_dir, on_model)
                    run.seconds += time.perf_counter() - t0 + share
            del teacher  # before the next batch's teacher pass, not after it: one set of features at a time
            if on_step is not None:
                on_step(step, first.epochs * job.steps_per_epoch)
        for run in active:
            if not run.active:
                continue
            t0 = time.perf_counter()
            try:
                _end_epoch(run, job, epoch, checkpoint_dir)
            except DivergenceError as error:
                _failed(run.result, error, diverged_at_step=error.step, diverged_term=error.term)
            except Exception as error:
                _failed(run.result, error, failed_at_epoch=epoch + 1)
            run.seconds += time.perf_counter() - t0
            if not run.active or run.epochs_done >= run.trial.epochs:
                _finish(run, on_result, checkpoint_dir, on_model)
    for run in runs:
        if run.active:  # every epoch was already done (resumed at the very end)
            _finish(run, on_result, checkpoint_dir, on_model)
    teacher_capture.remove()
    return [run.result for run in runs]
