"""run_job: group == solo (bitwise), resume == uninterrupted, divergence fails alone, auto weights, validation."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape
from kdgrid.errors import ConfigError
from kdgrid.result import TrialResult
from kdgrid.trial import Trial
from tests.preemption import preempted_in_epoch
from tests.teachers import SMALL_TEACHER_SHAPE
from tests.tiny_trials import tiny_trial as make_trial

TEACHER_SHAPE = SMALL_TEACHER_SHAPE  # the shape of the `teacher` fixture (tests/conftest.py)


pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def run(
    trials: list[Trial], **kwargs: object
) -> tuple[list[TrialResult], dict[str, dict[str, torch.Tensor]]]:
    from kdgrid.core.training.train import run_job

    weights: dict[str, dict[str, torch.Tensor]] = {}

    def keep(trial: Trial, model: torch.nn.Module) -> None:
        weights[trial.trial_id] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    return run_job(trials, device="cpu", on_model=keep, **kwargs), weights  # type: ignore[arg-type]


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_trial_in_a_group_equals_the_trial_alone(teacher: str) -> None:
    target = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last")
    mates = [
        make_trial(teacher),  # soft labels only: the teacher pass captures less for it
        make_trial(teacher, knowledge=("attention_ce_mean",), strategy="First", student="w48-l3-h4-f96"),
        make_trial(teacher, knowledge=("value_relation",), strategy="Last-1", lr=5e-3),
    ]
    group, group_weights = run([mates[0], target, *mates[1:]])
    alone, alone_weights = run([target])
    assert all(r.status == "done" for r in group + alone)
    assert group[1].trial == target
    assert group[1].curve == alone[0].curve  # per-epoch scores and loss terms, exactly
    assert group[1].scores == alone[0].scores and group[1].loss_terms == alone[0].loss_terms
    assert_same_weights(group_weights[target.trial_id], alone_weights[target.trial_id])
    # Mates really trained differently (the invariant is not trivially met by identical students).
    assert not torch.equal(
        group_weights[mates[0].trial_id]["classifier.weight"],
        group_weights[target.trial_id]["classifier.weight"],
    )


def test_a_trial_reading_teacher_targets_computed_by_a_mate_equals_the_trial_alone(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The teacher-side loss targets (Gram products, head-mean attention, relations, ...) are computed by the
    first student of a batch and read by the others: the readers train exactly as they would alone."""
    from kdgrid.core.teacher import targets as teacher_targets

    memos: list[teacher_targets.TeacherTargets] = []
    original_init = teacher_targets.TeacherTargets.__init__

    def recording_init(self: teacher_targets.TeacherTargets) -> None:
        original_init(self)
        memos.append(self)

    monkeypatch.setattr(teacher_targets.TeacherTargets, "__init__", recording_init)
    knowledge = ("attention_ce_mean", "cka", "cos", "gram", "key_relation", "mmd")
    first = make_trial(teacher, knowledge=knowledge, strategy="Last", lr=4e-3)
    target = make_trial(teacher, knowledge=knowledge, strategy="Last")
    group, group_weights = run([first, target])
    in_group = [(memo.hits, memo.misses) for memo in memos]
    memos.clear()
    alone, alone_weights = run([target])
    # Per batch, the second student of the group computes nothing new: every look-up it makes is a hit.
    assert len(in_group) == len(memos) > 0 and all(memo.misses > len(knowledge) for memo in memos)
    assert in_group == [(2 * memo.hits + memo.misses, memo.misses) for memo in memos]
    assert all(r.status == "done" for r in group + alone)
    assert group[1].curve == alone[0].curve
    assert_same_weights(group_weights[target.trial_id], alone_weights[target.trial_id])


def test_the_runtime_places_models_with_the_attention_kernel_of_its_device() -> None:
    from kdgrid.core.training.train import make_runtime

    model = BertForSequenceClassification(bert_config(TEACHER_SHAPE, 2))
    model.config._attn_implementation = "sdpa"
    placed = make_runtime("cpu").place(model)
    assert placed.config._attn_implementation == "eager" and next(placed.parameters()).device.type == "cpu"


