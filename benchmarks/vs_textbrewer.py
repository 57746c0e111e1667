"""One trial through kdgrid vs the same trial through TextBrewer's GeneralDistiller.

    .venv/bin/pip install -c constraints.txt textbrewer      # benchmark-only dependency (the `bench` extra)
    .venv/bin/python benchmarks/vs_textbrewer.py [--quick | --smoke] [--json PATH]

Two trials, bert-tiny (random init, seed 0) from the offline MiniLM teacher on polarity, batch 32, max length 64,
beta 1, alpha 0.1, temperature 1, AdamW (fused, kdgrid's weight-decay groups) with kdgrid's linear warm-up/decay:

- ``hidden``: soft labels + hidden_mse with a linear projection on the Last-1 layer pairs;
- ``attention``: soft labels + attention_ce_mean on the Last-1 layer pairs.

Both frameworks get the same student (built by kdgrid, so the same initial weights and projection), the same
batches in the same order and the same number of steps. TextBrewer is wired the way its docs show for a Hugging
Face BERT: adaptors returning ``logits``, ``hidden`` (``hidden_states``), ``attention``, ``inputs_mask`` and the
model's own hard-label ``losses``. Both run the same models with HF's eager attention (kdgrid's choice on CPU;
TextBrewer needs it in the ``attention`` trial, to find the attention maps among the model's outputs; kdgrid
recomputes the scores of the matched layers from the captured Q and K). HF returns attention *probabilities*; TextBrewer's ``attention_ce_mean`` wants
pre-softmax scores, so its adaptor passes ``log(probs)``: per row that is the scores minus a constant, so the head
mean's softmax (what the loss uses) is the same. Before training, both compute the first batch's loss on the
same weights (eval mode); the table shows both and their difference.

Step time: the mean over steps 2..N (step 1 is a warm-up). Peak memory: each framework x trial runs in its own
subprocess; the ratio is of peak RSS (kdgrid / TextBrewer). Each framework x trial runs ``--repeats`` times
(default 3; 1 with ``--quick``), the two frameworks alternating which goes first, and the figures are the medians
(the JSON keeps every run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

from _common import (
    MINILM,
    NOT_MEANT_TO_BE_ACCURATE,
    bench_options,
    emit,
    machine,
    mean_step,
    memory_figures,
    run_worker,
    teacher_path,
    write_json,
)

CONFIGS = {"hidden": "hidden_mse", "attention": "attention_ce_mean"}
FRAMEWORKS = ("kdgrid", "textbrewer")


def make_trial(config: str, steps: int, batch_size: int, dev_samples: int | None = None) -> Any:
    """The trial of ``config``; with ``dev_samples``, both frameworks score only that many dev examples (the
    smoke: one batch; the core's ``max_dev_samples``, which also cuts kdgrid's one teacher evaluation)."""
    from kdgrid.trial import Trial

    return Trial(
        task="polarity",
        teacher=teacher_path(MINILM),
        student="bert-tiny",
        init="random",
        knowledge=(CONFIGS[config],),
        strategy="Last-1",
        beta=1.0,
        alpha=0.1,
        temperature=1.0,
        batch_size=batch_size,
        max_length=64,
        epochs=1,
        max_train_samples=batch_size * steps,
        seed=0,
        options=NOT_MEANT_TO_BE_ACCURATE if dev_samples is None else bench_options(dev_samples),
    )


def run_kdgrid(trial: Any) -> dict[str, Any]:
    from kdgrid.core.training.train import run_job

    stamps: list[float] = []
    results = run_job([trial], device="cpu", on_step=lambda done, total: stamps.append(time.perf_counter()))
    if results[0].status != "done":
        raise RuntimeError(f"kdgrid trial failed: {results[0].error_message}")
    return {"step_s": mean_step([0.0, *(b - a for a, b in itertools.pairwise(stamps))])}


def _first_batch_losses(job: Any, run: Any, distiller: Any, batch: dict, args: dict) -> dict[str, float]:
    """The first batch's weighted total loss by both frameworks, same weights, eval mode (no dropout)."""
    import torch
    from textbrewer.distiller_utils import post_adaptor

    from kdgrid.core.model.capture import FeatureCapture

    student, teacher = run.model, job.teacher_model
    student.eval()
    with torch.no_grad():
        results_t = post_adaptor(distiller.adaptor_T(batch, teacher(**batch, **args)))
        results_s = post_adaptor(distiller.adaptor_S(batch, student(**batch, **args)))
        textbrewer_total, _ = distiller.compute_loss(results_s, results_t)
        s_capture = FeatureCapture(student, run.capture.needs)
        t_capture = FeatureCapture(teacher, run.capture.needs)
        values = run.objective.term_values(s_capture(batch), t_capture(batch), batch["labels"])
        kdgrid_total = run.objective.total(values)
        s_capture.remove()
        t_capture.remove()
    student.train()
    return {"kdgrid": float(kdgrid_total), "textbrewer": float(textbrewer_total)}


