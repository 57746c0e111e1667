"""How much of the teacher's label signal survives each teacher-masking method, per task of the second testbed.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/masked_teacher_signal.py [--tasks polarity uncertainty]
        [--smoke] [--json PATH]

The methods study on weight-copied students (`sweeps/methods_copied.yaml`) finds MaskedKD's criterion (the
``maskedkd_paper`` study) worse than soft labels on ``uncertainty`` and not on ``polarity``. A teacher that sees a
masked input gives soft labels that carry less of the gold label; this measures how much less, on each task's
whole training split (the first epoch in the study's order, batch 32), through kdgrid's own code path
(`kdgrid.core.methods.masking.masks.teacher_input`, the batch the job's shared teacher pass reads), for:

- ``whole``: the unmasked input (soft labels and ``fixed_hidden`` read this);
- ``mask_teacher``: the study's random 15% of tokens replaced by [MASK];
- ``random 50%``: half the tokens replaced by [MASK] at random (the fraction of MaskedKD, chosen at random);
- ``maskedkd_paper``: MaskedKD's criterion at the paper preset: the 50% of tokens its student attends to least
  from [CLS] removed from the teacher's input. The student is the study's seed-0 student **at initialisation**
  (the teacher's first two layers); in training its attention moves, so this is the criterion as the first
  steps apply it.

For each: the teacher's accuracy against the gold labels, its mean probability of the gold label (temperature 1,
the study's), and how often its prediction agrees with the whole-input teacher's. The task's teacher must be in the
kdgrid cache (`kdgrid teacher finetune polarity`, `... uncertainty`).

``--smoke`` (the benchmark tests' mode: it shows that the script runs, not what masking costs): the same variants
on the synthetic task's first 256 training examples, with the benchmarks' tiny teacher (4 x 64) fine-tuned on it by
kdgrid in a temporary ``KDGRID_CACHE``, and a student copied from its first two layers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import finetuned_tiny_teacher
from _machine import machine

from kdgrid.assets import CORPORA
from kdgrid.bundled_sweeps import require_sweep
from kdgrid.core.data.batching import train_batches
from kdgrid.core.job.init import build_student
from kdgrid.core.job.loaded_job import load_job
from kdgrid.core.methods.masking.masks import teacher_input
from kdgrid.core.model.runtime import make_runtime
from kdgrid.core.model.shapes import student_shape
from kdgrid.grid import load_sweep
from kdgrid.grid.presets import as_settings, preset_values
from kdgrid.trial import Trial, data_order_seed

SWEEP = "methods_copied"
MASKED_STUDIES = ("mask_teacher", "maskedkd_paper")  # the sweep's studies that mask the teacher's input
RANDOM_HALF = {"mask_input": "teacher", "mask_by": "random", "mask_fraction": 0.5}
SMOKE_TASK = "synthetic-single-binary-n2000-d500"
SMOKE_SENTENCES = 256


def study_trials(task: str) -> dict[str, Trial]:
    """The sweep's seed-0 trials on ``task``: soft labels and the teacher-masking studies, by study name."""
    wanted = ("soft_labels", *MASKED_STUDIES)
    found = {p.study: p.trial for p in load_sweep(require_sweep(SWEEP)).trials
             if p.trial.task == task and p.trial.seed == 0 and p.study in wanted}  # fmt: skip
    missing = set(wanted) - set(found)
    if missing:
        raise SystemExit(f"{SWEEP} has no seed-0 trial of {sorted(missing)} on {task}")
    return found


def with_preset(trial: Trial, name: str) -> Trial:
    """``trial`` with what the registered methods' preset ``name`` sets on it (`kdgrid.grid.presets`), as a
    sweep's ``preset: NAME`` would, no key of the trial protected."""
    settings = as_settings(preset_values(trial, name, set()))
    options = {**dict(trial.options), **settings.pop("options", {})}
    return dataclasses.replace(trial, **settings, options=options)


