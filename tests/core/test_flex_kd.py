"""Flex-KD (kdgrid's reading of Saadi & Wang, arXiv 2507.10155): the importance scores and the selection equal a
reference computed example by example from the definition, the correlation loss equals a numpy reference, the
scores are computed once per content and read back from the cache, the rules refuse what cannot work, and a
trial trains through run_job, records its selection and resumes from an epoch checkpoint bit for bit."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from kdgrid.core.losses import compute_knowledge
from kdgrid.core.methods.flex_kd import importance
from kdgrid.core.methods.flex_kd.importance import job_scores, select_dimensions
from kdgrid.core.methods.flex_kd.loss import correlation_loss
from kdgrid.core.training.train import load_job, make_runtime
from kdgrid.core.trial_rules import trial_problems
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial
from tests.core.test_train_methods import run
from tests.preemption import preempted_in_epoch
from tests.tiny_trials import tiny_trial

pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def flex_trial(teacher: str, **overrides: object) -> Trial:
    config: dict[str, object] = dict(knowledge=("flex_kd",), strategy="Last", soft_weight=1.0, alpha=0.0)
    return tiny_trial(teacher, **{**config, **overrides})


# --- the reference: the definition, one example at a time, by plain autograd --------------------------------------


def reference_scores(model: torch.nn.Module, split, layers: list[int], examples: int) -> dict[int, np.ndarray]:
    """s_j = sum_n sum_t |dL_n/dh_{n,t,j}| / #tokens, each example alone (no padding), the hidden states' .grad
    after an ordinary backward pass through a copy whose parameters take gradients."""
    model = copy.deepcopy(model).float().eval()
    for p in model.parameters():
        p.requires_grad_(True)
    totals = {layer: np.zeros(model.config.hidden_size) for layer in layers}
    tokens = 0
    for n in range(examples):
        start, end = int(split.offsets[n]), int(split.offsets[n + 1])
        ids = torch.tensor(split.input_ids[start:end], dtype=torch.long)[None]
        types = torch.tensor(split.token_type_ids[start:end], dtype=torch.long)[None]
        out = model(input_ids=ids, token_type_ids=types, output_hidden_states=True)
        for h in out.hidden_states:
            h.retain_grad()
        label = int(split.labels[n])
        loss = -torch.log_softmax(out.logits[0], dim=-1)[label]
        model.zero_grad()
        loss.backward()
        for layer in layers:
            totals[layer] += out.hidden_states[layer].grad[0].abs().sum(0).numpy()
        tokens += end - start
    return {layer: totals[layer] / tokens for layer in layers}


def reference_selection(scores: np.ndarray, width: int) -> list[int]:
    ranked = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
    return sorted(ranked[:width])


def test_importance_scores_and_selection_equal_the_reference(teacher: str) -> None:
    job = load_job(flex_trial(teacher), make_runtime("cpu"))
    split = job.tokenized["train"]
    assert job.label_order is None or job.label_order.is_identity
    examples = 40  # batches of 16 with padding on the implementation's side; one at a time on the reference's
    scores = importance.importance_scores(
        job.teacher_model, importance.pass_split(job, examples), [1, 3], regression=False, device="cpu"
    )
    expected = reference_scores(job.teacher_model, split, [1, 3], examples)
    for layer in (1, 3):
        assert scores[layer].shape == (64,)
        np.testing.assert_allclose(scores[layer], expected[layer], rtol=1e-4, atol=1e-9)
        assert select_dimensions(scores[layer], 32) == reference_selection(expected[layer], 32)
    assert not np.allclose(scores[1], scores[3])  # one score per layer
    assert all(p.grad is None for p in job.teacher_model.parameters())  # the shared teacher is untouched


def test_selection_by_hand() -> None:
    scores = np.array([0.5, 2.0, 0.5, 3.0, 0.1])
    assert select_dimensions(scores, 2) == [1, 3]
    assert select_dimensions(scores, 3) == [0, 1, 3]  # the tie 0.5 / 0.5 goes to the lower index
    assert select_dimensions(scores, 5) == [0, 1, 2, 3, 4]
    for width in (0, 6):
        with pytest.raises(ConfigError, match=r"d_S=.* must be in 1\.\.5"):
            select_dimensions(scores, width)


# --- the loss ---------------------------------------------------------------------------------------------------


def reference_loss(student: np.ndarray, teacher: np.ndarray, mask: np.ndarray) -> float:
    """(1/d) sum_i (1 - Pearson r of column i) over the real tokens, by numpy's corrcoef."""
    s, t = student[mask.astype(bool)], teacher[mask.astype(bool)]
    rhos = [np.corrcoef(s[:, i], t[:, i])[0, 1] for i in range(s.shape[1])]
    return float(np.mean([1 - r for r in rhos]))


