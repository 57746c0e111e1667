"""The a-priori cost of a sweep: FLOPs from the shapes, at the demo's measured speed or the one given."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kdgrid.core.model.shapes import STUDENTS
from kdgrid.core.trial_rules import teacher_shape
from kdgrid.errors import ConfigError
from kdgrid.grid.prior_cost import (
    DEMO_SECONDS,
    GLUE_TRAIN_EXAMPLES,
    SPEED_ENV,
    corpus_train_size,
    job_flops,
    prior_cost,
    speed,
    train_examples,
)
from kdgrid.sweep_plan import load_named_sweep, plan_sweep_jobs
from kdgrid.trial import Trial


def test_forward_flops_of_bert_tiny_by_hand() -> None:
    # per layer 2 x (4 n d^2 + 2 n d f + 2 n^2 d) with n=64, d=128, f=512; 2 layers; pooler + classifier 2 (d^2 + 2d)
    per_layer = 2 * (4 * 64 * 128**2 + 2 * 64 * 128 * 512 + 2 * 64**2 * 128)
    assert per_layer == 27_262_976
    assert STUDENTS["bert-tiny"].flops_per_sequence(64) == 2 * per_layer + 2 * (128 * 128 + 128 * 2)


def test_a_job_costs_one_teacher_pass_and_three_student_passes_per_sequence() -> None:
    trials = [
        Trial(task="rte", teacher="bert-base", student=student, epochs=2, max_length=16, max_train_samples=10)
        for student in ("bert-tiny", "bert-mini")
    ]
    teacher = teacher_shape("bert-base", "rte")
    assert teacher is not None
    students = sum(STUDENTS[name].flops_per_sequence(16) for name in ("bert-tiny", "bert-mini"))
    assert job_flops(trials) == 2 * 10 * (teacher.flops_per_sequence(16) + 3 * students)


def test_training_examples_glue_synthetic_capped_and_unknown() -> None:
    assert (
        train_examples(Trial(task="mnli", teacher="bert-base", student="bert-tiny"))
        == GLUE_TRAIN_EXAMPLES["mnli"]
    )
    capped = Trial(task="mnli", teacher="bert-base", student="bert-tiny", max_train_samples=500)
    assert train_examples(capped) == 500
    assert train_examples(Trial(task="synthetic-single-binary-n96", teacher="t", student="bert-tiny")) == 96


def test_an_offline_corpus_is_priced_from_its_recorded_split_once_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    corpus_train_size.cache_clear()
    local = Trial(task="uncertainty", teacher="minilm-l6", student="bert-tiny")
    assert train_examples(local) is None  # not fetched: its size needs its files
    assert prior_cost([[local]]).unpriced_trials == 1
    corpus_train_size.cache_clear()
    folder = tmp_path / "uncertainty"
    folder.mkdir()
    for name in ("train.csv", "dev.csv"):
        (folder / name).write_text("text,label\n")
    (folder / "split.json").write_text(json.dumps({"train_size": 1957, "dev_size": 1000}))
    assert train_examples(local) == 1957
    assert train_examples(Trial(task="uncertainty", teacher="minilm-l6", student="bert-tiny", max_train_samples=500)) == 500
    assert prior_cost([[local]]).unpriced_trials == 0
    corpus_train_size.cache_clear()


def test_the_speed_is_the_demos_unless_given_and_a_bad_value_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SPEED_ENV, raising=False)
    demo = load_named_sweep("demo")
    jobs = plan_sweep_jobs([p.trial for p in demo.trials], 0, None)
    assert prior_cost(jobs).seconds == pytest.approx(DEMO_SECONDS)  # the demo's own figure, by construction
    rate, basis = speed()
    assert "demo" in basis and rate > 0
    monkeypatch.setenv(SPEED_ENV, "1e12")
    assert speed() == (1e12, f"{SPEED_ENV}=1e12")
    cost = prior_cost(jobs)
    assert cost.seconds == pytest.approx(cost.flops / 1e12)
    for bad in ("fast", "0", "-1"):
        monkeypatch.setenv(SPEED_ENV, bad)
        with pytest.raises(ConfigError, match=SPEED_ENV):
            speed()


def test_plan_prices_a_sweep_before_any_timing_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.commands.test_sweep_commands import as_json, invoke

    monkeypatch.setenv(SPEED_ENV, "1e9")
    plan = as_json("plan", "table3_teacher", "--store", tmp_path / "store")
    assert plan["estimate"]["seconds"] is None  # no timed rows yet
    prior = plan["prior_estimate"]
    assert prior["unpriced_trials"] == 0 and prior["flops"] > 0
    assert prior["seconds"] == pytest.approx(prior["flops"] / 1e9, rel=1e-3)
    code, out = invoke("plan", "table3_teacher", "--store", tmp_path / "store")
    assert code == 0 and re.search(r"\d+h\d\dm a priori", out) and "a-priori estimate: " in out
