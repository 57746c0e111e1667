"""Why DOT and the layer curriculum fail at the methods study's recipe: small real runs that separate the causes.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/method_failures.py [--task synthetic|polarity|uncertainty]
        [--teacher small|minilm] [--student tiny|copied] [--cases all|dot|curriculum] [--seeds 1] [--epochs 3]
        [--smoke] [--json PATH]

``--teacher small`` (default): a small teacher (4 x 64, random, MiniLM's vocabulary) is fine-tuned by kdgrid's
own `finetune_teacher`, in a temporary ``KDGRID_CACHE``, on ``--task``: ``synthetic`` (`SYNTHETIC_TASK`, a
generated task whose label is a marker word) or an offline corpus, ``polarity`` or ``uncertainty`` (copied from
the kdgrid cache: run `kdgrid demo` or `kdgrid assets fetch` first). ``--teacher minilm``: the methods study's own
teacher, MiniLM-L6 fine-tuned on the corpus, read from the kdgrid cache (`kdgrid teacher finetune polarity` or
`... uncertainty` makes it; a corpus only). Then one job (one teacher pass) trains random BERT-tiny students
(2 x 128) with the methods study's recipe: batch 32, 2,000 training sentences, ``--epochs`` epochs, lr 1e-3
(AdamW) unless stated, temperature 1, alpha 0.1, ``beta: auto``, hidden states; ``--seeds N`` students (seeds
0..N-1) per row, all on one data order (``data_seed: 0``, as the methods study's seeds). ``--student copied``
(with ``--teacher minilm``) trains the second testbed's students instead (`sweeps/methods_copied.yaml`): 2 layers
of the teacher's width copied from its first two (``init: preload``), on the whole training split (use ``--epochs
2``, the testbed's).

- DOT against SGD with momentum at matched learning rates (`LEARNING_RATES`): ``optimizer: dot`` (Delta 0.075,
  the paper's) and ``optimizer: dot`` with ``dot_delta: 0`` (both momenta 0.9: SGD with momentum 0.9 on the sum
  of the two gradients), hidden states at Last-1; AdamW at lr 1e-3 beside them.
- The layer curriculum's stage length as an axis (`BOUNDARIES`), hidden states at Dilatation, under the paper's
  form (classifier last stage, a fresh optimizer per stage) and kdgrid's earlier one (``layer_curriculum_last:
  all``, ``layer_curriculum_optimizer: shared``); at the methods study's boundaries (`STUDY_BOUNDARIES`) also
  the two crossed forms (a whole-student last stage with a fresh optimizer; the classifier last stage with the
  shared one), which separate the last stage's kind from the optimizer's state; the same strategy without a
  curriculum beside them.

For each student: its dev accuracy; the soft and hard losses (unweighted) at the first recorded point of the last
stage and at the end, from its step curves; the learning rate at the last stage's first point; and, on 256 dev
sentences after training, the variance across sentences of the [CLS] hidden state of each student layer (mean
over dimensions), which is ~0 where the representation collapsed. ln 2 = 0.693 is the soft loss of a student at
chance against a teacher that is sure (temperature 1). The first row is a freshly initialised BERT-tiny (seed 0),
untrained: the [CLS] variance a student starts from.

``--smoke`` (the benchmark tests' mode: it shows that the script runs, not why anything fails): the synthetic task
and the small teacher, one seed, one epoch on 256 sentences, DOT and SGD at lr 0.05 only, the curriculum at the
study's boundaries in the paper's form only.
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

from kdgrid.assets import CORPORA, cache_dir, corpus_files  # they read KDGRID_CACHE only when called

SYNTHETIC_TASK = "synthetic-single-binary-n2000-d500"
LEARNING_RATES = (0.01, 0.05, 0.15)
BOUNDARIES = ((0.02, 0.04), (0.1, 0.2), (0.2, 0.4))
STUDY_BOUNDARIES = (0.2, 0.4)  # sweeps/methods.yaml's curriculum
SMOKE_LEARNING_RATES = (0.05,)  # --smoke: the study's DOT rate only
SMOKE_SENTENCES = 256  # --smoke: training sentences per student
CURRICULUM_FORMS = {  # name: (layer_curriculum_last, layer_curriculum_optimizer)
    "paper": ("classifier", "fresh"),
    "old": ("all", "shared"),
    "all+fresh": ("all", "fresh"),
    "classifier+shared": ("classifier", "shared"),
}
PROBE_SENTENCES = 256
STUDENTS: dict[str, dict[str, Any]] = {  # --student: the first testbed's, the second's (sweeps/methods_copied.yaml)
    "tiny": {"student": "bert-tiny", "init": "random", "max_train_samples": 2000},
    "copied": {"student": "w384-l2-h12-f1536", "init": "preload", "max_train_samples": None},
}


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
    parser.add_argument("--task", choices=("synthetic", *CORPORA), default="synthetic")
    parser.add_argument("--teacher", choices=("small", "minilm"), default="small")
    parser.add_argument("--student", choices=tuple(STUDENTS), default="tiny")
    parser.add_argument("--cases", choices=("all", "dot", "curriculum"), default="all")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="the smallest run of every case (see above)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.smoke and (args.task, args.teacher, args.student) != ("synthetic", "small", "tiny"):
        parser.error("--smoke runs the synthetic task with the small teacher and BERT-tiny students only")
    if args.smoke:
        args.seeds, args.epochs = 1, 1
    learning_rates = SMOKE_LEARNING_RATES if args.smoke else LEARNING_RATES
    boundaries_axis = (STUDY_BOUNDARIES,) if args.smoke else BOUNDARIES
    if args.teacher == "minilm" and args.task not in CORPORA:
        parser.error(f"--teacher minilm is the methods studies' teacher, fine-tuned on a corpus: use --task "
                     f"{' or '.join(CORPORA)}")  # fmt: skip
    if args.student == "copied" and args.teacher != "minilm":
        parser.error("--student copied copies the layers of the methods study's teacher: use --teacher minilm")
    folder = Path(tempfile.mkdtemp(prefix="kdgrid-failures-"))
    home_cache = cache_dir()  # read before the small teacher's temporary cache replaces it
    if args.teacher == "small":
        os.environ["KDGRID_CACHE"] = str(folder / "cache")  # before kdgrid reads it
    task = SYNTHETIC_TASK
    if args.task in CORPORA:
        task = args.task
        if args.teacher == "small":
            shutil.copytree(home_cache / task, folder / "cache" / task)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch
    from _common import finetuned_tiny_teacher
    from _machine import machine
    from transformers import AutoTokenizer, BertForSequenceClassification

    from kdgrid.core.data.synthetic import generate_examples
    from kdgrid.core.model.models import bert_config
    from kdgrid.core.model.shapes import student_shape
    from kdgrid.core.model.teacher_cache import cached_teacher, finetuned_teacher_dir
    from kdgrid.core.training.train import run_job
    from kdgrid.trial import Trial

    started = time.perf_counter()
    if args.teacher == "minilm":
        finetuned_teacher_dir(task)  # refuses, naming the command, when it is not cached
        record = cached_teacher(task)
        assert record is not None
        base = str(record.path)
    else:
        record = finetuned_tiny_teacher(task, max_length=64)
        base = str(record.path)
    students = {**STUDENTS[args.student], **({"max_train_samples": SMOKE_SENTENCES} if args.smoke else {})}
    common: dict[str, Any] = dict(task=task, teacher=str(record.path), **students, batch_size=32,
                                  max_length=64, epochs=args.epochs, temperature=1, alpha=0.1, beta="auto",
                                  knowledge=("hidden_mse",))  # fmt: skip
    labelled: list[tuple[str, Trial]] = []
    for seed in range(args.seeds):
        def add(label: str, seed: int = seed, options: dict[str, Any] | None = None, **fields: Any) -> None:
            suffix = f" s{seed}" if args.seeds > 1 else ""
            # one data order for every seed (data_seed 0): one job, one teacher pass; a seed varies the init
            shared = {"data_seed": 0, **(options or {})}
            labelled.append((label + suffix, Trial(**common, seed=seed, options=shared, **fields)))

        add("adamw lr 1e-3, Last-1", strategy="Last-1", lr=1e-3)
        if args.cases in ("all", "dot"):
            for lr in learning_rates:
                for name, delta in (("dot", 0.075), ("sgd-momentum", 0.0)):
                    add(f"{name} lr {lr}", strategy="Last-1", lr=lr, options={"optimizer": "dot", "dot_delta": delta})
        if args.cases in ("all", "curriculum"):
            add("no curriculum, Dilatation", strategy="Dilatation", lr=1e-3)
            for boundaries in boundaries_axis:
                if args.smoke:
                    forms = ("paper",)
                else:
                    forms = CURRICULUM_FORMS if boundaries == STUDY_BOUNDARIES else ("paper", "old")
                for form in forms:
                    last, optimizer = CURRICULUM_FORMS[form]
                    options = {"layer_curriculum": list(boundaries), "layer_curriculum_last": last,
                               "layer_curriculum_optimizer": optimizer}  # fmt: skip
                    add(f"curriculum {list(boundaries)} {form}", strategy="Dilatation", lr=1e-3, options=options)

    if args.task in CORPORA:
        with open(corpus_files(task).dev, newline="") as handle:  # the cache KDGRID_CACHE names now
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

    rows = []
    if args.student == "tiny":  # the [CLS] variance a random student starts from (a copied one starts trained)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            untrained = BertForSequenceClassification(bert_config(student_shape("bert-tiny"), 2))
        rows.append({"run": "untrained BERT-tiny (seed 0)", "status": "-", "accuracy": None,
                     "cls_variance": cls_variance(untrained), "soft_start": None, "soft_end": None,
                     "hard_start": None, "hard_end": None, "lr_last_stage": None, "error": None})  # fmt: skip
    results = run_job([trial for _, trial in labelled], device="cpu", on_model=on_model)
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
    header = f"{'run':44} {'acc':>6} {'soft@st':>8} {'soft@end':>8} {'hard@st':>8} {'hard@end':>8} {'lr@st':>9}  [CLS] var/layer"
    print(header)
    for row in rows:
        def f(value: Any, width: int = 8) -> str:
            return f"{value:>{width}.4g}" if isinstance(value, float) else f"{'-':>{width}}"

        print(f"{row['run']:44} {f(row['accuracy'], 6)} {f(row['soft_start'])} {f(row['soft_end'])} "
              f"{f(row['hard_start'])} {f(row['hard_end'])} {f(row['lr_last_stage'], 9)}  "
              f"{row['cls_variance']}{'  ' + row['error'] if row['error'] else ''}")  # fmt: skip
    report = {"machine": machine(), "task": task, "teacher": args.teacher, "teacher_dev": record.dev_scores,
              "student": args.student, "cases": args.cases, "seeds": args.seeds, "epochs": args.epochs,
              "smoke": args.smoke,
              "ln2": round(math.log(2), 4), "rows": rows, "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, default=str))
    shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