def textbrewer_distiller(trial: Any, job: Any, run: Any, steps: int, out_dir: str) -> tuple[Any, dict]:
    """TextBrewer's `GeneralDistiller` for ``trial`` around kdgrid's student ``run.model`` (same initial
    projections), wired as TextBrewer's docs show for a Hugging Face BERT; returns it and the model arguments."""
    import torch
    from textbrewer import DistillationConfig, GeneralDistiller, TrainingConfig

    knowledge = trial.knowledge[0]
    pairs = run.plan.used_pairs
    widths = (run.plan.shape.width, run.plan.teacher.shape.width)
    if knowledge == "hidden_mse":
        matches = [
            {"layer_S": s, "layer_T": t, "feature": "hidden", "loss": "hidden_mse", "weight": trial.beta,
             "proj": ["linear", widths[0], widths[1], {}]}
            for s, t in pairs
        ]  # fmt: skip
        args = {"output_hidden_states": True}
    else:
        # HF's attentions tuple starts at transformer layer 1; kdgrid's layer numbers start at the embeddings (0).
        matches = [
            {"layer_S": s - 1, "layer_T": t - 1, "feature": "attention", "loss": "attention_ce_mean",
             "weight": trial.beta}
            for s, t in pairs
        ]  # fmt: skip
        args = {"output_attentions": True}

    def adaptor(batch: dict, outputs: Any) -> dict[str, Any]:
        out = {"logits": outputs.logits, "inputs_mask": batch["attention_mask"]}
        if outputs.loss is not None:
            out["losses"] = outputs.loss
        if outputs.hidden_states is not None:
            out["hidden"] = outputs.hidden_states
        if outputs.attentions is not None:
            tiny = torch.finfo(outputs.attentions[0].dtype).tiny
            out["attention"] = [a.clamp_min(tiny).log() for a in outputs.attentions]
        return out

    train_config = TrainingConfig(device="cpu", output_dir=out_dir, ckpt_steps=steps + 1, log_dir=None)
    distill_config = DistillationConfig(
        temperature=trial.temperature,
        kd_loss_type="ce",
        kd_loss_weight=trial.soft_weight,
        hard_label_weight=trial.alpha,
        intermediate_matches=matches,
    )
    distiller = GeneralDistiller(train_config, distill_config, job.teacher_model, run.model, adaptor, adaptor)
    for index, term in enumerate(t for t in run.plan.terms if t.projected):  # same initial projections
        source = run.objective.projections[term.name.replace("@", "_at_").replace("-", "_")].net
        distiller.projs[index].load_state_dict(source.state_dict())
    return distiller, args


