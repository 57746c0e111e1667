"""`run_pretrain`: one pre-training or general-distillation run, data-parallel on torch.distributed.

Launched as one process (no process group), by ``torchrun``, or as SLURM tasks (`kdgrid.pretrain.processes`);
gloo on CPU, nccl on GPU, one GPU per process. The student (and the projections) are wrapped
in `DistributedDataParallel`; each process reads its slice of every global batch (`kdgrid.pretrain.data`) in
micro-batches, accumulating gradients (synchronised on the last one) until the recipe's global batch is reached;
then the gradients are clipped to norm ``max_grad_norm`` and AdamW steps. The forward passes run in the trials'
precision (`kdgrid.core.model.runtime.device_precision`: ``KDGRID_AMP``; by default bf16 autocast on a GPU with native
bf16, fp16 autocast with a gradient scaler on an older one, fp32 on the CPU), the losses in float32; with the
scaler, gradients are unscaled before clipping, and the learning-rate schedule advances only on the steps the
optimizer took (the scaler skips a step whose gradients overflowed). A process uses the GPU its SLURM task or
torchrun rank was given (`kdgrid.core.model.runtime.cuda_ordinal`: ``cuda:LOCAL_RANK`` where it sees the node's GPUs,
``cuda:0`` where it was bound to one).

Every ``checkpoint_every`` steps (and when ``stop_after`` steps of this run are done) process 0 writes a step
checkpoint (`kdgrid.pretrain.step_checkpoint`); a new run of the same recipe resumes from the newest one. A
``SIGUSR2`` or ``SIGTERM`` (a SLURM time limit or preemption, `kdgrid.pretrain.preemption`) stops the run at the
next step boundary that all processes agree on, with a step checkpoint; the outcome says which signal. Once
all steps are done, process 0 publishes the student's ``save_pretrained`` checkpoint and the tokenizer as the
recipe's artifact (`kdgrid.core.pretrained.artifacts.publish`) and removes the work folder. Every refusal (a global
batch the processes do not divide, a work folder of another recipe, a student the teacher cannot be matched to,
an empty corpus) happens before anything is written.

One run per recipe key at a time: process 0 holds the key's lock (`kdgrid.pretrain.claim`) while the run goes
on; a run that finds it held waits, then returns the artifact the other run made, or resumes from its step
checkpoint if it stopped early.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch.nn.parallel import DistributedDataParallel

from kdgrid.core.model.models import ATTENTION_BY_DEVICE
from kdgrid.core.model.runtime import FP32, Precision, autocast, cuda_ordinal, device_precision, set_attention
from kdgrid.core.model.shapes import VOCAB_SIZE, StudentShape, student_shape
from kdgrid.core.optim import build_optimizer, scaled_step
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.core.training.objective import Objective
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.pretrain import claim, step_checkpoint
from kdgrid.pretrain.corpus import PackedCorpus, load_tokenizer, packed_corpus
from kdgrid.pretrain.data import IGNORE_INDEX, BlockOrder, Masker, split_global_batch
from kdgrid.pretrain.loss import (
    DistillationPlan,
    PretrainModel,
    build_student,
    load_teacher,
    plan_distillation,
    teacher_capture,
    teacher_shape,
)
from kdgrid.pretrain.preemption import StopSignals
from kdgrid.pretrain.processes import process_place
from kdgrid.pretrain.run_settings import RunSettings

T = TypeVar("T")
MAX_GRAD_NORM = 1.0  # BERT's gradient clipping
HISTORY_KEPT = 10_000  # the outcome keeps the loss terms of this run's last steps only (a run may take 1M)


@dataclass
class RunOutcome:
    """What a run did: the artifact (``None`` until finished), the steps done, the mean loss terms (``mlm``
    and every knowledge term, unweighted) of each of this run's last `HISTORY_KEPT` steps, and the number of the
    signal that stopped it early with a checkpoint (``None``: it was not stopped by one)."""

    path: Path | None
    steps_done: int
    finished: bool
    history: list[dict[str, float]] = field(default_factory=list)
    stopped_by: int | None = None


@dataclass(frozen=True)
class _Processes:
    world_size: int
    rank: int
    local_rank: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def largest(self, value: int) -> int:
        """The largest ``value`` over the processes (a collective: every process calls it at the same point)."""
        if not self.distributed:
            return value
        tensor = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return int(tensor.item())

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def rank0_first(self, make: Callable[[], T]) -> T:
        """``make()`` on process 0, then on the others (a cache built once); process 0's `KdgridError` is
        raised on every process, so none waits forever for one that gave up."""
        failure: list[str | None] = [None]
        result: Any = None
        if self.rank == 0:
            try:
                result = make()
            except KdgridError as error:
                failure = [str(error)]
        if self.distributed:
            dist.broadcast_object_list(failure, src=0)
        if failure[0] is not None:
            raise ConfigError(failure[0])
        return result if self.rank == 0 else make()


def _processes(device: str) -> _Processes:
    place = process_place(os.environ)
    os.environ.update(place.environment)  # a SLURM task's place, as torch.distributed's env:// reads it
    world_size, rank, local_rank = place.world_size, place.rank, place.local_rank
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device {device!r}: use auto, cpu or cuda")
    if use_cuda and not torch.cuda.is_available():
        raise ConfigError("device 'cuda': this machine has no usable GPU")
    where = (
        torch.device("cuda", cuda_ordinal(local_rank, torch.cuda.device_count()))
        if use_cuda
        else torch.device("cpu")
    )
    if use_cuda:
        torch.cuda.set_device(where)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return _Processes(world_size, rank, local_rank, where)


def _step_seed(recipe: PretrainRecipe, step: int, rank: int) -> int:
    state = np.random.SeedSequence([recipe.seed, step, rank]).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 32 | int(state[1])


def optimizer_step(
    model: torch.nn.Module, optimizer: Any, scheduler: Any, scaler: torch.amp.GradScaler | None
) -> bool:
    """One optimizer step on the accumulated gradients: unscaled (with a scaler), clipped to `MAX_GRAD_NORM`,
    then stepped; the scheduler advances only if the optimizer did (a scaler skips the step when a gradient
    overflowed, and lowers its scale). Returns whether it stepped."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    stepped = scaled_step(optimizer, scheduler, scaler)
    optimizer.zero_grad(set_to_none=True)
    return stepped


