"""Batched students: N students of one architecture as one vmapped computation vs N separate steps: beyond
the lower bound of one teacher pass plus each student's own step.

    .venv/bin/python benchmarks/batched_students.py [--quick | --smoke] [--json PATH] [--threads N] [--device D]

A group of N students of one shape (bert-tiny 2 x 128, 2 heads; bert-mini 4 x 256, 4 heads; random init, one seed
each) trains against fixed, precomputed teacher features of the MiniLM shape (random tensors: hidden states
``[B, L, 384]`` for the embeddings and 6 layers, pre-softmax scores ``[B, 12, L, L]`` per layer, logits
``[B, 2]``), batch 32 x 64 tokens with some padding, the same batch every step. Two objectives, as in
`vs_textbrewer`: ``hidden`` = soft labels + hidden_mse through a linear projection on Last-1, and ``attention``
= soft labels + attention_ce_mean on Last-1 (alpha 0.1, beta 1, T 1); AdamW (fused, kdgrid's weight-decay groups)
with kdgrid's linear schedule. One step of all N students is timed two ways, each in its own subprocess (so each
peak RSS is its own):

- ``sequential``: the core's own `kdgrid.core.training.train.train_step` once per student (its forward through
  `FeatureCapture`, `Objective`, backward, fused AdamW step, scheduler): what a grouped job does today;
- ``batched``: the N students' parameters (model and projections) stacked along a new leading dimension (what
  `torch.func.stack_module_state` builds; here filled one student at a time so the N separate models never
  coexist with the stack), the HF forward + objective run once through `torch.func.functional_call` under
  `torch.vmap` (``randomness="different"``: each student its own dropout masks), the N losses summed, one
  backward, one fused AdamW over the stacked tensors.

AdamW is elementwise, so one AdamW over ``[N, ...]`` tensors is N independent AdamWs, and the gradient of the
summed loss with respect to student i's slice is student i's own gradient. The ``check`` worker verifies both,
with dropout off (p = 0): the vmapped HF forward equals each model's own forward, the losses and gradients agree,
and two optimizer steps of the batched group leave the same weights as two core steps per student.

Times are the mean over steps 2..S of one step of the whole group (step 1 is a warm-up). ``--device cuda``
runs both modes on the GPU under the core's autocast (``KDGRID_AMP``, bf16 by default; the check stays fp32),
synchronising before each clock read, and adds each mode's peak allocated CUDA memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _common import emit, machine, mean_step, memory_figures, run_worker, write_json
from torch import nn

CONFIGS = {"hidden": "hidden_mse", "attention": "attention_ce_mean"}
MODES = ("sequential", "batched")
TEACHER_LAYERS, TEACHER_WIDTH, TEACHER_HEADS = 6, 384, 12  # all-MiniLM-L6-v2
LR, WEIGHT_DECAY, WARMUP = 1e-4, 0.01, 0.1
CHECK_TOLERANCE = 1e-5


# ------------------------------------------------------------------------------------------------ the setting


def make_trial(student: str, config: str, seed: int) -> Any:
    """The trial whose objective every student of the group trains on (only its loss fields are read here)."""
    from kdgrid.trial import Trial

    return Trial(
        task="polarity",
        teacher="minilm-l6",
        student=student,
        init="random",
        knowledge=(CONFIGS[config],),
        strategy="Last-1",
        beta=1.0,
        alpha=0.1,
        temperature=1.0,
        lr=LR,
        weight_decay=WEIGHT_DECAY,
        warmup_ratio=WARMUP,
        seed=seed,
    )


def fixed_inputs(
    batch_size: int, length: int, device: torch.device, seed: int = 1
) -> tuple[dict[str, torch.Tensor], Any]:
    """One batch (``input_ids`` / ``attention_mask`` / ``token_type_ids`` ``[B, L]``, ``labels`` ``[B]``) and the
    teacher `Features` a MiniLM would give for it: random tensors of the right shapes, lengths between L/2 and L
    (the first example full length), pre-softmax scores with the padding bias on padded key columns. Drawn on
    the CPU (the same numbers on any device), then moved to ``device``."""
    from kdgrid.core.model.capture import PAD_BIAS, Features

    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 2, length + 1, (batch_size,), generator=gen)
    lengths[0] = length
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    ids = torch.randint(1000, 30000, (batch_size, length), generator=gen) * mask
    batch = {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": torch.zeros_like(ids),
        "labels": torch.randint(0, 2, (batch_size,), generator=gen),
    }
    bias = (1.0 - mask[:, None, None, :].float()) * PAD_BIAS
    batch = {k: v.to(device) for k, v in batch.items()}
    teacher = Features(
        logits=torch.randn(batch_size, 2, generator=gen).to(device),
        mask=batch["attention_mask"],
        heads=TEACHER_HEADS,
        hidden=[
            torch.randn(batch_size, length, TEACHER_WIDTH, generator=gen).to(device)
            for _ in range(TEACHER_LAYERS + 1)
        ],
        scores=[None]
        + [
            (torch.randn(batch_size, TEACHER_HEADS, length, length, generator=gen) + bias).to(device)
            for _ in range(TEACHER_LAYERS)
        ],
    )
    return batch, teacher


class StudentObjective(nn.Module):
    """One student and its objective (projections included) as one module, so `functional_call` can swap in any
    student's parameters: ``forward(batch, teacher) -> (total, {term: value})``, all 0-dim."""

    def __init__(
        self, trial: Any, seed: int, dropout: bool = True, device: torch.device | None = None
    ) -> None:
        super().__init__()
        from transformers import BertForSequenceClassification

        from kdgrid.core.model.capture import FeatureCapture
        from kdgrid.core.model.models import bert_config
        from kdgrid.core.model.shapes import StudentShape, student_shape
        from kdgrid.core.training.objective import Objective, knowledge_terms, teacher_needs

        shape = student_shape(trial.student)
        teacher = StudentShape(TEACHER_LAYERS, TEACHER_WIDTH, TEACHER_HEADS, 4 * TEACHER_WIDTH)
        terms = knowledge_terms(trial, [(shape.layers, TEACHER_LAYERS)], shape, teacher)
        config = bert_config(shape, 2)
        if not dropout:
            config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
        # The core's seeding (`setup_student`): the model from the seed, the projections from seed + 1.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = BertForSequenceClassification(config)
            torch.manual_seed(seed + 1)
            self.objective = Objective(trial, terms, shape, teacher, regression=False)
        self.to(device or torch.device("cpu"))
        self.capture = FeatureCapture(self.model, teacher_needs(terms, self.objective.specs))

    def forward(
        self, batch: dict[str, torch.Tensor], teacher: Any
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        values = self.objective.term_values(self.capture(batch), teacher, batch["labels"])
        return self.objective.total(values), values


# ------------------------------------------------------------------------------------------------- sequential


def sequential_runs(
    trial: Any, n: int, total_steps: int, runtime: Any, dropout: bool = True
) -> tuple[list[Any], Any]:
    """N `StudentRun`s set up like the core's `setup_student` (seeds 0..N-1; same optimizer, scheduler and RNG
    stream rules) and the minimal `LoadedJob` that `train_step` reads; ``runtime`` is a `kdgrid.core.training.train.Runtime`
    (device and autocast)."""
    from dataclasses import replace

    from kdgrid.core.job.loaded_job import LoadedJob
    from kdgrid.core.optim import build_optimizer
    from kdgrid.core.training.train import StudentRun
    from kdgrid.result import TrialResult

    runs = []
    for seed in range(n):
        student = StudentObjective(replace(trial, seed=seed), seed, dropout, runtime.device)
        run = StudentRun(plan=None, result=TrialResult(trial=replace(trial, seed=seed), status="done"))
        run.model, run.objective, run.capture = student.model, student.objective, student.capture
        run.optimizer, run.scheduler = build_optimizer(
            [run.model, run.objective], LR, WEIGHT_DECAY, total_steps, WARMUP
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 2)
            run.cpu_rng = torch.get_rng_state()
        if runtime.device.type == "cuda":
            run.cuda_rng = torch.Generator(device=runtime.device).manual_seed(seed + 2).get_state()
        runs.append(run)
    job = LoadedJob(None, None, None, {}, runtime, total_steps)
    return runs, job


def sequential_step(
    runs: list[Any], job: Any, batch: dict[str, torch.Tensor], teacher: Any, step: int
) -> None:
    from kdgrid.core.training.train import train_step

    for run in runs:
        train_step(run, job, batch, teacher, step)


# ---------------------------------------------------------------------------------------------------- batched


def stack_parameters(build: Callable[[int], nn.Module], n: int) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """``{name: [N, *shape]}`` leaf tensors (requires_grad) holding the parameters of ``build(0..N-1)``, the
    layout of `torch.func.stack_module_state`, filled one module at a time so that the N modules never exist
    alongside the stack. Returns the first module (the template `functional_call` runs) and the stack."""
    template = build(0)
    stacked = {
        name: torch.empty((n, *p.shape), dtype=p.dtype, device=p.device)
        for name, p in template.named_parameters()
    }
    for index in range(n):
        module = template if index == 0 else build(index)
        with torch.no_grad():
            for name, param in module.named_parameters():
                stacked[name][index].copy_(param)
    return template, {name: t.requires_grad_() for name, t in stacked.items()}


class BatchedGroup:
    """N students of one architecture and objective trained as one computation.

    ``params`` are ``[N, ...]`` leaves; `step` runs the template's forward + objective under `torch.vmap` over
    them (``randomness="different"``), sums the N totals, back-propagates once and takes one fused AdamW step
    (kdgrid's decay groups, decided on the template's unstacked names and shapes) and one scheduler step. The
    forward and objective run under ``runtime``'s autocast (bf16 on CUDA, none on the CPU), as in the core.
    """

    def __init__(
        self, template: nn.Module, params: dict[str, torch.Tensor], total_steps: int, runtime: Any
    ) -> None:
        from kdgrid.core.optim import linear_schedule

        self.runtime = runtime
        self.template = template
        self.params = params
        shapes = dict(template.named_parameters())
        decay, no_decay = [], []
        for name, stacked in params.items():
            plain = name.endswith("bias") or "LayerNorm" in name or shapes[name].ndim < 2
            (no_decay if plain else decay).append(stacked)
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
            lr=LR,
            fused=True,
        )
        self.scheduler = linear_schedule(self.optimizer, total_steps, WARMUP)
        self.sums: dict[str, torch.Tensor] = {}

    @property
    def size(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def losses(
        self, batch: dict[str, torch.Tensor], teacher: Any
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Every student's total ``[N]`` and unweighted terms ``{term: [N]}`` (batch and teacher are shared)."""

        def one(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            return torch.func.functional_call(self.template, params, (batch, teacher))

        return torch.vmap(one, randomness="different")(self.params)

    def step(self, batch: dict[str, torch.Tensor], teacher: Any) -> None:
        self.template.train()
        with self.runtime.autocast():
            totals, values = self.losses(batch, teacher)
        if not bool(torch.isfinite(totals).all()):
            raise FloatingPointError(
                f"non-finite loss for student(s) {torch.nonzero(~torch.isfinite(totals))}"
            )
        totals.sum().backward()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        for name, value in values.items():  # the core's per-term bookkeeping, for all N at once
            self.sums[name] = self.sums[name] + value.detach() if name in self.sums else value.detach()


def batched_group(trial: Any, n: int, total_steps: int, runtime: Any, dropout: bool = True) -> BatchedGroup:
    from dataclasses import replace

    template, params = stack_parameters(
        lambda seed: StudentObjective(replace(trial, seed=seed), seed, dropout, runtime.device), n
    )
    return BatchedGroup(template, params, total_steps, runtime)


# ---------------------------------------------------------------------------------------------------- workers


def worker_time(args: argparse.Namespace) -> dict[str, Any]:
    """Time ``args.steps`` steps of the whole group in one mode; seconds per group step."""
    from kdgrid.core.training.train import make_runtime

    runtime = make_runtime(args.device)
    trial = make_trial(args.student, args.config, 0)
    batch, teacher = fixed_inputs(args.batch_size, args.length, runtime.device)
    times = []
    if args.worker == "sequential":
        runs, job = sequential_runs(trial, args.n, args.steps, runtime)
        for step in range(1, args.steps + 1):
            started = _clock(runtime.device)
            sequential_step(runs, job, batch, teacher, step)
            times.append(_clock(runtime.device) - started)
    else:
        group = batched_group(trial, args.n, args.steps, runtime)
        for _ in range(args.steps):
            started = _clock(runtime.device)
            group.step(batch, teacher)
            times.append(_clock(runtime.device) - started)
    return {"step_s": mean_step(times), "step_times_s": [round(t, 4) for t in times]}


def _clock(device: torch.device) -> float:
    """``time.perf_counter()`` once the device has finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach() - b.detach()).abs().max())


class _FeatureProbe(nn.Module):
    """A student's model and objective (shared, not copied) whose forward returns the features the check
    compares: logits ``[B, C]``, hidden state and scores of one layer."""

    def __init__(self, student: StudentObjective, needs: frozenset[str]) -> None:
        super().__init__()
        from kdgrid.core.model.capture import FeatureCapture

        self.model, self.objective = student.model, student.objective
        self.capture = FeatureCapture(self.model, needs)

    def forward(self, batch: dict[str, torch.Tensor], layer: int) -> tuple[torch.Tensor, ...]:
        features = self.capture(batch)
        return features.logits, features.hidden[layer], features.layer_feature("scores", layer)


def check_config(
    student: str, config: str, n: int, batch_size: int, length: int, device: torch.device
) -> dict[str, Any]:
    """Batched vs sequential on the same weights, dropout off, fp32 (no autocast): forward, losses, gradients,
    two AdamW steps."""
    from kdgrid.core.model.capture import FeatureCapture
    from kdgrid.core.training.train import Runtime

    runtime = Runtime(device=device, amp_dtype=None, compile=False, checkpoint_width=1 << 30)
    trial = make_trial(student, config, 0)
    batch, teacher = fixed_inputs(batch_size, length, device)
    steps = 2
    runs, job = sequential_runs(trial, n, steps, runtime, dropout=False)
    group = batched_group(trial, n, steps, runtime, dropout=False)
    names = list(group.params)
    students = [StudentObjective(make_trial(student, config, i), i, False, device) for i in range(n)]
    reference, _ = torch.func.stack_module_state(students)
    out: dict[str, Any] = {
        "student": student,
        "config": config,
        "n": n,
        "stack_equals_stack_module_state": all(torch.equal(reference[k], group.params[k]) for k in names),
    }

    # 1. The vmapped HF forward (features the objective reads) equals each model's own forward.
    needs = frozenset({"logits", "hidden", "scores"})
    template = group.template
    probe = _FeatureProbe(template, needs)  # the template's modules, so the stacked names fit
    last = template.model.config.num_hidden_layers
    probe.eval()
    with torch.no_grad():
        stacked = torch.vmap(lambda params: torch.func.functional_call(probe, params, (batch, last)))(
            group.params
        )
    probe.capture.remove()
    forward = 0.0
    for i, run in enumerate(runs):
        run.model.eval()
        own = FeatureCapture(run.model, needs)
        with torch.no_grad():
            f = own(batch)
        own.remove()
        for got, want in zip(stacked, (f.logits, f.hidden[last], f.scores[last]), strict=True):
            forward = max(forward, _max_diff(got[i], want))
    out["forward_max_abs_diff"] = forward

    # 2. Losses and gradients: d(sum of totals)/d(slice i) = student i's own gradient.
    template.train()
    totals, _ = group.losses(batch, teacher)
    totals.sum().backward()
    loss_diff, grad_diff = 0.0, 0.0
    for i, run in enumerate(runs):
        run.model.train()
        values = run.objective.term_values(run.capture(batch), teacher, batch["labels"])
        total = run.objective.total(values)
        total.backward()
        loss_diff = max(loss_diff, abs(float(total) - float(totals[i])))
        own = {f"model.{k}": p for k, p in run.model.named_parameters()}
        own.update({f"objective.{k}": p for k, p in run.objective.named_parameters()})
        for name in names:
            grad_diff = max(grad_diff, _max_diff(group.params[name].grad[i], own[name].grad))
        run.optimizer.zero_grad(set_to_none=True)
    group.optimizer.zero_grad(set_to_none=True)
    out["loss_max_abs_diff"] = loss_diff
    out["grad_max_abs_diff"] = grad_diff

    # 3. Two optimizer steps each way (the core's train_step per student vs one batched step).
    for step in range(1, steps + 1):
        sequential_step(runs, job, batch, teacher, step)
        group.step(batch, teacher)
    weight_diff, moved = 0.0, 0.0
    for i, run in enumerate(runs):
        own = {f"model.{k}": p for k, p in run.model.named_parameters()}
        own.update({f"objective.{k}": p for k, p in run.objective.named_parameters()})
        for name in names:
            weight_diff = max(weight_diff, _max_diff(group.params[name][i], own[name]))
            moved = max(moved, _max_diff(reference[name][i], own[name]))
    out["weights_max_abs_diff_after_2_steps"] = weight_diff
    out["largest_update"] = moved  # how far the weights moved: the diff is small against this
    out["ok"] = (
        max(forward, loss_diff, grad_diff, weight_diff) <= CHECK_TOLERANCE
        and out["stack_equals_stack_module_state"]
    )
    return out


def check_dropout_streams(student: str, batch_size: int, length: int, runtime: Any) -> bool:
    """With dropout on, two students of identical weights get different losses under the batched forward
    (``randomness="different"``: each draws its own masks, as each has its own RNG stream in the core)."""
    trial = make_trial(student, "hidden", 0)
    batch, teacher = fixed_inputs(batch_size, length, runtime.device)
    template, params = stack_parameters(lambda _: StudentObjective(trial, 0, True, runtime.device), 2)
    group = BatchedGroup(template, params, 1, runtime)
    template.train()
    with torch.no_grad():
        totals, _ = group.losses(batch, teacher)
    return bool(torch.equal(params["model.classifier.weight"][0], params["model.classifier.weight"][1])) and (
        float(totals[0]) != float(totals[1])
    )


def worker_check(args: argparse.Namespace) -> dict[str, Any]:
    from kdgrid.core.training.train import make_runtime

    runtime = make_runtime(args.device)
    checks = [
        check_config(student, config, n, args.batch_size, args.length, runtime.device)
        for student, n in args.check_groups
        for config in CONFIGS
    ]
    return {
        "checks": checks,
        "dropout_streams_differ": check_dropout_streams("bert-tiny", args.batch_size, args.length, runtime),
    }


def worker_all(args: argparse.Namespace) -> dict[str, Any]:
    """The smoke's one worker: the check, then every group x objective x mode timed one after the other in this
    process, ``{"check": ..., "times": {"student:n:config:mode": figures}}`` (a mode's peak RSS is the process's
    peak so far: the smoke shows that the code runs, it measures nothing)."""
    out: dict[str, Any] = {"check": worker_check(args), "times": {}}
    for student, n in args.groups:
        for config in args.configs.split(","):
            for mode in MODES:
                torch.manual_seed(0)  # as at the start of a worker of its own
                one = {"worker": mode, "student": student, "n": n, "config": config}
                job = argparse.Namespace(**{**vars(args), **one})
                out["times"][f"{student}:{n}:{config}:{mode}"] = {**worker_time(job), **memory_figures()}
    return out


def worker_main(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    workers = {"check": worker_check, "all": worker_all}
    result = workers.get(args.worker, worker_time)(args)
    result.update(memory_figures())
    emit(result)


# ----------------------------------------------------------------------------------------------------- parent


def parse_groups(text: str) -> list[tuple[str, int]]:
    """``"bert-tiny:10,bert-mini:2"`` -> ``[("bert-tiny", 10), ("bert-mini", 2)]``."""
    groups = []
    for item in text.split(","):
        student, _, n = item.strip().rpartition(":")
        if not student or not n.isdigit() or int(n) < 1:
            raise argparse.ArgumentTypeError(f"group {item!r}: write STUDENT:N, e.g. bert-tiny:10")
        groups.append((student, int(n)))
    return groups


def print_tables(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    config = report["config"]
    table = Table(
        title=f"batched students: one step of N students, batch {config['batch_size']} x {config['length']} "
        f"tokens, MiniLM-shaped teacher features, {config['steps']} steps (step 1 left out), "
        f"{config['threads']} torch thread(s), {config['device']}"
    )
    cuda = any("cuda_peak_allocated_mb" in row["batched"] for row in report["runs"])
    for column in (
        "student",
        "N",
        "objective",
        "sequential s/step",
        "batched s/step",
        "seq / batched",
        "ms / student seq",
        "ms / student batched",
        "peak RSS seq MiB",
        "peak RSS batched MiB",
        *(("peak CUDA seq MiB", "peak CUDA batched MiB") if cuda else ()),
    ):
        table.add_column(column, justify="right")
    for row in report["runs"]:
        seq, bat = row["sequential"], row["batched"]
        table.add_row(
            row["student"],
            str(row["n"]),
            row["config"],
            f"{seq['step_s']:.3f}",
            f"{bat['step_s']:.3f}",
            f"{row['sequential_over_batched']:.2f}x",
            f"{1000 * seq['step_s'] / row['n']:.1f}",
            f"{1000 * bat['step_s'] / row['n']:.1f}",
            f"{seq['peak_rss_mb']:.0f}",
            f"{bat['peak_rss_mb']:.0f}",
            *(
                (f"{seq['cuda_peak_allocated_mb']:.0f}", f"{bat['cuda_peak_allocated_mb']:.0f}")
                if cuda
                else ()
            ),
        )
    console = Console(width=170)
    console.print(table)
    checks = Table(title=f"correctness (dropout off, same initial weights; tolerance {CHECK_TOLERANCE:g})")
    for column in ("student", "N", "objective", "forward", "loss", "grad", "weights after 2 steps", "ok"):
        checks.add_column(column, justify="right")
    for check in report["check"]["checks"]:
        checks.add_row(
            check["student"],
            str(check["n"]),
            check["config"],
            f"{check['forward_max_abs_diff']:.1e}",
            f"{check['loss_max_abs_diff']:.1e}",
            f"{check['grad_max_abs_diff']:.1e}",
            f"{check['weights_max_abs_diff_after_2_steps']:.1e}",
            "yes" if check["ok"] else "NO",
        )
    console.print(checks)
    console.print(
        f"dropout: batched students draw different masks: {report['check']['dropout_streams_differ']}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="bert-tiny:4, 2 steps, check on 2 students")
    parser.add_argument(
        "--smoke", action="store_true", help="bert-tiny:2, batch 4 x 16 tokens, 2 steps (tests)"
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--groups",
        type=parse_groups,
        default=parse_groups("bert-tiny:2,bert-tiny:10,bert-tiny:50,bert-mini:2,bert-mini:10"),
        help="STUDENT:N,... (default bert-tiny:2,bert-tiny:10,bert-tiny:50,bert-mini:2,bert-mini:10)",
    )
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated: hidden,attention")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (0: torch default)")
    parser.add_argument(
        "--device", default="cpu", help="cpu | cuda | auto (CUDA: bf16 autocast as the core, KDGRID_AMP)"
    )
    parser.add_argument("--worker", choices=(*MODES, "check", "all"), help=argparse.SUPPRESS)
    parser.add_argument("--student", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--config", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.groups, args.steps, args.batch_size, args.length = [("bert-tiny", 2)], 2, 4, 16
    elif args.quick:
        args.groups, args.steps = [("bert-tiny", 4)], 2
    # The check: 3 bert-tiny and 2 bert-mini students; the quick and smoke runs check 2 bert-tiny.
    args.check_groups = (
        [("bert-tiny", 2)] if args.quick or args.smoke else [("bert-tiny", 3), ("bert-mini", 2)]
    )
    if args.worker:
        worker_main(args)
        return

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        parser.error(f"--configs: unknown {unknown}; allowed: {', '.join(CONFIGS)}")
    config = {k: getattr(args, k) for k in ("steps", "batch_size", "length", "threads", "device")}
    config["groups"] = [f"{s}:{n}" for s, n in args.groups]
    common = [
        "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--length", str(args.length),
        "--threads", str(args.threads), "--device", args.device,
    ]  # fmt: skip
    if args.smoke:
        common.append("--smoke")
    elif args.quick:
        common.append("--quick")
    report: dict[str, Any] = {"config": config, "machine": machine(), "runs": []}
    # Each measurement in its own process (its own peak RSS); the smoke, which measures nothing, runs all of
    # them in one worker process (one import of torch and transformers instead of five).
    config["one_worker"] = args.smoke
    if args.smoke:
        everything = run_worker(Path(__file__), ["--worker", "all", "--configs", ",".join(configs), *common])
        report["check"] = everything["check"]

        def timed(student: str, n: int, name: str, mode: str) -> dict[str, Any]:
            return everything["times"][f"{student}:{n}:{name}:{mode}"]

    else:
        report["check"] = run_worker(Path(__file__), ["--worker", "check", *common])

        def timed(student: str, n: int, name: str, mode: str) -> dict[str, Any]:
            return run_worker(
                Path(__file__),
                ["--worker", mode, "--student", student, "--n", str(n), "--config", name, *common],
            )

    for student, n in args.groups:
        for name in configs:
            row: dict[str, Any] = {"student": student, "n": n, "config": name}
            for mode in MODES:
                row[mode] = timed(student, n, name, mode)
            row["sequential_over_batched"] = row["sequential"]["step_s"] / row["batched"]["step_s"]
            report["runs"].append(row)
    report["sequential_over_batched"] = {
        f"{r['student']}:{r['n']}:{r['config']}": r["sequential_over_batched"] for r in report["runs"]
    }
    report["check_ok"] = all(c["ok"] for c in report["check"]["checks"])
    print_tables(report)
    write_json(args.json, report)
    if not args.json:
        print(json.dumps({"sequential_over_batched": report["sequential_over_batched"]}))


if __name__ == "__main__":
    main()
