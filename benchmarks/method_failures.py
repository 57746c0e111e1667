"""Why DOT and the layer curriculum fail at the methods study's recipe: small real runs that separate the causes.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/method_failures.py [--task synthetic|polarity] [--epochs 3]
        [--json PATH]

A small teacher (4 x 64, random, MiniLM's vocabulary) is fine-tuned by kdgrid's own `finetune_teacher`, in a
temporary ``KDGRID_CACHE``, on ``--task``: ``synthetic`` (`SYNTHETIC_TASK`, a generated task whose label is a
marker word) or ``polarity`` (the offline sentence-polarity task, copied from the kdgrid cache: run `kdgrid
demo` or `kdgrid fetch` first). The methods study's MiniLM teacher fine-tuned on polarity is not used: fine-tuning
it takes longer than these runs. Then one job (one teacher pass) trains random BERT-tiny students (2 x 128) with
the methods study's recipe: batch 32, 2,000 training sentences, ``--epochs`` epochs, lr 1e-3 (AdamW) unless
stated, temperature 1, alpha 0.1, ``beta: auto``, hidden states.

- DOT against SGD with momentum at matched learning rates (`LEARNING_RATES`): ``optimizer: dot`` (Delta 0.075,
  the paper's) and ``optimizer: dot`` with ``dot_delta: 0`` (both momenta 0.9: SGD with momentum 0.9 on the sum
  of the two gradients), hidden states at Last-1; AdamW at lr 1e-3 beside them.
- The layer curriculum's stage length as an axis (`BOUNDARIES`), hidden states at Dilatation, under the paper's
  form (classifier last stage, a fresh optimizer per stage) and kdgrid's earlier one (``layer_curriculum_last:
  all``, ``layer_curriculum_optimizer: shared``); the same strategy without a curriculum beside them.

For each student: its dev accuracy; the soft and hard losses (unweighted) at the first recorded point of the last
stage and at the end, from its step curves; the learning rate at the last stage's first point; and, on 256 dev
sentences after training, the variance across sentences of the [CLS] hidden state of each student layer (mean
over dimensions), which is ~0 where the representation collapsed. ln 2 = 0.693 is the soft loss of a student at
chance against a teacher that is sure (temperature 1). The first row is a freshly initialised BERT-tiny (seed 0),
untrained: the [CLS] variance a student starts from.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SYNTHETIC_TASK = "synthetic-single-binary-n2000-d500"
LEARNING_RATES = (0.01, 0.05, 0.15)
BOUNDARIES = ((0.02, 0.04), (0.1, 0.2), (0.2, 0.4))
PROBE_SENTENCES = 256


def _point_at(curves: dict[str, Any], step: float) -> int:
    """The index of the first recorded point at or after ``step``."""
    for index, point in enumerate(curves["steps"]):
        if point >= step:
            return index
    return len(curves["steps"]) - 1


def _term(curves: dict[str, Any], name: str, index: int) -> float | None:
    series = curves["terms"].get(name)
    return None if series is None or index >= len(series) else series[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("synthetic", "polarity"), default="synthetic")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kdgrid-failures-"))
    home_cache = Path(os.environ.get("KDGRID_CACHE", Path.home() / ".cache" / "kdgrid")).expanduser()
    os.environ["KDGRID_CACHE"] = str(folder / "cache")  # before kdgrid reads it
    task = SYNTHETIC_TASK
    if args.task == "polarity":
        task = "polarity"
        shutil.copytree(home_cache / "polarity", folder / "cache" / "polarity")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from _common import teacher_path
    from _machine import machine
    from transformers import AutoTokenizer, BertForSequenceClassification

    from kdgrid.core.data.synthetic import generate_examples
    from kdgrid.core.model.models import bert_config
    from kdgrid.core.model.shapes import student_shape
    from kdgrid.core.model.teacher_cache import TeacherRecipe
    from kdgrid.core.teacher.finetune import finetune_teacher
    from kdgrid.core.training.train import run_job
    from kdgrid.trial import Trial

    started = time.perf_counter()
    base = teacher_path("tiny")
    record = finetune_teacher(task, base=base, recipe=TeacherRecipe(lr=1e-3, epochs=4, batch_size=32,
                                                                      max_length=64))  # fmt: skip
    common: dict[str, Any] = dict(task=task, max_train_samples=2000, teacher=str(record.path), student="bert-tiny", init="random",
                                  batch_size=32, max_length=64, epochs=args.epochs, temperature=1, alpha=0.1,
                                  beta="auto", seed=0, knowledge=("hidden_mse",))  # fmt: skip
    labelled: list[tuple[str, Trial]] = [("adamw lr 1e-3, Last-1", Trial(**common, strategy="Last-1", lr=1e-3))]
    for lr in LEARNING_RATES:
        for name, delta in (("dot", 0.075), ("sgd-momentum", 0.0)):
            options = {"optimizer": "dot", "dot_delta": delta}
            labelled.append((f"{name} lr {lr}", Trial(**common, strategy="Last-1", lr=lr, options=options)))
    labelled.append(("no curriculum, Dilatation", Trial(**common, strategy="Dilatation", lr=1e-3)))
    for boundaries in BOUNDARIES:
        for form, extra in (("paper", {}), ("old", {"layer_curriculum_last": "all",
                                                     "layer_curriculum_optimizer": "shared"})):  # fmt: skip
            options = {"layer_curriculum": list(boundaries), **extra}
            label = f"curriculum {list(boundaries)} {form}"
            labelled.append((label, Trial(**common, strategy="Dilatation", lr=1e-3, options=options)))

    if args.task == "polarity":
        with open(folder / "cache" / "polarity" / "dev.csv", newline="") as handle:
            sentences = [row["text"] for row in csv.DictReader(handle)][:PROBE_SENTENCES]
    else:
        sentences = [e["sentence"] for e in generate_examples("single", "binary", PROBE_SENTENCES,
                                                              split="validation")]  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(base)
    probe = tokenizer(sentences, padding=True, truncation=True, max_length=64, return_tensors="pt")
    variances: dict[str, list[float]] = {}

    def cls_variance(model: Any) -> list[float]:
        """Per layer (embeddings first), the variance across the probe sentences of the [CLS] hidden state,
        averaged over its dimensions."""
        model.eval()
        with torch.no_grad():
            out = model(**{k: v for k, v in probe.items() if k != "token_type_ids"}, output_hidden_states=True)
        return [round(float(h[:, 0].var(dim=0).mean()), 5) for h in out.hidden_states]

    def on_model(trial: Trial, model: Any) -> None:
        variances[trial.trial_id] = cls_variance(model)

    with torch.random.fork_rng():
        torch.manual_seed(0)
        untrained = BertForSequenceClassification(bert_config(student_shape("bert-tiny"), 2))
    init_variance = cls_variance(untrained)
    results = run_job([trial for _, trial in labelled], device="cpu", on_model=on_model)
    rows = [{"run": "untrained BERT-tiny (seed 0)", "status": "-", "accuracy": None, "cls_variance": init_variance,
             "soft_start": None, "soft_end": None, "hard_start": None, "hard_end": None, "lr_last_stage": None,
             "error": None}]  # fmt: skip
    for (label, trial), result in zip(labelled, results, strict=True):
        curves = result.step_curves or {"steps": [], "terms": {}, "lr": []}
        boundaries = trial.option("layer_curriculum")
        total = curves.get("total_steps", 0)
        last_start = _point_at(curves, boundaries[-1] * total) if boundaries else 0
        end = len(curves["steps"]) - 1
        scores = result.last_scores.get("validation", {}) if result.last_scores else {}
        rows.append({
            "run": label,
            "status": result.status,
            "accuracy": scores.get("accuracy"),
            "best_accuracy": (result.scores or {}).get("validation", {}).get("accuracy"),
            "soft_start": _term(curves, "soft", last_start),
            "soft_end": _term(curves, "soft", end),
            "hard_start": _term(curves, "hard", last_start),
            "hard_end": _term(curves, "hard", end),
            "lr_last_stage": curves["lr"][last_start] if curves["lr"] else None,
            "last_stage_step": curves["steps"][last_start] if curves["steps"] else None,
            "cls_variance": variances.get(trial.trial_id),
            "error": (result.error_message or "")[:160] or None,
        })
    header = f"{'run':38} {'acc':>6} {'soft@st':>8} {'soft@end':>8} {'hard@st':>8} {'hard@end':>8} {'lr@st':>9}  [CLS] var/layer"
    print(header)
    for row in rows:
        def f(value: Any, width: int = 8) -> str:
            return f"{value:>{width}.4g}" if isinstance(value, float) else f"{'-':>{width}}"

        print(f"{row['run']:38} {f(row['accuracy'], 6)} {f(row['soft_start'])} {f(row['soft_end'])} "
              f"{f(row['hard_start'])} {f(row['hard_end'])} {f(row['lr_last_stage'], 9)}  "
              f"{row['cls_variance']}{'  ' + row['error'] if row['error'] else ''}")  # fmt: skip
    report = {"machine": machine(), "task": task, "teacher_dev": record.dev_scores, "epochs": args.epochs,
              "ln2": round(math.log(2), 4), "rows": rows, "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, default=str))
    shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
