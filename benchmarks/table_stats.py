"""How long the uncertainty of a full-size Table 5 takes (intervals + paired tests + Holm), one cell at a time
(before) and with the replicates shared per dev set (`kdgrid.analysis.replicate_bank`, after); and `store_to_tidy` on a
store of 30,000 rows.

    .venv/bin/python benchmarks/table_stats.py [--quick | --smoke] [--json PATH] [--threads 1] [--seeds 1]

The table is built in memory as `kdgrid tables 5` lays it out: 10 knowledge types x 5 matching strategies x
3 students x the 9 dev sets of the appendix, at GLUE's dev sizes (MNLI 9,815 + 9,832, QQP 40,430, QNLI 5,463,
STS-B 1,500, CoLA 1,043, SST-2 872, MRPC 408, RTE 277), predictions right on ~80% of examples, ``--seeds`` seeds
per cell, each cell tested against ``knowledge=hidden_mse,strategy=Last-1`` with 10,000 resamples and given a
1,000-resample interval (the defaults of `kdgrid tables`).

- ``after``: `kdgrid.analysis.cell_stats.attach_uncertainty` on the whole table (what `kdgrid tables 5` and the report
  run; ``after_cpu_s``: its CPU time, steadier than wall time on a shared machine), then the
  significance-counting claims under Table 5 (`kdgrid.analysis.significant_conclusions`, reusing the tests' replicates).
- ``before``: the per-cell path it replaced - `stats.bootstrap_interval` / `stats.paired_bootstrap_test` per
  cell, each drawing its own samples, with accuracy scored by a gather per run (the metric passed as a plain
  function, which takes the general path) - timed on ``--before-cells`` cells per dev set and extrapolated to
  the table's cells; the sampled cells' numbers are checked equal to the after path's (interval bounds, raw p).
- ``store_to_tidy``: on an in-memory store frame of ``--tidy-rows`` rows shaped as `read_store` returns them
  (two MNLI dev sets, trial JSON, extras, agreement), with the scores in long form.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _machine import machine
from threadpoolctl import threadpool_limits

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import attach_uncertainty, parse_reference
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.significant_conclusions import significant_claim_notes
from kdgrid.analysis.tables import TableView, build_view, get_spec
from kdgrid.analysis.tidy import CONFIG_COLUMNS, aggregate_seeds, store_to_tidy
from kdgrid.metrics import ROW_METRICS
from kdgrid.paper import APPENDIX_DEV_SETS, PAPER_KNOWLEDGE, PAPER_STRATEGIES, PAPER_STUDENTS, reported_metric
from kdgrid.predictions import DevSetPredictions, TrialPredictions

DEV_SIZES = {  # GLUE's dev sets, by (task, dev set) of the appendix tables
    ("mrpc", "validation"): 408,
    ("sst2", "validation"): 872,
    ("qqp", "validation"): 40_430,
    ("qnli", "validation"): 5_463,
    ("rte", "validation"): 277,
    ("cola", "validation"): 1_043,
    ("stsb", "validation"): 1_500,
    ("mnli", "validation_mismatched"): 9_832,
    ("mnli", "validation_matched"): 9_815,
}
REFERENCE = "knowledge=hidden_mse,strategy=Last-1"


def synthetic_table(
    knowledge: tuple[str, ...], students: tuple[str, ...], seeds: int, scale: float
) -> tuple[pd.DataFrame, dict[str, TrialPredictions]]:
    """Tidy per-seed rows of Table 5 and their predictions; dev sets ``scale`` times GLUE's sizes."""
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    predictions: dict[str, TrialPredictions] = {}
    for task, dev_set in APPENDIX_DEV_SETS:
        n = max(20, round(DEV_SIZES[(task, dev_set)] * scale))
        metric = reported_metric(task)
        fingerprint = f"{task}-{dev_set}-{n}".ljust(64, "0")
        if metric == "pearson":
            gold = rng.uniform(0, 5, n).astype(np.float32)
        else:
            gold = rng.integers(0, 3 if task == "mnli" else 2, n)
        for student in students:
            for k in knowledge:
                for strategy in PAPER_STRATEGIES:
                    for seed in range(seeds):
                        row_id = f"{task}/{dev_set}/{student}/{k}/{strategy}/{seed}"
                        if metric == "pearson":
                            student_scores = (gold + rng.normal(0, 1.0, n)).astype(np.float32)
                        else:
                            student_scores = np.where(rng.random(n) < 0.8, gold, (gold + 1) % 2)
                        value = float(ROW_METRICS[metric](student_scores[None], gold[None])[0])
                        predictions[row_id] = {
                            dev_set: DevSetPredictions(gold, student_scores, None, fingerprint)
                        }
                        rows.append(
                            {
                                **{c: "" for c in CONFIG_COLUMNS},
                                "temperature": math.nan,
                                "alpha": math.nan,
                                "soft_weight": 1.0,
                                "role": "student",
                                "table": "5",
                                "task": task,
                                "dev_set": dev_set,
                                "metric": metric,
                                "student": student,
                                "teacher": "bert-base",
                                "knowledge": k,
                                "strategy": strategy,
                                "beta": "1",
                                "init": "pretrain",
                                "value": value,
                                "row_id": row_id,
                                "seed": seed,
                            }
                        )
    return pd.DataFrame(rows), predictions


