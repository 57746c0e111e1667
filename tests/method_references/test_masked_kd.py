"""mask_teacher and mask_student (sweeps/methods.yaml): kdgrid's masked teacher input against MaskedKD's.

The sweep's cells mask at random (kdgrid's baseline, no paper's criterion); MaskedKD's criterion is
``mask_input: teacher, mask_by: maskedkd``, compared here; ``mask_by: saliency`` is kdgrid's own (the teacher's
attention, [MASK] tokens)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.methods.masking import masks as masking
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.step_hooks import TRAINING
from kdgrid.core.trial_rules import method_combination_problems as method_problems
from kdgrid.trial import Trial, group_key
from tests.core.test_train_methods import make_trial, run
from tests.method_references.masked_kd import cls_attention, removed_positions, teacher_batch

IDS = torch.tensor([[101, 7, 8, 9, 10, 11, 12, 13, 102, 0], [101, 20, 21, 22, 102, 30, 31, 102, 0, 0]])
BATCH = {"input_ids": IDS, "attention_mask": (IDS != 0).long()}
MASK_ID, SPECIALS = 103, (0, 101, 102, 103)
CANDIDATES = BATCH["attention_mask"].bool() & ~torch.isin(IDS, torch.tensor(SPECIALS))


def bert(seed: int, layers: int) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = bert_config(StudentShape(layers=layers, width=16, heads=4, ffn=32), 2, vocab_size=200)
    config._attn_implementation = "eager"
    return BertForSequenceClassification(config).eval()


TEACHER, STUDENT = bert(0, 3), bert(1, 2)


def last_attention(model: BertForSequenceClassification) -> torch.Tensor:
    with torch.no_grad():
        return model(**BATCH, output_attentions=True).attentions[-1]


def kdgrid_teacher_batch(
    monkeypatch: pytest.MonkeyPatch, by: str = "saliency", student: BertForSequenceClassification | None = None
) -> dict[str, torch.Tensor]:
    """kdgrid's teacher input for MaskedKD's setting: teacher masking by ``by``, half the candidates."""
    monkeypatch.setattr(masking, "special_ids", lambda job: (MASK_ID, SPECIALS))
    trial = Trial(task="sst2", teacher="bert-base", student="bert-tiny",
                  options={"mask_input": "teacher", "mask_by": by, "mask_fraction": 0.5})  # fmt: skip
    job = SimpleNamespace(teacher_model=TEACHER)
    return masking.teacher_input(job, trial, BATCH, TRAINING, 1, student)  # type: ignore[arg-type]


def test_kdgrids_saliency_masking_is_its_documented_teacher_attention_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours = kdgrid_teacher_batch(monkeypatch)
    removed = removed_positions(cls_attention(last_attention(TEACHER)), CANDIDATES, 0.5)
    assert removed.sum(dim=1).tolist() == [4, 3]  # floor(f n + 1/2) of n = 7 and n = 5 candidates
    expected_ids = IDS.masked_fill(removed, MASK_ID)
    assert torch.equal(ours["input_ids"], expected_ids)
    assert torch.equal(ours["attention_mask"], BATCH["attention_mask"])  # [MASK] tokens are still attended to


def test_mask_by_maskedkd_gives_the_teacher_maskedkds_input(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = kdgrid_teacher_batch(monkeypatch, "maskedkd", student=STUDENT)
    removed = removed_positions(cls_attention(last_attention(STUDENT)), CANDIDATES, 0.5)
    theirs = teacher_batch(BATCH, removed)
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
    # the student's criterion, not the teacher's: on these two models the two rankings differ
    by_teacher = removed_positions(cls_attention(last_attention(TEACHER)), CANDIDATES, 0.5)
    assert not torch.equal(removed, by_teacher)


def test_maskedkd_needs_its_student_and_the_teachers_side(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="one student"):
        kdgrid_teacher_batch(monkeypatch, "maskedkd", student=None)
    base = {"task": "sst2", "teacher": "bert-base", "student": "bert-tiny"}
    student_side = Trial(**base, options={"mask_input": "student", "mask_by": "maskedkd"})  # type: ignore[arg-type]
    assert method_problems(student_side) == [
        "mask_by: maskedkd removes from the teacher's input what the student attends to least: it needs "
        "mask_input: teacher"
    ]
    one = Trial(**base, options={"mask_input": "teacher", "mask_by": "maskedkd"})  # type: ignore[arg-type]
    other = Trial(**base, lr=3e-4, options={"mask_input": "teacher", "mask_by": "maskedkd"})  # type: ignore[arg-type]
    assert group_key(one) != group_key(other)  # each reads its own student: never one shared teacher pass
    plain = [Trial(**base, lr=lr, options={"mask_input": "teacher"}) for lr in (1e-4, 3e-4)]  # type: ignore[arg-type]
    assert group_key(plain[0]) == group_key(plain[1])


def test_a_maskedkd_trial_trains_with_a_teacher_pass_of_its_own(teacher: str) -> None:
    options = {"mask_input": "teacher", "mask_by": "maskedkd", "mask_fraction": 0.5}
    masked = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", epochs=1, options=options)
    plain = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", epochs=1)
    (r_masked,), _ = run([masked])
    (r_plain,), _ = run([plain])
    assert r_masked.status == "done", r_masked.error_message
    assert r_masked.curve[0]["loss_terms"] != r_plain.curve[0]["loss_terms"]  # the teacher read less


def test_removing_a_token_is_masking_its_attention_for_the_kept_tokens() -> None:
    """The BERT reading of MaskedKD's removal: the [CLS] output of the sequence without the removed tokens equals
    that of the whole sequence with attention mask 0 on them (positions kept)."""
    removed = removed_positions(cls_attention(last_attention(STUDENT)), CANDIDATES, 0.5)
    with torch.no_grad():
        masked = TEACHER.bert(**teacher_batch(BATCH, removed)).last_hidden_state[:, 0]
        for b in range(2):
            keep = torch.nonzero(BATCH["attention_mask"][b].bool() & ~removed[b]).flatten()
            short = TEACHER.bert(input_ids=IDS[b : b + 1, keep], position_ids=keep[None]).last_hidden_state
            torch.testing.assert_close(short[0, 0], masked[b], rtol=1e-4, atol=1e-5)