def test_the_loss_equals_the_reference_and_ignores_padding() -> None:
    generator = torch.Generator().manual_seed(0)
    student = torch.randn(3, 5, 4, generator=generator, dtype=torch.float64)
    teacher = 0.7 * student + torch.randn(3, 5, 4, generator=generator, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    value = compute_knowledge("flex_kd", {"hidden": student}, {"hidden": teacher}, mask)
    assert value.item() == pytest.approx(reference_loss(student.numpy(), teacher.numpy(), mask.numpy()), rel=1e-5)
    padded = student.clone()
    padded[mask == 0] = 1e6  # padding is left out, never multiplied in
    assert compute_knowledge("flex_kd", {"hidden": padded}, {"hidden": teacher}, mask).item() == pytest.approx(
        value.item(), rel=1e-12
    )
    # an increasing affine copy is perfectly aligned; a negated one is as far as it gets
    rows = torch.randn(50, 3, generator=generator, dtype=torch.float64)
    assert correlation_loss(3 * rows + 1, rows).item() == pytest.approx(0.0, abs=1e-6)
    assert correlation_loss(-rows, rows).item() == pytest.approx(2.0, abs=1e-6)


def test_the_loss_trains_the_student_only_and_refuses_other_widths() -> None:
    student = torch.randn(2, 4, 3, requires_grad=True)
    teacher = torch.randn(2, 4, 3, requires_grad=True)
    mask = torch.ones(2, 4, dtype=torch.long)
    compute_knowledge("flex_kd", {"hidden": student}, {"hidden": teacher}, mask).backward()
    assert student.grad is not None and teacher.grad is None
    with pytest.raises(ConfigError, match=r"flex_kd compares each student dimension"):
        compute_knowledge("flex_kd", {"hidden": student}, {"hidden": torch.randn(2, 4, 5)}, mask)


# --- the cache ---------------------------------------------------------------------------------------------------


def test_scores_are_computed_once_per_content_and_read_back(teacher: str, monkeypatch: pytest.MonkeyPatch) -> None:
    job = load_job(flex_trial(teacher), make_runtime("cpu"))
    importance._MEMO.clear()
    first, cached = job_scores(job, [2, 3], examples=24)
    key = importance.score_key(job, importance.pass_split(job, 24), 3)
    path = importance.cache_path(key)
    assert path.is_file() and path.parent.name == "flex_kd" and not cached
    stored = json.loads(path.read_text())
    assert stored["key"] == key and stored["scores"] == first[3].tolist()

    def no_pass(*args: object, **kwargs: object) -> None:
        raise AssertionError("the importance pass ran again")

    monkeypatch.setattr(importance, "importance_scores", no_pass)
    importance._MEMO.clear()  # from disk, as a later job reads it
    again, cached = job_scores(job, [3, 2], examples=24)
    assert cached and all(np.array_equal(first[layer], again[layer]) for layer in (2, 3))
    monkeypatch.undo()
    # other examples are another content: another key, another pass
    other, cached = job_scores(job, [3], examples=40)
    assert not cached and importance.cache_path(importance.score_key(job, importance.pass_split(job, 40), 3)) != path
    assert not np.array_equal(other[3], first[3])


# --- the rules ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"student": "w128-l2-h2-f256"}, "the student's width 128 must be at most the teacher's 64"),
        ({"strategy": "LAD"}, "needs a fixed strategy, not the learnable 'LAD'"),
        ({"strategy": None}, "needs a strategy"),
        ({"knowledge": ("hidden_mse",), "options": {"flex_kd_examples": 10}}, "needs knowledge 'flex_kd'"),
        ({"options": {"flex_kd_examples": 0}}, "flex_kd_examples=0 is invalid; allowed: an integer >= 1"),
    ],
)
def test_what_cannot_work_is_refused_before_anything_runs(teacher: str, overrides: dict, message: str) -> None:
    problems = trial_problems(flex_trial(teacher, **overrides))
    assert any(message in p for p in problems), problems


