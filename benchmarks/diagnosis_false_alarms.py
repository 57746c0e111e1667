"""How often each diagnosis rule (`kdgrid.diagnosis`) fires on students that learned (a false alarm) and on
students that did not.

    .venv/bin/python benchmarks/diagnosis_false_alarms.py [--seeds 2] [--epochs 3] [--smoke] [--json PATH]

A small teacher (4 x 64, random, MiniLM's vocabulary) is fine-tuned by kdgrid's own `finetune_teacher` on a
generated task whose label is a marker word (`synthetic-single-binary-n1024-d256`: it learns it), in a temporary
``KDGRID_CACHE``. Then one job trains random 2 x 64 students from it: six knowledge types x three strategies
(Last, First, LAD) plus the soft-only and hard-only baselines, ``beta: auto``, for each of ``--seeds`` seeds.
Every result is written to a temporary store and read back as rows, and each row's flags come from the store
(`kdgrid.store.step_curves.row_diagnosis`), exactly as `kdgrid status` and the report read them. A student
"learned" when its dev accuracy is at least `LEARNED_ACCURACY` (chance is 0.5); a flag on one of those is a
false alarm for the rules that say the student did not learn (``stalled_student``), and a pointer worth a look
for the others. The figures are for this task and these students only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

TASK = "synthetic-single-binary-n1024-d256"
LEARNED_ACCURACY = 0.75
KNOWLEDGE = ("hidden_mse", "attention_ce_mean", "value_relation", "gram", "cos", "mmd")
STRATEGIES = ("Last", "First", "LAD")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="1 seed, 1 epoch, two knowledge types")
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary cache and store (printed)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kdgrid-diagnosis-"))
    os.environ["KDGRID_CACHE"] = str(folder / "cache")  # before kdgrid reads it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import finetuned_tiny_teacher
    from _machine import machine

    from kdgrid.core.training.train import run_job
    from kdgrid.store import read_store, write_result
    from kdgrid.store.step_curves import row_diagnosis
    from kdgrid.trial import Trial

    knowledge = KNOWLEDGE[:2] if args.smoke else KNOWLEDGE
    seeds, epochs = (1, 1) if args.smoke else (args.seeds, args.epochs)
    started = time.perf_counter()
    record = finetuned_tiny_teacher(TASK, max_length=32)
    teacher = str(record.path)
    common: dict[str, Any] = dict(task=TASK, teacher=teacher, student="w64-l2-h2-f128", init="random",
                                  batch_size=32, max_length=32, epochs=epochs, lr=1e-3, beta="auto")  # fmt: skip
    trials = []
    for seed in range(seeds):
        options = {"data_seed": 0}
        trials += [Trial(**common, knowledge=(k,), strategy=s, seed=seed, options=options)
                   for k in knowledge for s in STRATEGIES]  # fmt: skip
        trials += [Trial(**{**common, "beta": 1.0}, knowledge=(), seed=seed, options=options),
                   Trial(**{**common, "beta": 1.0}, knowledge=(), soft_weight=0.0, alpha=1.0, seed=seed,
                         options=options)]  # fmt: skip
    results = run_job(trials, device="cpu")
    store = folder / "store"
    for result in results:
        write_result(store, result, sweep="diagnosis", study="all")
    rows = read_store(store)
    learned, not_learned, failed = Counter(), Counter(), 0
    n_learned = n_not = 0
    examples: list[dict[str, Any]] = []
    for row in rows.to_dict("records"):
        if row["status"] != "done":
            failed += 1
            continue
        accuracy = json.loads(row["scores_json"])["validation"]["accuracy"]
        flags = {flag["flag"] for flag in row_diagnosis(row)}
        bucket = learned if accuracy >= LEARNED_ACCURACY else not_learned
        if accuracy >= LEARNED_ACCURACY:
            n_learned += 1
        else:
            n_not += 1
        bucket.update(flags)
        if flags:
            examples.append({"knowledge": row["knowledge"], "strategy": row["strategy"], "seed": row["seed"],
                             "accuracy": round(accuracy, 4), "flags": sorted(flags)})  # fmt: skip
    report = {
        "machine": machine(),
        "config": {"task": TASK, "teacher_dev": record.dev_scores, "seeds": seeds, "epochs": epochs,
                   "trials": len(trials), "learned_accuracy": LEARNED_ACCURACY},
        "learned": n_learned,
        "not_learned": n_not,
        "failed": failed,
        "flags_on_learned": dict(learned),
        "flags_on_not_learned": dict(not_learned),
        "flagged": examples,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(report, indent=2, default=str))
    if args.keep:
        print(f"kept: {folder} (cache/ and store/)")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