def run_textbrewer(trial: Any, steps: int) -> dict[str, Any]:
    import torch

    from kdgrid.core.data import train_batches
    from kdgrid.core.optim import decay_groups, linear_schedule
    from kdgrid.core.training.train import load_job, make_runtime, set_up_trial, setup_student

    job = load_job(trial, make_runtime("cpu"))
    run = setup_student(set_up_trial(trial, job.teacher), job, None)  # kdgrid's student, projections and seed
    run.capture.remove()  # TextBrewer reads the model's outputs, not kdgrid's hooks
    batches = list(train_batches(job.tokenized["train"], trial.batch_size, trial.seed, 0))[:steps]
    with tempfile.TemporaryDirectory() as out_dir:
        distiller, args = textbrewer_distiller(trial, job, run, steps, out_dir)
        losses = _first_batch_losses(job, run, distiller, batches[0], args)
        optimizer = torch.optim.AdamW(decay_groups([run.model], trial.weight_decay), lr=trial.lr, fused=True)
        starts: list[float] = []
        step_fn = distiller.train_on_batch

        def timed(batch: dict, batch_args: dict) -> Any:
            starts.append(time.perf_counter())
            return step_fn(batch, batch_args)

        distiller.train_on_batch = timed
        distiller.train(
            optimizer,
            batches,
            num_steps=steps,
            scheduler_class=lambda optimizer: linear_schedule(optimizer, steps, trial.warmup_ratio),
            scheduler_args={},
            **args,
        )
        # A trial ends with its dev scores (kdgrid's run_job evaluates each epoch); a TextBrewer user evaluates in
        # its callback. Same evaluation here, so both peaks include it.
        from kdgrid.core.model.evaluate import evaluate_dev_sets

        evaluate_dev_sets(run.model, job.task, {n: job.tokenized[n] for n in job.task.dev_sets}, trial.batch_size)
    gaps = [b - a for a, b in itertools.pairwise(starts)]  # steps 1..N-1, each start to next start
    return {"step_s": mean_step(gaps), "first_batch_loss": losses}


def run_interleaved(trial: Any, steps: int) -> dict[str, Any]:
    """Both frameworks in one process, one step each in turn on the same batch: a slowdown of the machine hits
    both alike, so their ratio is steadier than between two processes run one after the other.

    kdgrid's step is what `run_job` does per batch (teacher pass through its capture, the shared teacher-target
    memo, `train_step`); TextBrewer's is its own training loop, which asks for the next batch once it has
    finished a step (forward, backward, optimizer and scheduler step): it is timed from `train_on_batch` to that
    request. Each framework trains its own copy of the same student; on odd steps kdgrid goes first, on even
    steps TextBrewer (whichever goes second finds the teacher's weights warm in the CPU caches)."""
    import torch

    from kdgrid.core.data import train_batches
    from kdgrid.core.model.capture import FeatureCapture
    from kdgrid.core.optim import decay_groups, linear_schedule
    from kdgrid.core.teacher.targets import TeacherTargets
    from kdgrid.core.training.train import (
        load_job,
        make_runtime,
        set_up_trial,
        setup_student,
        teacher_capture_needs,
        teacher_forward,
        train_step,
    )

    job = load_job(trial, make_runtime("cpu"))
    ours = setup_student(set_up_trial(trial, job.teacher), job, None)
    theirs = setup_student(set_up_trial(trial, job.teacher), job, None)  # the same seed: the same student
    theirs.capture.remove()
    capture = FeatureCapture(job.teacher_model, *teacher_capture_needs([ours]))
    batches = list(train_batches(job.tokenized["train"], trial.batch_size, trial.seed, 0))[:steps]
    kdgrid_times: dict[int, float] = {}
    textbrewer_times: dict[int, float] = {}
    textbrewer_started = [0.0]

    def kdgrid_step(step: int) -> None:
        started = time.perf_counter()
        batch = batches[step - 1]
        teacher = teacher_forward(job, capture, batch)
        train_step(ours, job, batch, teacher, step, TeacherTargets())  # the batch's teacher-side targets
        del teacher
        kdgrid_times[step] = time.perf_counter() - started

    def feed() -> Any:
        for step, batch in enumerate(batches, start=1):
            if step > 1:  # TextBrewer finished the previous step and asks for this batch
                textbrewer_times[step - 1] = time.perf_counter() - textbrewer_started[0]
                if (step - 1) % 2 == 0:
                    kdgrid_step(step - 1)
            if step % 2 == 1:
                kdgrid_step(step)
            yield batch

    with tempfile.TemporaryDirectory() as out_dir:
        distiller, args = textbrewer_distiller(trial, job, theirs, steps, out_dir)
        step_fn = distiller.train_on_batch

        def timed(batch: dict, batch_args: dict) -> Any:
            textbrewer_started[0] = time.perf_counter()
            return step_fn(batch, batch_args)

        distiller.train_on_batch = timed
        optimizer = torch.optim.AdamW(
            decay_groups([theirs.model], trial.weight_decay), lr=trial.lr, fused=True
        )
        distiller.train(
            optimizer,
            feed(),
            num_steps=steps,
            scheduler_class=lambda optimizer: linear_schedule(optimizer, steps, trial.warmup_ratio),
            scheduler_args={},
            **args,
        )
    # Step 1 of each is a warm-up; TextBrewer's last step is not closed by a request for another batch.
    timed_steps = sorted(set(kdgrid_times) & set(textbrewer_times))[1:]
    kdgrid_mean = sum(kdgrid_times[s] for s in timed_steps) / len(timed_steps)
    textbrewer_mean = sum(textbrewer_times[s] for s in timed_steps) / len(timed_steps)
    return {
        "kdgrid_step_s": kdgrid_mean,
        "textbrewer_step_s": textbrewer_mean,
        "time_ratio": kdgrid_mean / textbrewer_mean,
        "steps_timed": len(timed_steps),
    }


