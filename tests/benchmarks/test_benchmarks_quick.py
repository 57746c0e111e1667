"""The benchmark scripts run end to end in their smallest mode and write every key of their JSON reports.

They are measurements, not tests: the figures are not asserted, only that every script still runs against the
current core, reports every ratio as a positive number, and (vs_textbrewer) that both frameworks compute the same
first-batch loss.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_script(name: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{name}.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )  # no wall-clock limit: a loaded machine makes a script slow, not wrong
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def positive(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def test_grid_throughput_smoke(tmp_path: Path) -> None:
    report = run_script("grid_throughput", tmp_path)
    config = report["config"]
    # the smoke is tiny: 2 trials, 2 steps of batch 4 x 16 tokens, one tiny random teacher
    assert (config["trials"], config["steps"], config["batch_size"], config["length"]) == (2, 2, 4, 16)
    assert report["teachers"] == ["tiny"]
    # every mode of the smoke runs in one worker process: one import of torch and transformers, not five
    assert config["modes_per_worker"] == 5
    for teacher in report["teachers"]:
        figures = report[teacher]
        for ratio in ("per_trial_over_grouped", "grouped_over_lower_bound"):
            # wall-second and CPU-second ratios
            assert positive(figures[ratio]) and positive(figures[f"{ratio}_cpu"])
        for mode in ("per_trial", "grouped", "lower_bound"):
            assert positive(figures[mode]["grid_step_s"]) and figures[mode]["peak_rss_mb"] > 100
            assert positive(figures[mode]["grid_step_cpu_s"])
            # every step trained on batches padded to the configured width (the benchmark's fixed shapes)
            assert figures[mode]["fixed_width_batches"] > 0
    # the seeds case: N seeds x M students as one job (seeds: N) against one job per seed
    assert config["cases"] == ["grid", "seeds"] and (config["seeds"], config["seed_students"]) == (2, 2)
    for teacher in report["teachers"]:
        seeds = report["seeds"][teacher]
        assert positive(seeds["per_seed_jobs_over_one_job"]) and positive(
            seeds["per_seed_jobs_over_one_job_cpu"]
        )
        assert seeds["seeds_one_job"]["jobs"] == 1 and seeds["seeds_per_seed_jobs"]["jobs"] == 2
        for mode in ("seeds_one_job", "seeds_per_seed_jobs"):
            assert positive(seeds[mode]["grid_step_s"]) and seeds[mode]["peak_rss_mb"] > 100


def test_vs_textbrewer_smoke(tmp_path: Path) -> None:
    pytest.importorskip("textbrewer")
    report = run_script("vs_textbrewer", tmp_path)
    assert report["config"][
        "one_worker"
    ]  # the smoke runs both frameworks and the interleaved run in one worker
    assert positive(report["time_ratio"]) and positive(report["memory_ratio"])
    for name in ("hidden", "attention"):
        losses = report[name]["first_batch_loss"]
        # the same formulas on the same weights and batch: equal up to float rounding
        assert losses["kdgrid"] == pytest.approx(losses["textbrewer"], rel=1e-5)


def test_padding_smoke(tmp_path: Path) -> None:
    report = run_script("padding", tmp_path)
    for task in report["tasks"]:
        figures = report[task]
        # fixed 128-token padding computes more tokens than length-grouped batches of the same examples
        assert figures["padded_token_ratio"] > 1
        assert figures["fixed"]["real"] == figures["grouped"]["real"] == figures["dynamic"]["real"]
        assert positive(figures["step_time_ratio"])


def test_batched_students_smoke(tmp_path: Path) -> None:
    report = run_script("batched_students", tmp_path)
    assert report["config"]["one_worker"]  # the smoke runs the check and every timing in one worker process
    # one vmap'd step for all students = each student's own step (dropout off), and dropout masks differ
    assert report["check_ok"] and report["check"]["dropout_streams_differ"]
    for row in report["runs"]:
        assert positive(row["sequential_over_batched"])
        assert row["sequential"]["peak_rss_mb"] > 100 and row["batched"]["peak_rss_mb"] > 100


def test_store_read_smoke(tmp_path: Path) -> None:
    report = run_script("store_read", tmp_path)
    assert positive(report["cold_over_warm"]) and positive(report["cold_over_warm_with_arrivals"])
    rows, arrivals = report["config"]["rows"], report["config"]["arrivals"]
    for name, read in report["reads"].items():
        # every read returns every row: the cache never loses or duplicates one
        assert read["rows"] == (rows + arrivals if "arrivals" in name or "compact" in name else rows), name
        assert positive(read["s"])


def test_memory_estimate_smoke(tmp_path: Path) -> None:
    report = run_script("memory_estimate", tmp_path)
    assert [run["students"] for run in report["runs"]] == report["config"]["sizes"] == [1, 2]
    for run in report["runs"]:
        assert positive(run["estimate_over_measured"]) and run["measured_mb"] > 0 and run["estimate_mb"] > 0
    # one more student costs more, in the estimate and in the measurement
    assert report["runs"][1]["estimate_mb"] > report["runs"][0]["estimate_mb"]


def test_table_stats_smoke(tmp_path: Path) -> None:
    report = run_script("table_stats", tmp_path)
    figures = report["figures"]
    assert figures["cells"] > 0 and figures["tested"] > 0
    for key in ("after_s", "before_s_extrapolated", "speedup_cpu", "speedup_wall", "store_to_tidy_s"):
        assert positive(figures[key]), key
    assert figures["tidy_out_rows"] > 0


def test_report_size_smoke(tmp_path: Path) -> None:
    report = run_script("report_size", tmp_path)
    # every row of the synthetic store gets its page, and every arrival its own on the update
    assert report["trial_pages"] == report["rows"] and report["arrival_pages"] == report["arrivals"]
    assert positive(report["full_s"]) and positive(report["report_mb"])
    # the explore and pivot pages carry every configuration of the sweep (one seed each here: one per trial)
    done = sum(i % 50 != 49 for i in range(report["rows"] + report["arrivals"]))  # one in 50 failed
    assert report["configurations"] == done and report["references"] > 0
    if report["explore_open"] is not None:  # Chromium installed: the pages drew what they counted
        assert report["explore_open"]["counted"].startswith(f"{done} of {done} configurations")


def test_reaugkd_latency_smoke(tmp_path: Path) -> None:
    report = run_script("reaugkd_latency", tmp_path)
    config = report["config"]
    assert (config["mode"], config["batch_size"], config["length"], config["sizes"]) == (
        "smoke",
        4,
        16,
        [200, 2000],
    )
    assert positive(report["student_ms_per_batch"])
    assert sorted(report["bases"]) == ["200", "2000"]  # two knowledge-base sizes, side by side in one run
    for entry in report["bases"].values():
        assert 0.0 <= entry["recall_at_k"] <= 1.0 and entry["index_build_s"] >= 0
        for how in ("hnsw", "exact"):
            figures = entry[how]
            assert positive(figures["retrieval_ms_per_batch"]) and positive(figures["overhead"])
            assert figures["with_retrieval_ms_per_batch"] > report["student_ms_per_batch"]


def test_threads_smoke(tmp_path: Path) -> None:
    report = run_script("threads", tmp_path)
    for mode in ("torch_default", "kdgrid_rule"):
        assert positive(report[mode]["step_wall_s"]) and positive(report[mode]["step_cpu_s"])
        assert report[mode]["threads_per_process"] >= 1
    assert positive(report["default_over_rule_wall"]) and positive(report["default_over_rule_cpu"])


def test_diagnosis_false_alarms_smoke(tmp_path: Path) -> None:
    report = run_script("diagnosis_false_alarms", tmp_path)
    assert report["learned"] + report["not_learned"] + report["failed"] == report["config"]["trials"] == 8
    assert report["config"]["teacher_dev"]["validation"]["accuracy"] > 0.75  # the teacher learned the task


def test_ssm_length_smoke(tmp_path: Path) -> None:
    report = run_script("ssm_length", tmp_path)
    assert report["config"]["lengths"] == [64, 128] and report["config"]["mode"] == "smoke"
    for kind in ("ssm", "transformer"):
        assert sorted(report["rows"][kind], key=int) == ["64", "128"]
        for row in report["rows"][kind].values():
            assert positive(float(row["ms"])) and row["params"] > 0
    assert report["rows"]["ssm"]["64"]["student"].startswith("ssm-")
    for ratio in report["ratios"].values():  # side by side: every length has both, and their ratios
        assert positive(ratio["time"])


def test_analysis_latency_smoke(tmp_path: Path) -> None:
    figures = run_script("analysis_latency", tmp_path)["figures"]
    assert figures["trials"] == 8  # 2 knowledge types x 2 learning rates x 2 seeds
    assert positive(figures["tables --sweep"]["median_s"])
    for build in [*figures["report (first build)"], figures["report (nothing new)"]]:
        # the time the report prints is its own command's: never more than the process's wall time
        assert positive(build["printed_s"]) and build["printed_s"] <= build["wall_s"]
    exported = figures["export mlflow"]
    assert exported["runs"] == 8 and positive(exported["runs_per_s"]) and positive(exported["again_s"])


def test_method_failures_smoke(tmp_path: Path) -> None:
    report = run_script("method_failures", tmp_path)
    assert report["smoke"] and report["teacher_dev"]["validation"]["accuracy"] > 0.75  # the teacher learned
    runs = {row["run"]: row for row in report["rows"]}
    # every case of the full run, at its smallest: DOT against SGD at the study's lr, the curriculum in its
    # paper form at the study's boundaries beside no curriculum, AdamW, and the untrained probe
    assert list(runs) == ["untrained BERT-tiny (seed 0)", "adamw lr 1e-3, Last-1", "dot lr 0.05",
                          "sgd-momentum lr 0.05", "no curriculum, Dilatation",
                          "curriculum [0.2, 0.4] paper"]  # fmt: skip
    for name, row in runs.items():
        assert len(row["cls_variance"]) == 3  # the embeddings and BERT-tiny's two layers
        if name.startswith("untrained"):
            continue
        assert row["status"] == "done" and 0 <= row["accuracy"] <= 1
        assert positive(row["soft_end"]) and positive(row["hard_end"])
    curriculum = runs["curriculum [0.2, 0.4] paper"]
    assert curriculum["last_stage_step"] > 0  # the classifier stage starts after the layer stages


def test_masked_teacher_signal_smoke(tmp_path: Path) -> None:
    report = run_script("masked_teacher_signal", tmp_path)
    assert report["smoke"] and len(report["tasks"]) == 1
    task = report["tasks"][0]
    assert task["sentences"] == 256
    variants = task["variants"]
    assert sorted(variants) == ["mask_teacher", "maskedkd_paper", "random 50%", "whole"]
    assert variants["whole"]["agrees_with_whole"] == 1.0
    assert variants["whole"]["teacher_accuracy"] > 0.75  # the fine-tuned teacher on its whole input
    for figures in variants.values():
        assert all(0 <= value <= 1 for value in figures.values())
    # masking half the input at random takes evidence away from a teacher that reads a marker word
    assert variants["random 50%"]["agrees_with_whole"] < 1.0
