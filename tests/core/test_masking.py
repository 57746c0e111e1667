"""Masked distillation: which tokens are masked (counts, candidates, random draws, saliency order), the teacher's
[CLS] saliency against transformers' own attention probabilities, the group key, and both sides through run_job."""

from __future__ import annotations

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.methods.masking.masks import (
    candidates_of,
    cls_saliency,
    mask_counts,
    random_positions,
    saliency_positions,
)
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.options import option_problems
from kdgrid.core.teacher.share import TEACHER_BATCHES, TEACHER_BATCHES_SHARED
from kdgrid.core.trial_rules import method_combination_problems as method_problems
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial, group_key
from tests.core.test_train_methods import make_trial, run

IDS = torch.tensor([[101, 7, 8, 9, 10, 11, 102, 0], [101, 20, 21, 102, 30, 102, 0, 0]])
MASK = (IDS != 0).long()
SPECIALS = (0, 101, 102, 103)


pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def test_only_real_non_special_tokens_are_candidates_and_counts_round_half_up() -> None:
    candidates = candidates_of(IDS, MASK, SPECIALS)
    assert candidates.tolist() == [
        [False, True, True, True, True, True, False, False],
        [False, True, True, False, True, False, False, False],
    ]
    assert mask_counts(candidates, 0.3).tolist() == [2, 1]  # floor(1.5 + .5) = 2, floor(0.9 + .5) = 1
    assert mask_counts(candidates, 0.09).tolist() == [0, 0]  # 0.45 and 0.27 round down


def test_random_masking_draws_from_the_candidates_reproducibly_per_key() -> None:
    candidates = candidates_of(IDS, MASK, SPECIALS)
    drawn = random_positions(candidates, 0.5, (4, 0, 1))
    assert drawn.sum(dim=1).tolist() == [3, 2]  # floor(2.5 + .5), floor(1.5 + .5)
    assert not (drawn & ~candidates).any()
    assert torch.equal(drawn, random_positions(candidates, 0.5, (4, 0, 1)))
    draws = {tuple(random_positions(candidates, 0.5, (4, 0, step))[0].tolist()) for step in range(1, 30)}
    assert len(draws) > 3  # another step, another draw


def test_saliency_masks_the_least_attended_candidates_ties_by_position() -> None:
    candidates = candidates_of(IDS, MASK, SPECIALS)
    saliency = torch.tensor(
        [[0.9, 0.3, 0.1, 0.3, 0.5, 0.05, 0.0, 0.0], [0.5, 0.2, 0.2, 0.0, 0.1, 0.0, 0.0, 0.0]]
    )
    chosen = saliency_positions(candidates, 0.5, saliency)
    assert torch.nonzero(chosen[0]).flatten().tolist() == [1, 2, 5]  # 0.05, 0.1, then 0.3 at 1 before 3
    assert torch.nonzero(chosen[1]).flatten().tolist() == [1, 4]  # 0.1 and the first of the 0.2s


def test_cls_saliency_is_the_head_mean_of_the_last_layer_cls_attention() -> None:
    torch.manual_seed(0)
    config = bert_config(StudentShape(layers=2, width=16, heads=4, ffn=32), 2, vocab_size=200)
    config._attn_implementation = "eager"
    model = BertForSequenceClassification(config).eval()
    batch = {"input_ids": IDS, "attention_mask": MASK}
    with torch.no_grad():
        attentions = model(**batch, output_attentions=True).attentions
    expected = attentions[-1][:, :, 0, :].mean(dim=1)
    got = cls_saliency(model, batch)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert torch.all(got[MASK == 0] == 0)


def test_teacher_masking_splits_groups_only_when_set_and_student_masking_never() -> None:
    base = {"task": "sst2", "teacher": "bert-base", "student": "bert-tiny"}
    plain = Trial(**base)
    student = Trial(**base, options={"mask_input": "student", "mask_by": "saliency"})
    teacher = Trial(**base, options={"mask_input": "teacher"})
    teacher_half = Trial(**base, options={"mask_input": "teacher", "mask_fraction": 0.5})
    assert group_key(student) == group_key(plain)
    assert len({group_key(plain), group_key(teacher), group_key(teacher_half)}) == 3
    assert group_key(teacher)[-1] == (("mask_input", "teacher"),)


def test_masking_options_are_checked_with_their_allowed_values() -> None:
    problems = option_problems([("mask_input", "both"), ("mask_by", "salience"), ("mask_fraction", 1.0)], ())
    assert problems == [
        "option mask_input='both' is invalid; allowed: teacher, student",
        "option mask_by='salience' is invalid; allowed: random, saliency, maskedkd; did you mean 'saliency'?",
        "option mask_fraction=1.0 is invalid; allowed: a number in (0, 1) (the share of tokens masked)",
    ]
    stray = Trial("sst2", "bert-base", "bert-tiny", options={"mask_fraction": 0.2})
    assert method_problems(stray) == ["option(s) mask_fraction need mask_input (teacher or student)"]


def test_masking_no_token_trains_exactly_as_without_masking(teacher: str) -> None:
    """A fraction too small to mask any token of these examples: the masked paths run and change nothing."""
    plain = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", epochs=1)
    for side in ("student", "teacher"):
        masked = make_trial(
            teacher, knowledge=("hidden_mse",), strategy="Last", epochs=1,
            options={"mask_input": side, "mask_fraction": 0.001},
        )  # fmt: skip
        (r_plain,), w_plain = run([plain])
        (r_masked,), w_masked = run([masked])
        assert r_masked.status == "done" and r_masked.curve == r_plain.curve
        for key, value in w_plain[plain.trial_id].items():
            assert torch.equal(value, w_masked[masked.trial_id][key]), key


def test_masked_sides_train_and_a_student_masked_mate_leaves_its_job_mates_alone(teacher: str) -> None:
    plain = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", epochs=1)
    student = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", epochs=1,
        options={"mask_input": "student", "mask_by": "saliency", "mask_fraction": 0.3},
    )  # fmt: skip
    (r_plain, r_student), _ = run([plain, student])  # one job: student masking shares the teacher pass
    (r_alone,), _ = run([plain])
    assert r_student.status == "done", r_student.error_message
    assert r_plain.curve == r_alone.curve
    assert r_student.curve != r_plain.curve  # the same seed and data: only the masked input differs
    # One teacher pass per batch, shared by both students: each counts 6 batches, half of each.
    assert r_plain.extra[TEACHER_BATCHES] == r_student.extra[TEACHER_BATCHES] == 6
    assert r_plain.extra[TEACHER_BATCHES_SHARED] == pytest.approx(3.0)
    teacher_masked = make_trial(
        teacher,
        knowledge=("hidden_mse",),
        strategy="Last",
        epochs=1,
        options={"mask_input": "teacher", "mask_fraction": 0.3},
    )
    (r_teacher,), _ = run([teacher_masked])
    assert r_teacher.status == "done", r_teacher.error_message
    assert r_teacher.curve[0]["loss_terms"] != r_alone.curve[0]["loss_terms"]  # another teacher pass
    with pytest.raises(ConfigError, match="must agree on"):
        run([plain, teacher_masked])