def test_plan_refuses_a_student_wider_than_its_teacher(
    teacher: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kdgrid.cli import main

    fields = flex_trial(teacher, student="w128-l2-h2-f256").to_dict()
    fields["options"] = dict(fields["options"])
    path = tmp_path / "wide.yaml"
    path.write_text(json.dumps({"name": "wide", "fixed": fields}))
    with pytest.raises(SystemExit) as exited:
        main(["plan", str(path)])
    assert exited.value.code == 2
    assert "the student's width 128 must be at most the teacher's 64" in capsys.readouterr().err


# --- end to end --------------------------------------------------------------------------------------------------


def test_a_trial_trains_records_its_selection_and_resumes_bit_for_bit(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trial = flex_trial(teacher, options={"flex_kd_examples": 48})
    auto = flex_trial(teacher, options={"flex_kd_examples": 48, "data_seed": 3}, beta="auto", seed=4)
    assert trial_problems(trial) == [] and trial_problems(auto) == []
    importance._MEMO.clear()
    [straight, calibrated], straight_weights = run([trial, auto])  # one pass of the teacher for both
    assert straight.status == "done", straight.error_message
    assert calibrated.status == "done", calibrated.error_message
    assert calibrated.extra["flex_kd"]["selected"] == straight.extra["flex_kd"]["selected"]
    assert calibrated.weights["flex_kd@2-3"] > 0 and calibrated.extra["flex_kd"]["cached"]  # the first one's pass
    record = straight.extra["flex_kd"]
    assert record["examples"] == 48 and record["score_version"] == importance.SCORE_VERSION
    selected = record["selected"]  # strategy Last: student layers 1, 2 <- teacher layers 2, 3
    assert sorted(selected) == ["2", "3"] and selected["2"] != selected["3"]
    job = load_job(trial, make_runtime("cpu"))
    scores, cached = job_scores(job, [2, 3], 48)
    assert cached
    for layer, dims in selected.items():
        assert len(dims) == 32 and dims == select_dimensions(scores[int(layer)], 32)
    assert straight.extra["projection_params"] == 0  # parameter-free
    terms = [c["loss_terms"][name] for c in straight.curve for name in ("flex_kd@1-2", "flex_kd@2-3")]
    assert all(math.isfinite(v) and 0 <= v <= 2 for v in terms)
    assert terms[-1] < terms[1]  # the student's last layer follows the teacher's kept dimensions better

    with preempted_in_epoch(monkeypatch, 1):
        run([trial], checkpoint_dir=tmp_path)
    [resumed], resumed_weights = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 1
    assert resumed.curve == straight.curve and resumed.extra["flex_kd"]["selected"] == selected
    for key, value in straight_weights[trial.trial_id].items():
        assert torch.equal(value, resumed_weights[trial.trial_id][key]), key


def test_a_checkpoint_of_other_dimensions_is_refused(teacher: str) -> None:
    from kdgrid.core.methods.flex_kd.hooks import FlexKdHooks

    hooks = FlexKdHooks(flex_trial(teacher))
    hooks.selected = {3: [0, 2, 5]}
    hooks.restore(hooks.checkpoint_state() or {})  # the same selection: continues
    with pytest.raises(ConfigError, match=r"other teacher dimensions than the importance scores select now"):
        hooks.restore({"selected": {"3": [0, 2, 6]}})