def test_result_rows_are_filled(teacher: str) -> None:
    trial = make_trial(teacher, knowledge=("hidden_mse", "attention_mse_sum"), strategy="Dilatation")
    progress: list[tuple[int, int]] = []
    (result,), _ = run([trial], on_step=lambda done, total: progress.append((done, total)))
    steps = len(progress) // 2  # 96 examples in batches of 16 = 6 batches per epoch, 2 epochs
    assert progress == [(step, 2 * steps) for step in range(1, 2 * steps + 1)] and steps == 6
    shape = StudentShape(layers=2, width=32, heads=2, ffn=64)
    assert result.status == "done" and result.best_epoch in (1, 2)
    assert [c["epoch"] for c in result.curve] == [1, 2]
    assert set(result.scores["validation"]) == {"accuracy", "f1"}
    assert result.last_scores == result.curve[-1]["scores"]
    assert result.layer_pairs == [(1, 1), (2, 3)]
    assert set(result.loss_terms) == {
        "soft",
        "hard",
        "hidden_mse@1-1",
        "hidden_mse@2-3",
        "attention_mse_sum@1-1",
        "attention_mse_sum@2-3",
    }
    assert result.weights == {k: (0.1 if k == "hard" else 1.0) for k in result.loss_terms}
    assert result.student_params == shape.param_count(2)
    assert result.student_flops == shape.flops_per_sequence(24, 2)
    assert result.device == "cpu" and result.started_at and result.ended_at and result.wall_time_s > 0
    assert result.extra["projection_params"] == 2 * (32 * 64 + 64)  # two hidden_mse projections 32 -> 64
    teacher_params = sum(
        p.numel() for p in BertForSequenceClassification.from_pretrained(teacher).parameters()
    )
    assert result.extra["teacher_params"] == teacher_params
    # A teacher without kdgrid's teacher.json (e.g. from the Hub) is evaluated once per job for the tables.
    assert set(result.extra["teacher_scores"]["validation"]) == {"accuracy", "f1"}
    assert result.extra["latency_ms"] > 0  # Table 2's latency: one sequence of max_length tokens, batch 1
    assert result.extra["latency_sharing"] == "exclusive"  # run here, its device to itself