def scored_cells(view: TableView) -> list[Any]:
    return [
        cell
        for block in view.blocks
        for (_, column), cell in block.cells.items()
        if not column.fact and not cell.missing and cell.row_ids
    ]


def plain_function(metric: str) -> Any:
    """The metric as a plain function: `kdgrid.analysis.stats` then scores it by a gather per run (the path before)."""
    row_metric = ROW_METRICS[metric]
    return lambda predictions, labels: row_metric(predictions, labels)


def before_path(
    cells: list[Any], predictions: dict[str, TrialPredictions], per_dev_set: int, resamples: int, tests: int
) -> tuple[float, float, list[tuple[Any, float, float, float]]]:
    """Wall and CPU seconds the per-cell path would take on every cell (extrapolated from ``per_dev_set`` timed
    cells per dev set), and the timed cells' (cell, low, high, raw p)."""
    by_dev_set: dict[tuple[str, str], list[Any]] = {}
    for cell in cells:
        by_dev_set.setdefault((cell.config["task"], cell.config["dev_set"]), []).append(cell)
    total, total_cpu, sampled = 0.0, 0.0, []
    for members in by_dev_set.values():
        reference = next(
            c for c in members if c.config["knowledge"] == "hidden_mse" and c.config["strategy"] == "Last-1"
        )
        timed = [c for c in members if c is not reference][:per_dev_set]
        started, cpu_started = time.perf_counter(), time.process_time()
        for cell in timed:
            dev_set = cell.config["dev_set"]
            metric = plain_function(cell.config["metric"])
            gold = predictions[cell.row_ids[0]][dev_set].gold
            runs = np.stack([predictions[r][dev_set].student for r in cell.row_ids])
            ref_runs = np.stack([predictions[r][dev_set].student for r in reference.row_ids])
            if len(runs) == 1:
                interval = stats.bootstrap_interval(metric, gold, runs[0], resamples=resamples)
            else:
                interval = stats.seed_bootstrap_interval(metric, gold, runs, resamples=resamples)
            test = stats.paired_bootstrap_test(metric, gold, runs, ref_runs, resamples=tests)
            sampled.append((cell, interval.low, interval.high, test.p_value))
        total += (time.perf_counter() - started) / max(1, len(timed)) * len(members)
        total_cpu += (time.process_time() - cpu_started) / max(1, len(timed)) * len(members)
    return total, total_cpu, sampled


