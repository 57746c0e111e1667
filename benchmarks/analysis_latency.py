"""How long the analysis commands take on a small sweep's store, from a fresh process: `kdgrid tables --sweep`,
`kdgrid report` (its wall time beside the time it prints) and `kdgrid export mlflow` (runs per second, and what a
new database costs: `mlflow_figures`).

    .venv/bin/python benchmarks/analysis_latency.py [--seeds 3] [--dev 872] [--repeats 3] [--json PATH]
        [--no-mlflow] [--smoke]

The store: one sweep of 2 knowledge types x 2 learning rates x ``--seeds`` seeds (12 trials by default) on SST-2's
shape, each row written with the store's own `write_result`: a best and a last score, a 3-epoch curve with two loss
terms and dev scores, weights, and per-example predictions on ``--dev`` examples (SST-2's dev set has 872), so
that the table's paired intervals and tests run on stored predictions as a real sweep's do. Each command runs in
a fresh ``python -m kdgrid.cli`` process (the median of ``--repeats``; the first run of ``report`` builds it,
later runs update it with nothing new, so both are reported), with the bytecode cache on. The machine's load is
recorded beside the figures: on a busy shared machine they vary.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import ROOT, machine

from kdgrid.predictions import DevSetPredictions
from kdgrid.result import TrialResult
from kdgrid.store import write_result
from kdgrid.trial import Trial

SWEEP = "analysis_latency"
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def trial_result(knowledge: str, lr: float, seed: int, dev: int) -> TrialResult:
    """A done SST-2-shaped trial whose accuracy depends on its cell and seed, with predictions on ``dev``."""
    rng = np.random.default_rng(seed * 101 + int(lr * 1e4) + len(knowledge))
    gold = np.arange(dev) % 2
    accuracy = 0.80 + (0.02 if knowledge == "hidden_mse" else 0.0) + (0.01 if lr < 5e-3 else 0.0) + 0.005 * seed
    right = rng.random(dev) < accuracy
    predicted = np.where(right, gold, 1 - gold)
    teacher = np.where(rng.random(dev) < 0.9, gold, 1 - gold)
    score = float(right.mean())
    trial = Trial(task="sst2", teacher="bert-base", student="bert-tiny", knowledge=[knowledge], lr=lr, seed=seed)
    curve = [{"epoch": e, "scores": {"validation": {"accuracy": score - 0.02 * (3 - e)}},
              "loss_terms": {"soft": 0.7 / e, knowledge + "@1-2": 0.2 / e}} for e in (1, 2, 3)]  # fmt: skip
    made = TrialResult(trial=trial, status="done", scores={"validation": {"accuracy": score}},
                       last_scores={"validation": {"accuracy": score}}, best_epoch=3, curve=curve,
                       weights={"soft": 1.0, knowledge + "@1-2": 1.0}, wall_time_s=60.0, device="cpu",
                       extra={"steps_per_epoch": 50})  # fmt: skip
    outcome = {"validation": DevSetPredictions(gold, predicted, teacher, "f" * 64)}
    return dataclasses.replace(made, predictions=outcome)


def write_store(store: Path, seeds: int, dev: int) -> int:
    count = 0
    for knowledge in ("hidden_mse", "attention_kl"):
        for lr in (1e-3, 1e-2):
            for seed in range(seeds):
                write_result(store, trial_result(knowledge, lr, seed, dev), sweep=SWEEP, study="main")
                count += 1
    return count


def run(argv: list[str], cwd: Path) -> tuple[float, str]:
    """(wall seconds, stdout) of ``python -m kdgrid.cli ARGV`` in a fresh process (it must exit 0)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kdgrid.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          env=ENVIRONMENT)  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"kdgrid {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def printed_seconds(text: str) -> float | None:
    """The seconds `kdgrid report` prints (``... in 3.2 s``), or None."""
    found = re.search(r" in ([0-9.]+) s", text)
    return float(found.group(1)) if found else None


def mlflow_figures(folder: Path, store: Path, trials: int, dev: int) -> dict[str, Any]:
    """The MLflow export's seconds into a local SQLite database: of a one-trial store into a new database (MLflow
    creates its tables: seconds of its own migrations), then of ``store`` (its runs written), then of ``store``
    again (connect, list the runs, compare row ids: nothing written); the write rate is ``trials`` over the
    difference of the last two."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    first = folder / "first"
    write_result(first, trial_result("hidden_mse", 1e-3, 99, dev), sweep="first", study="main")
    new_database, _ = run(["export", "mlflow", "--store", str(first), "--tracking-uri", uri], ROOT)
    written, _ = run(["export", "mlflow", "--store", str(store), "--tracking-uri", uri], ROOT)
    again, _ = run(["export", "mlflow", "--store", str(store), "--tracking-uri", uri], ROOT)
    return {"one_run_into_a_new_database_s": round(new_database, 2), "runs": trials,
            "write_s": round(written, 2), "again_s": round(again, 2),
            "runs_per_s": round(trials / max(written - again, 1e-9), 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--dev", type=int, default=872)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-mlflow", action="store_true", help="skip the MLflow export")
    parser.add_argument("--smoke", action="store_true", help="2 seeds, 100 examples, one run each")
    args = parser.parse_args()
    seeds, dev, repeats = (2, 100, 1) if args.smoke else (args.seeds, args.dev, args.repeats)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        store, out = Path(folder) / "store", Path(folder) / "report"
        figures["trials"] = write_store(store, seeds, dev)
        run(["tables", "--sweep", SWEEP, "--store", str(store)], ROOT)  # warm-up: bytecode, read cache
        tables = [run(["tables", "--sweep", SWEEP, "--store", str(store)], ROOT)[0] for _ in range(repeats)]
        figures["tables --sweep"] = {"median_s": round(statistics.median(tables), 2), "runs": tables}
        builds = []
        for _ in range(repeats):  # each a first build: the report folder removed before
            subprocess.run(["rm", "-rf", str(out)], check=True)
            seconds, printed = run(["report", "--store", str(store), "--out", str(out)], ROOT)
            builds.append({"wall_s": round(seconds, 2), "printed_s": printed_seconds(printed)})
        figures["report (first build)"] = builds
        seconds, printed = run(["report", "--store", str(store), "--out", str(out)], ROOT)
        figures["report (nothing new)"] = {"wall_s": round(seconds, 2), "printed_s": printed_seconds(printed)}
        if not args.no_mlflow:
            figures["export mlflow"] = mlflow_figures(Path(folder), store, figures["trials"], dev)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