def _progress_bar(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[tokens_per_s]:,.0f} tokens/s"),
        TextColumn("mlm {task.fields[mlm]:.3f}"),
        TimeRemainingColumn(),
        disable=not enabled,
    )


def run_pretrain(recipe: PretrainRecipe, settings: RunSettings | None = None) -> RunOutcome:
    """Run (or resume) ``recipe`` to its last step, or for ``settings.stop_after`` steps; see the module
    docstring. Returns the outcome (the artifact's folder once finished; at once if it already exists)."""
    settings = settings or RunSettings()
    if artifacts.exists(recipe):
        return RunOutcome(artifacts.artifact_dir(recipe), recipe.steps, True)
    processes = _processes(settings.device)
    try:
        checked = preflight(recipe, settings, processes.world_size)
        with _claimed(recipe, processes):
            if artifacts.exists(recipe):  # made by the run this one waited for
                return RunOutcome(artifacts.artifact_dir(recipe), recipe.steps, True)
            return _run(recipe, settings, processes, checked)
    finally:
        if processes.distributed and dist.is_initialized():
            dist.destroy_process_group()


@dataclass(frozen=True)
class Preflight:
    """What a run was checked against before anything loads: micro-batches per step on each process, the step
    checkpoints' folder, the two shapes and the distillation's plan (``None`` for plain pre-training)."""

    accumulation: int
    work: Path
    student: StudentShape
    teacher: StudentShape | None
    distillation: DistillationPlan | None


def preflight(recipe: PretrainRecipe, settings: RunSettings, world_size: int) -> Preflight:
    """Every refusal that needs no weights and no corpus: a global batch that ``world_size x micro_batch`` does
    not divide, a work folder of another recipe, a student the teacher cannot be matched to (the teacher's
    config.json only). `ConfigError`; nothing is written."""
    if settings.checkpoint_every < 1:
        raise ConfigError(f"checkpoint_every must be at least 1, got {settings.checkpoint_every}")
    if settings.stop_after is not None and settings.stop_after < 1:
        raise ConfigError(f"stop_after must be at least 1, got {settings.stop_after}")
    accumulation = split_global_batch(recipe.global_batch, world_size, settings.micro_batch)
    work = settings.work_dir or artifacts.work_dir(recipe)
    step_checkpoint.check_work_folder(work, recipe)
    student = student_shape(recipe.student)
    if recipe.teacher is None:
        return Preflight(accumulation, work, student, None, None)
    teacher = teacher_shape(recipe)
    return Preflight(accumulation, work, student, teacher, plan_distillation(recipe, student, teacher))