def worker_main(args: argparse.Namespace) -> None:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.worker == "all":  # the smoke's one worker: every (trial, worker) of `smoke_tasks` in this process
        emit({"results": [[name, worker, run_one(worker, name, args)] for name, worker in smoke_tasks()]})
    else:
        emit(run_one(args.worker, args.config, args))


def run_one(worker: str, config: str, args: argparse.Namespace) -> dict[str, Any]:
    """One worker's figures for trial ``config``, with this process's peak RSS so far."""
    import torch

    torch.manual_seed(0)  # the teacher's fresh classifier head: the same in every worker
    trial = make_trial(config, args.steps, args.batch_size, args.dev_samples)
    if worker == "interleaved":
        result = run_interleaved(trial, args.steps)
    elif worker == "kdgrid":
        result = run_kdgrid(trial)
    else:
        result = run_textbrewer(trial, args.steps)
    result.update(memory_figures())
    return result


def smoke_tasks() -> list[tuple[str, str]]:
    """What the smoke runs, in order: each trial alone in each framework, then interleaved."""
    return [(name, worker) for name in CONFIGS for worker in (*FRAMEWORKS, "interleaved")]


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    config = report["config"]
    table = Table(
        title=f"kdgrid vs TextBrewer: bert-tiny from MiniLM, {config['steps']} steps, batch {config['batch_size']}"
    )
    for column in ("trial", "framework", "s / step: alone / interleaved", "peak RSS MiB", "first-batch loss"):
        table.add_column(column, justify="right")
    for name in report["configs"]:
        figures = report[name]
        losses = figures["first_batch_loss"]
        for framework in FRAMEWORKS:
            row = figures[framework]
            table.add_row(
                name,
                framework,
                f"{row['step_s']:.4f} / {figures['interleaved'][f'{framework}_step_s']:.4f}",
                f"{row['peak_rss_mb']:.0f}",
                f"{losses[framework]:.6f}",
            )
        table.add_row(
            name,
            "kdgrid / TextBrewer",
            f"{figures['separate_time_ratio']:.2f}x / {figures['time_ratio']:.2f}x",
            f"{figures['memory_ratio']:.2f}x",
            f"diff {figures['loss_abs_diff']:.1e}",
        )
    table.add_row(
        "all", "kdgrid / TextBrewer", f"{report['time_ratio']:.2f}x", f"{report['memory_ratio']:.2f}x", ""
    )
    Console(width=160).print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="8 steps")
    parser.add_argument("--smoke", action="store_true", help="3 steps of batch 8 (tests)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per framework and trial, alternating order (median)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (0: torch default)")
    parser.add_argument("--worker", choices=(*FRAMEWORKS, "interleaved", "all"), help=argparse.SUPPRESS)
    parser.add_argument("--config", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--dev-samples", type=int, help=argparse.SUPPRESS)  # the smoke's: one dev batch
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.batch_size, args.repeats = 3, 8, 1
        # one dev batch, not the full dev set: MiniLM scoring 1,000 sentences was most of the smoke's time
        args.dev_samples = args.batch_size
    elif args.quick:
        args.steps, args.repeats = 8, 1
    if args.worker:
        worker_main(args)
        return
    config = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "dev_samples": args.dev_samples,
    }
    report: dict[str, Any] = {"config": config, "machine": machine(), "configs": list(CONFIGS)}
    common = [
        "--steps",
        str(args.steps),
        "--batch-size",
        str(args.batch_size),
        "--threads",
        str(args.threads),
    ]
    if args.dev_samples is not None:
        common += ["--dev-samples", str(args.dev_samples)]
    # Separate processes (``--repeats`` each, alternating which framework goes first; medians) give each
    # framework's own peak memory and step time; one interleaved process per trial gives the time ratio, steps of
    # both taken in turn, so a slowdown of the machine hits both alike. --quick runs two processes at a time.
    tasks = []
    for name in CONFIGS:
        for repeat in range(args.repeats):
            tasks += [(name, f) for f in (FRAMEWORKS if repeat % 2 == 0 else FRAMEWORKS[::-1])]
        tasks.append((name, "interleaved"))
    parallel = 2 if args.quick and args.threads == 1 and (os.cpu_count() or 1) >= 2 else 1
    config["processes_at_a_time"] = parallel

    def measure(task: tuple[str, str]) -> dict[str, Any]:
        name, worker = task
        return run_worker(Path(__file__), ["--worker", worker, "--config", name, *common])

    # The smoke measures nothing: it runs every task in one worker process (one import of torch, transformers
    # and TextBrewer instead of six), so its peak RSS figures are that process's peak so far.
    config["one_worker"] = args.smoke
    if args.smoke:
        got = run_worker(Path(__file__), ["--worker", "all", *common])["results"]
        results = [((name, worker), result) for name, worker, result in got]
    else:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            results = list(zip(tasks, pool.map(measure, tasks), strict=True))
    for name in CONFIGS:
        measured = {f: [r for (n, w), r in results if n == name and w == f] for f in FRAMEWORKS}
        interleaved = next(r for (n, w), r in results if n == name and w == "interleaved")
        runs = {
            framework: {
                "step_s": statistics.median(r["step_s"] for r in runs),
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                "step_s_runs": [r["step_s"] for r in runs],
                "peak_rss_mb_runs": [r["peak_rss_mb"] for r in runs],
            }
            for framework, runs in measured.items()
        }
        losses = measured["textbrewer"][0]["first_batch_loss"]
        report[name] = {
            **runs,
            "interleaved": interleaved,
            "first_batch_loss": losses,
            "loss_abs_diff": abs(losses["kdgrid"] - losses["textbrewer"]),
            "time_ratio": interleaved["time_ratio"],
            "separate_time_ratio": runs["kdgrid"]["step_s"] / runs["textbrewer"]["step_s"],
            "memory_ratio": runs["kdgrid"]["peak_rss_mb"] / runs["textbrewer"]["peak_rss_mb"],
        }
    # The headline ratios: the worse of the two trials (a target holds only if it holds for both).
    report["time_ratio"] = max(report[name]["time_ratio"] for name in CONFIGS)
    report["memory_ratio"] = max(report[name]["memory_ratio"] for name in CONFIGS)
    print_table(report)
    write_json(args.json, report)


if __name__ == "__main__":
    main()