def test_a_teacher_evaluation_error_is_recorded_and_the_trained_students_kept(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kdgrid.core.job.loaded_job as job_module
    import kdgrid.core.model.evaluate as evaluation
    import kdgrid.core.training.student as student_module

    real_evaluate = evaluation.evaluate_dev_sets
    teacher_layers = TEACHER_SHAPE.layers

    def failing_for_the_teacher(model: torch.nn.Module, *args: object, **kwargs: object) -> object:
        if model.config.num_hidden_layers == teacher_layers:
            raise RuntimeError("teacher evaluation broke")
        return real_evaluate(model, *args, **kwargs)

    for module in (job_module, student_module):  # the teacher's evaluation (job) and the students' (student)
        monkeypatch.setattr(module, "evaluate_dev_sets", failing_for_the_teacher)
    results, _ = run([make_trial(teacher, epochs=1), make_trial(teacher, epochs=1, lr=1e-3)])
    assert [r.status for r in results] == ["done", "done"]
    for result in results:
        assert "teacher_scores" not in result.extra and result.scores
        assert result.extra["teacher_scores_error"] == "RuntimeError: teacher evaluation broke"


def test_resume_from_an_epoch_checkpoint_equals_an_uninterrupted_run(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    trials = [
        make_trial(teacher, knowledge=("cos",), strategy="First", beta="auto", epochs=3),
        make_trial(teacher, epochs=3, seed=3, lr=1e-3),
    ]
    straight, straight_weights = run(trials)

    with preempted_in_epoch(monkeypatch, 2):
        run(trials, checkpoint_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == sorted(f"{t.trial_id}.pt" for t in trials)
    resumed, resumed_weights = run(trials, checkpoint_dir=tmp_path)
    for a, b in zip(straight, resumed, strict=True):
        assert b.extra["resumed_from_epoch"] == 2
        assert a.curve == b.curve and a.scores == b.scores and a.weights == b.weights
        assert_same_weights(straight_weights[a.trial.trial_id], resumed_weights[b.trial.trial_id])
    assert list(tmp_path.glob("*.pt")) == []  # finished trials drop their checkpoints


def test_a_trial_fenced_out_writes_no_checkpoint_keeps_no_student_and_leaves_the_takers_checkpoint(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trial = make_trial(teacher, epochs=3)
    asked: list[str] = []

    def lost(trial_id: str) -> str:
        asked.append(trial_id)
        return "taken over by another run"

    with preempted_in_epoch(monkeypatch, 1):
        run([trial], checkpoint_dir=tmp_path, fence=lost)
    assert asked == [trial.trial_id] and list(tmp_path.iterdir()) == []  # epoch 1's checkpoint: not even a temp
    with preempted_in_epoch(monkeypatch, 2):  # the run that took the trial over saves epochs 1 and 2
        run([trial], checkpoint_dir=tmp_path, fence=lambda _: None)
    takers = tmp_path / f"{trial.trial_id}.pt"
    saved = takers.read_bytes()
    # the stalled holder wakes up at epoch 2 (loading the taker's checkpoint), trains to the end, writes nothing
    (result,), kept = run([trial], checkpoint_dir=tmp_path, fence=lost)
    assert result.status == "done" and result.extra["resumed_from_epoch"] == 2
    assert kept == {}  # its trained student is handed to no one to keep (`on_model`)
    assert takers.read_bytes() == saved and [p.name for p in tmp_path.iterdir()] == [takers.name]  # not removed
    (result,), kept = run([trial], checkpoint_dir=tmp_path, fence=lambda _: None)
    assert result.status == "done" and list(kept) == [trial.trial_id] and list(tmp_path.iterdir()) == []


def test_a_diverging_trial_fails_alone(teacher: str) -> None:
    healthy = make_trial(teacher, knowledge=("pkd",), strategy="Last")
    infinite = make_trial(teacher, knowledge=("value_relation",), strategy="Last-1", beta=math.inf)
    exploding = make_trial(teacher, lr=1e10)
    seen: list[str] = []
    results, _ = run([infinite, healthy, exploding], on_result=lambda r: seen.append(r.trial.trial_id))
    bad, good, boom = results
    assert good.status == "done" and len(good.curve) == 2
    assert bad.status == "failed" and bad.error_type == "DivergenceError"
    assert bad.extra["diverged_at_step"] == 1
    assert bad.extra["diverged_term"] == "value_relation@2-3" and bad.extra["diverged_pair"] == [2, 3]
    assert "value_relation@2-3" in bad.error_message and "(student 2, teacher 3)" in bad.error_message
    assert boom.status == "failed" and boom.error_type == "DivergenceError"
    assert seen[0] == infinite.trial_id and sorted(seen) == sorted(
        t.trial_id for t in (infinite, healthy, exploding)
    )
    solo, _ = run([healthy])
    assert solo[0].curve == good.curve  # the failures did not disturb it


def test_auto_weights_bring_each_term_to_a_tenth_of_the_soft_loss(teacher: str) -> None:
    trial = make_trial(teacher, knowledge=("attention_ce_mean",), strategy="Last", beta="auto", epochs=1)
    (result,), _ = run([trial])
    calibration = result.extra["auto_calibration"]
    assert calibration["batches"] == 6  # min(10 warm-up batches, 96 / 16 batches per epoch)
    means = calibration["means"]
    for term in ("attention_ce_mean@1-2", "attention_ce_mean@2-3"):
        assert result.weights[term] == pytest.approx(0.1 * means["soft"] / means[term])
        assert result.weights[term] * means[term] == pytest.approx(0.1 * means["soft"])


def test_a_bad_trial_fails_without_stopping_its_mates(teacher: str) -> None:
    good = make_trial(teacher, epochs=1)
    bad = make_trial(teacher, epochs=1, knowledge=("hidden_mse",), strategy="First", projection="none")
    results, _ = run([bad, good])
    assert results[0].status == "failed" and results[0].error_type == "ConfigError"
    assert results[1].status == "done"


def test_validate_trials_reports_every_problem_before_training(teacher: str) -> None:
    from kdgrid.core.training.train import validate_trials

    plans = validate_trials([make_trial(teacher, knowledge=("key_relation",), strategy="Dilatation")])
    assert plans[0].pairs == [(1, 1), (2, 3)] and plans[0].teacher.shape == TEACHER_SHAPE
    cases = {
        "projection is 'none'": make_trial(
            teacher, knowledge=("hidden_mse",), strategy="First", projection="none"
        ),
        "unknown task": make_trial(teacher, task="no-such-task"),
        "unknown matching strategy": make_trial(teacher, knowledge=("cos",), strategy="Sideways"),
        "needs a `strategy`": make_trial(teacher, knowledge=("cos",)),
        "unknown knowledge": make_trial(teacher, knowledge=("telepathy",), strategy="First"),
        "unknown student": make_trial(teacher, student="bert-enormous"),
        "unknown init": make_trial(teacher, init="magic"),
        "lr=": make_trial(teacher, lr=-1.0),
        "relation_heads=3": make_trial(
            teacher, knowledge=("value_relation",), strategy="First", relation_heads=3
        ),
        "has no option": make_trial(
            teacher, knowledge=("pkd",), strategy="First", options={"pkd.colour": "red"}
        ),
    }
    for message, trial in cases.items():
        with pytest.raises(ConfigError, match=message):
            validate_trials([trial])
    with pytest.raises(ConfigError, match=r"teacher '/no/such/teacher-dir' is neither"):
        validate_trials([dataclasses.replace(make_trial(teacher), teacher="/no/such/teacher-dir")])
    with pytest.raises(ConfigError, match=r"must agree on"):
        validate_trials([make_trial(teacher), make_trial(teacher, seed=4)])
    # A student deeper than the teacher cannot be matched layer by layer.
    with pytest.raises(ConfigError, match=r"First"):
        validate_trials([make_trial(teacher, student="w32-l5-h2-f64", knowledge=("cos",), strategy="First")])
    # Every problem of a job is listed at once, each with its trial id.
    bad = [make_trial(teacher, lr=-1.0), make_trial(teacher, temperature=0.0)]
    with pytest.raises(ConfigError) as caught:
        validate_trials(bad)
    assert all(t.trial_id in str(caught.value) for t in bad)


def test_gradient_checkpointing_trains_the_same_student(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wide students recompute activations in backward; knowledge on captured Q/K/V must still reach them."""
    trial = make_trial(teacher, knowledge=("query_relation",), strategy="Last", epochs=1)
    (plain,), plain_weights = run([trial])
    monkeypatch.setenv("KDGRID_CHECKPOINT_WIDTH", "32")
    (checkpointed,), checkpointed_weights = run([trial])
    assert checkpointed.extra.get("gradient_checkpointing") and "gradient_checkpointing" not in plain.extra
    assert checkpointed.loss_terms == pytest.approx(plain.loss_terms, rel=1e-5)
    for key, value in plain_weights[trial.trial_id].items():
        torch.testing.assert_close(checkpointed_weights[trial.trial_id][key], value, rtol=1e-4, atol=1e-6)


def test_max_dev_samples_cuts_the_dev_sets_the_students_are_scored_on(teacher: str) -> None:
    from kdgrid.core.job.loaded_job import load_job
    from kdgrid.core.training.train import make_runtime

    whole = load_job(make_trial(teacher), make_runtime("cpu"))
    cut = load_job(make_trial(teacher, options={"max_dev_samples": 5}), make_runtime("cpu"))
    assert len(cut.tokenized["validation"]) == 5 < len(whole.tokenized["validation"])
    assert len(cut.tokenized["train"]) == len(whole.tokenized["train"])


def record_batches(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, list[torch.Tensor]], dict[str, Any]]:
    """Patch the job loop's `train_step` to record, per trial id, the input ids of every batch its student
    trained on (in order) and its first parameter before its first step; the job's tokenized train split too."""
    import kdgrid.core.training.train as train

    seen: dict[str, list[torch.Tensor]] = {}
    facts: dict[str, Any] = {}
    original = train.train_step

    def recording(run, job, batch, *args, **kwargs):  # type: ignore[no-untyped-def]
        trial_id = run.trial.trial_id
        if trial_id not in seen:
            facts[trial_id] = next(run.model.parameters()).detach().clone()
        facts["train"] = job.tokenized["train"]
        seen.setdefault(trial_id, []).append(batch["input_ids"].clone())
        return original(run, job, batch, *args, **kwargs)

    monkeypatch.setattr(train, "train_step", recording)
    return seen, facts


def expected_batches(split: Any, batch_size: int, seed: int, epochs: int) -> list[torch.Tensor]:
    from kdgrid.core.data.batching import train_batches

    return [b["input_ids"] for e in range(epochs) for b in train_batches(split, batch_size, seed, e)]


def assert_same_batches(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_seeds_sharing_a_data_seed_train_in_one_job_on_identical_batches(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.grid.plan import plan_jobs

    one, two = (make_trial(teacher, seed=s, options={"data_seed": 7}) for s in (1, 2))
    assert plan_jobs([one, two]) == [sorted([one, two], key=lambda t: t.trial_id)]  # one job
    seen, facts = record_batches(monkeypatch)
    results, weights = run([one, two])
    assert all(r.status == "done" for r in results)
    # the same batches in the same order: those data_seed 7 draws, not those of either student seed
    assert_same_batches(seen[one.trial_id], seen[two.trial_id])
    assert_same_batches(seen[one.trial_id], expected_batches(facts["train"], 16, 7, 2))
    assert not all(
        torch.equal(x, y)
        for x, y in zip(seen[one.trial_id], expected_batches(facts["train"], 16, 1, 2), strict=True)
    )
    # ... but each student starts from its own seed
    assert not torch.equal(facts[one.trial_id], facts[two.trial_id])
    assert results[0].loss_terms != results[1].loss_terms
    assert not torch.equal(*(next(iter(weights[t.trial_id].values())) for t in (one, two)))
    # and trains exactly as it would alone (a paired design changes nothing for the student itself)
    (alone,), alone_weights = run([two])
    assert alone.curve == results[1].curve
    assert_same_weights(alone_weights[two.trial_id], weights[two.trial_id])


def test_without_data_seed_the_data_order_is_the_seed_s_as_before(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kdgrid.grid.plan import plan_jobs

    one, two = (make_trial(teacher, seed=s, epochs=1) for s in (1, 2))
    assert len(plan_jobs([one, two])) == 2  # different seeds, different data orders: two jobs
    with pytest.raises(ConfigError, match=r"must agree on .*data-order seed"):
        run([one, two])
    seen, facts = record_batches(monkeypatch)
    for trial, seed in ((one, 1), (two, 2)):
        run([trial])
        assert_same_batches(seen[trial.trial_id], expected_batches(facts["train"], 16, seed, 1))