@contextlib.contextmanager
def _claimed(recipe: PretrainRecipe, processes: _Processes) -> Iterator[None]:
    """Process 0 holds the recipe key's lock (`kdgrid.pretrain.claim`) while the run goes on. While another run
    holds it, every process waits, trying again every `claim.POLL_S` seconds: each try is one short collective,
    so no collective waits for longer than that (a long barrier would time out)."""
    lock = claim.KeyLock(artifacts.lock_path(recipe)) if processes.rank == 0 else None
    told = False
    while not processes.largest(int(lock is not None and lock.try_acquire())):
        if lock is not None and not told:
            print(
                f"kdgrid: {recipe.objective} of {recipe.student} ({recipe.key}) is being made by another run "
                f"({lock.holder()}); waiting for it",
                file=sys.stderr,
                flush=True,
            )
            told = True
        time.sleep(claim.POLL_S)
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def _run(
    recipe: PretrainRecipe, settings: RunSettings, processes: _Processes, checked: Preflight
) -> RunOutcome:
    accumulation, work = checked.accumulation, checked.work
    terms = checked.distillation.terms if checked.distillation is not None else []
    tokenizer = load_tokenizer(recipe.tokenizer or "")
    corpus: PackedCorpus = processes.rank0_first(
        lambda: packed_corpus(recipe.corpus, tokenizer, recipe.block_length, recipe.max_documents)
    )

    if len(tokenizer) > VOCAB_SIZE:
        raise ConfigError(
            f"the tokenizer {recipe.tokenizer!r} has {len(tokenizer)} tokens; students here share BERT's "
            f"{VOCAB_SIZE}-token vocabulary"
        )
    torch.manual_seed(recipe.seed)
    student = build_student(recipe, vocab_size=VOCAB_SIZE)
    objective, teacher, capture = _distillation(recipe, checked)
    for network in (student, teacher):  # the attention kernel fastest on this device, as the core's runtime
        if network is not None:
            set_attention(network, ATTENTION_BY_DEVICE[processes.device.type])
    model = PretrainModel(student, objective, terms).to(processes.device)
    optimizer, scheduler = build_optimizer(
        [model], recipe.lr, recipe.weight_decay, recipe.steps, recipe.warmup_ratio
    )
    precision = device_precision(processes.device)
    scaler = torch.amp.GradScaler(processes.device.type) if precision.grad_scaling else None
    start = 0
    resumed = step_checkpoint.latest(work, recipe)
    if resumed is not None:
        start, state = resumed
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
    if teacher is not None:
        teacher.to(processes.device)
    wrapped = DistributedDataParallel(model) if processes.distributed else model
    steps = _Steps(
        recipe,
        wrapped,
        model,
        capture,
        corpus,
        BlockOrder(len(corpus), recipe.global_batch, recipe.seed),
        Masker(tokenizer, recipe.mlm_probability, recipe.seed),
        accumulation,
        processes,
        settings.micro_batch,
        precision,
        scaler,
    )
    end = recipe.steps if settings.stop_after is None else min(recipe.steps, start + settings.stop_after)
    history: deque[dict[str, float]] = deque(maxlen=HISTORY_KEPT)
    began = time.monotonic()
    stopped_by: int | None = None
    with StopSignals() as stop, _progress_bar(settings.progress and processes.rank == 0) as bar:
        task = bar.add_task(
            f"{recipe.objective} {recipe.student}",
            total=recipe.steps,
            completed=start,
            tokens_per_s=0.0,
            mlm=math.nan,
        )
        for step in range(start, end):
            torch.manual_seed(_step_seed(recipe, step, processes.rank))
            values = steps.run(step)
            optimizer_step(model, optimizer, scheduler, scaler)
            history.append(values)
            done = step + 1
            # Every process asks at every step boundary (0: no signal), so all stop after the same step.
            stopped_by = processes.largest(stop.received or 0) or None
            stopping = stopped_by is not None and done < recipe.steps
            if (
                processes.rank == 0
                and (done % settings.checkpoint_every == 0 or done == end or stopping)
                and done < recipe.steps
            ):
                step_checkpoint.save(
                    work,
                    recipe,
                    done,
                    _state(model, optimizer, scheduler, done, scaler),
                    processes.world_size,
                )
            elapsed = max(time.monotonic() - began, 1e-9)
            rate = (done - start) * recipe.global_batch * recipe.block_length / elapsed
            bar.update(task, completed=done, tokens_per_s=rate, mlm=values["mlm"])
            if stopping:
                end = done
                break
        processes.barrier()
    finished = end == recipe.steps
    path = None
    if finished:
        if processes.rank == 0:
            path = artifacts.publish(
                recipe, lambda folder: _save(student, tokenizer, folder), end, world_size=processes.world_size
            )
            shutil.rmtree(work, ignore_errors=True)
        processes.barrier()
        path = artifacts.artifact_dir(recipe)
    return RunOutcome(path, end, finished, list(history), None if finished else stopped_by)