def synthetic_store(rows: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A `read_store`-shaped frame of ``rows`` done MNLI trials and their scores in long form."""
    ids = [f"t{i:06d}" for i in range(rows)]
    knowledge = [PAPER_KNOWLEDGE[i % len(PAPER_KNOWLEDGE)] for i in range(rows)]
    strategy = [PAPER_STRATEGIES[(i // 10) % len(PAPER_STRATEGIES)] for i in range(rows)]
    student = [PAPER_STUDENTS[(i // 50) % len(PAPER_STUDENTS)] for i in range(rows)]
    seed = [i // 150 for i in range(rows)]
    trial_json = [
        json.dumps(
            {"task": "mnli", "student": s, "teacher": "bert-base", "knowledge": [k], "strategy": g, "seed": e,
             "lr": 5e-5, "epochs": 3, "options": {"data_seed": e}},
            sort_keys=True,
        )
        for s, k, g, e in zip(student, knowledge, strategy, seed, strict=True)
    ]  # fmt: skip
    store = pd.DataFrame(
        {
            "trial_id": ids,
            "row_id": [f"r{i:06d}" for i in range(rows)],
            "status": "done",
            "study": "table5",
            "sweep": "table5",
            "task": "mnli",
            "student": student,
            "teacher": "bert-base",
            "init": "pretrain",
            "strategy": strategy,
            "knowledge": knowledge,
            "beta": 1.0,
            "beta_auto": False,
            "temperature": 1.0,
            "alpha": 0.5,
            "soft_weight": 1.0,
            "seed": seed,
            "ended_at": "2026-01-01T00:10:00+00:00",
            "student_params": 11.2e6,
            "student_flops": 1.1e9,
            "trial_json": trial_json,
            "extra_json": [json.dumps({"teacher_scores": {"validation_matched": {"accuracy": 0.84}}})] * rows,
            "degenerate_json": ["[]"] * rows,
            "teacher_agreement_json": [json.dumps({"validation_matched": 0.9, "validation_mismatched": 0.9})]
            * rows,
        }
    )
    scores = pd.DataFrame(
        {
            "trial_id": [t for t in ids for _ in range(2)],
            "dev_set": ["validation_matched", "validation_mismatched"] * rows,
            "metric": "accuracy",
            "value": [0.7 + (i % 100) / 1000 for i in range(2 * rows)],
            "kind": "best",
        }
    )
    return store, scores


def best_of(repeats: int, work: Any) -> tuple[float, float, Any]:
    """The least wall and CPU seconds of ``repeats`` calls of ``work``, and its result."""
    best, best_cpu, result = math.inf, math.inf, None
    for _ in range(repeats):
        started, cpu_started = time.perf_counter(), time.process_time()
        result = work()
        best, best_cpu = (
            min(best, time.perf_counter() - started),
            min(best_cpu, time.process_time() - cpu_started),
        )
    return best, best_cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one student, dev sets a tenth of GLUE's")
    parser.add_argument("--smoke", action="store_true", help="tiny table and store, no figures worth reading")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (matrix products)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per cell")
    parser.add_argument("--before-cells", type=int, default=2, help="cells per dev set timed one at a time")
    parser.add_argument("--tidy-rows", type=int, default=30_000)
    args = parser.parse_args()
    measured_on = machine()
    students, scale, resamples, tests, tidy_rows = PAPER_STUDENTS, 1.0, 1000, 10_000, args.tidy_rows
    if args.quick:
        students, scale, tidy_rows = PAPER_STUDENTS[:1], 0.1, min(tidy_rows, 3000)
    if args.smoke:
        students, scale, resamples, tests, tidy_rows = PAPER_STUDENTS[:1], 0.01, 50, 200, 300
    with threadpool_limits(args.threads):
        rows, predictions = synthetic_table(PAPER_KNOWLEDGE, students, args.seeds, scale)
        view = build_view(get_spec("5"), aggregate_seeds(rows))
        cells = scored_cells(view)
        before_s, before_cpu_s, sampled = before_path(cells, predictions, args.before_cells, resamples, tests)
        reference = parse_reference(REFERENCE)
        bank = ReplicateBank(tests)  # shared by the tests and the claims, as `kdgrid tables` shares it
        started, cpu_started = time.perf_counter(), time.process_time()
        summary = attach_uncertainty(  # the bootstrap tests and intervals: what the before path computes
            view,
            predictions,
            reference=reference,
            resamples=resamples,
            test_resamples=tests,
            test_bank=bank,
            test="bootstrap",
        )
        after_s, after_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
        for cell, low, high, _ in sampled:  # the same numbers: the raw p is checked through the claims below
            assert (cell.ci_low, cell.ci_high) == (low, high), (cell.config, cell.ci_low, low)
        started = time.perf_counter()
        notes = significant_claim_notes("5", view, predictions, resamples=tests, bank=bank)
        claims_s = time.perf_counter() - started
        store, scores = synthetic_store(tidy_rows)
        tidy_s, tidy_cpu_s, tidy = best_of(1 if args.smoke else 3, lambda: store_to_tidy(store, scores))
    figures = {
        "cells": len(cells),
        "tested": summary.tested,
        "examples_per_student": sum(max(20, round(n * scale)) for n in DEV_SIZES.values()),
        "seeds": args.seeds,
        "resamples": resamples,
        "test_resamples": tests,
        "before_s_extrapolated": round(before_s, 2),
        "before_cpu_s_extrapolated": round(before_cpu_s, 2),
        "after_s": round(after_s, 2),
        "after_cpu_s": round(after_cpu_s, 2),
        "speedup_wall": round(before_s / after_s, 1) if after_s else None,
        "speedup_cpu": round(before_cpu_s / after_cpu_s, 1) if after_cpu_s else None,
        "claims_s": round(claims_s, 2),
        "claims_notes": len(notes),
        "tidy_rows": tidy_rows,
        "tidy_out_rows": len(tidy),
        "store_to_tidy_s": round(tidy_s, 3),
        "store_to_tidy_cpu_s": round(tidy_cpu_s, 3),
    }
    measured_on["load_1min_after"] = round(os.getloadavg()[0], 2)
    payload = {"machine": measured_on, "threads": args.threads, "figures": figures}
    for name, value in figures.items():
        print(f"{name:>24}: {value}")
    print(json.dumps(payload["machine"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