def smoke_trials() -> dict[str, Trial]:
    """`study_trials`' three trials on the synthetic task: the tiny teacher fine-tuned on it (in the kdgrid cache
    ``KDGRID_CACHE`` names), a 2-layer student copied from it; the teacher masked as the sweep's studies mask it
    (MaskedKD's trial: the masked teacher under the paper preset)."""
    record = finetuned_tiny_teacher(SMOKE_TASK, max_length=32)
    plain = Trial(task=SMOKE_TASK, teacher=str(record.path), student="w64-l2-h2-f128", init="preload",
                  batch_size=32, max_length=32, epochs=1, temperature=1, alpha=0.1, knowledge=(),
                  max_train_samples=SMOKE_SENTENCES)  # fmt: skip
    masked = dataclasses.replace(plain, options={"mask_input": "teacher"})
    return {"soft_labels": plain, "mask_teacher": masked, "maskedkd_paper": with_preset(masked, "paper")}


def signal(task: str, trials: dict[str, Trial]) -> dict[str, Any]:
    """The teacher's accuracy, gold-label probability and agreement with its whole-input self, per variant, over
    one epoch of ``task``'s training split; ``trials``: `study_trials`' (or `smoke_trials`') by study name."""
    plain = trials["soft_labels"]
    variants: dict[str, Trial] = {
        "whole": plain,
        "mask_teacher": trials["mask_teacher"],
        "random 50%": dataclasses.replace(plain, options={**dict(plain.options), **RANDOM_HALF}),
        "maskedkd_paper": trials["maskedkd_paper"],
    }
    runtime = make_runtime("cpu")
    job = load_job(plain, runtime)
    if job.label_order is not None and not job.label_order.is_identity:
        raise SystemExit(
            f"the {task} teacher's outputs are not in the task's label order: compare through it"
        )
    maskedkd = trials["maskedkd_paper"]
    student, _ = build_student(maskedkd, student_shape(maskedkd.student), job.task.num_labels, job.teacher,
                               job.teacher_model)  # fmt: skip
    # per variant: the teacher's correct predictions, summed gold-label probability, agreements with `whole`
    counts = {
        name: {"teacher_accuracy": 0.0, "gold_probability": 0.0, "agrees_with_whole": 0.0}
        for name in variants
    }
    total = 0
    batches = train_batches(job.tokenized["train"], plain.batch_size, data_order_seed(plain), 0)
    with torch.no_grad():
        for step, batch in enumerate(batches, start=1):
            labels = batch["labels"]
            whole = None
            for name, trial in variants.items():
                inputs = teacher_input(
                    job, trial, batch, 0, step, student if name == "maskedkd_paper" else None
                )
                model_inputs = {k: v for k, v in inputs.items() if k != "labels"}
                probabilities = torch.softmax(job.teacher_model(**model_inputs).logits.double(), dim=-1)
                predicted = probabilities.argmax(dim=-1)
                whole = predicted if whole is None else whole
                tally = counts[name]
                tally["teacher_accuracy"] += int((predicted == labels).sum())
                tally["gold_probability"] += float(probabilities.gather(1, labels[:, None]).sum())
                tally["agrees_with_whole"] += int((predicted == whole).sum())
            total += len(labels)
    return {
        "task": task,
        "sentences": total,
        "variants": {
            name: {key: round(value / total, 4) for key, value in c.items()} for name, c in counts.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=tuple(CORPORA), default=list(CORPORA))
    parser.add_argument(
        "--smoke", action="store_true", help="the synthetic task and a tiny teacher (see above)"
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="kdgrid-masked-signal-") as folder:
            os.environ["KDGRID_CACHE"] = folder  # kdgrid reads it when it first needs the cache
            reports = [signal(SMOKE_TASK, smoke_trials())]
    else:
        reports = [signal(task, study_trials(task)) for task in args.tasks]
    print(f"{'task':12} {'teacher input':16} {'accuracy':>9} {'p(gold)':>8} {'agrees':>7}")
    for report in reports:
        for name, row in report["variants"].items():
            print(f"{report['task']:12} {name:16} {row['teacher_accuracy']:>9.4f} {row['gold_probability']:>8.4f} "
                  f"{row['agrees_with_whole']:>7.4f}")  # fmt: skip
    result = {"machine": machine(), "sweep": SWEEP, "smoke": args.smoke, "tasks": reports,
              "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    print(json.dumps({k: v for k, v in result.items() if k != "tasks"}, default=str))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