def _distillation(
    recipe: PretrainRecipe, checked: Preflight
) -> tuple[Objective | None, torch.nn.Module | None, Any]:
    """The objective (with its projections), the teacher and the teacher's hooks; ``None``s to pre-train."""
    plan, teacher_dims = checked.distillation, checked.teacher
    if plan is None or teacher_dims is None:
        return None, None, None
    objective = Objective(plan.trial, plan.terms, checked.student, teacher_dims, regression=False)
    with _quiet_transformers():
        model = load_teacher(recipe)
    return objective, model, teacher_capture(model, plan.terms, objective.specs)


def _micro_batches(total: int, size: int) -> Iterator[slice]:
    for start in range(0, total, size):
        yield slice(start, start + size)


@dataclass
class _Steps:
    """Everything one optimizer step reads; `run` does its forward and backward passes on this process."""

    recipe: PretrainRecipe
    wrapped: torch.nn.Module  # the model, or its DistributedDataParallel wrapper
    model: PretrainModel
    capture: Any  # the teacher's FeatureCapture, or None
    corpus: PackedCorpus
    order: BlockOrder
    masker: Masker
    accumulation: int
    processes: _Processes
    micro_batch: int
    precision: Precision = FP32
    scaler: torch.amp.GradScaler | None = None

    def run(self, step: int) -> dict[str, float]:
        """Accumulate the gradients of ``step``'s slice of the global batch; returns the step's mean loss terms
        over the global batch (the same on every process)."""
        recipe, processes = self.recipe, self.processes
        samples = self.order.samples(step, processes.rank, processes.world_size)
        input_ids, labels = self.masker(np.asarray(self.corpus.blocks[self.order.blocks(samples)]), samples)
        input_ids, labels = input_ids.to(processes.device), labels.to(processes.device)
        masked = processes.all_sum((labels != IGNORE_INDEX).sum().to(torch.float64))
        sums = {"mlm": torch.zeros((), dtype=torch.float64, device=processes.device)}
        weights = self.model.objective.weights() if self.model.objective is not None else {}
        for index, part in enumerate(_micro_batches(len(samples), self.micro_batch)):
            last = index == self.accumulation - 1
            sync = contextlib.nullcontext() if last or not processes.distributed else self.wrapped.no_sync()
            with sync:
                teacher_features = None
                if self.capture is not None:
                    with torch.no_grad(), autocast(processes.device, self.precision):
                        batch = {
                            "input_ids": input_ids[part],
                            "attention_mask": torch.ones_like(input_ids[part]),
                        }
                        teacher_features = self.capture(batch)
                with autocast(processes.device, self.precision):
                    values = self.wrapped(input_ids[part], labels[part], teacher_features)
                # DDP averages gradients over processes: x world_size makes the MLM term a sum over the global
                # batch's masked tokens divided by their number.
                loss = recipe.mlm_weight * values.mlm_sum * (processes.world_size / masked.float())
                for name, value in values.knowledge.items():
                    loss = loss + weights[name] * value / self.accumulation
                _check_finite(loss, step, values)
                (loss if self.scaler is None else self.scaler.scale(loss)).backward()
            sums["mlm"] += values.mlm_sum.detach().to(torch.float64)
            for name, value in values.knowledge.items():
                share = value.detach().to(torch.float64) / (self.accumulation * processes.world_size)
                sums[name] = sums.get(name, torch.zeros_like(sums["mlm"])) + share
        names = list(sums)
        reduced = processes.all_sum(torch.stack([sums[name] for name in names]))
        means = dict(zip(names, reduced.tolist(), strict=True))
        means["mlm"] /= float(masked)
        return means


def _check_finite(loss: torch.Tensor, step: int, values: Any) -> None:
    if torch.isfinite(loss):
        return
    terms = {"mlm_sum": values.mlm_sum, **values.knowledge}
    bad = [name for name, value in terms.items() if not torch.isfinite(value)]
    raise FloatingPointError(f"diverged at step {step}: loss term(s) {bad or ['total']} are not finite")


def _state(
    model: PretrainModel,
    optimizer: Any,
    scheduler: Any,
    step: int,
    scaler: torch.amp.GradScaler | None = None,
) -> dict[str, Any]:
    return {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
    }


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No transformers progress bars (loading and writing weights) between the run's own progress lines."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.enable_progress_bar()


def _save(student: torch.nn.Module, tokenizer: Any, folder: Path) -> None:
    with _quiet_transformers():
        student.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
