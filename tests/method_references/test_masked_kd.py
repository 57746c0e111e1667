"""mask_teacher and mask_student (sweeps/methods.yaml): kdgrid's masked teacher input against MaskedKD's.

The sweep's cells mask at random (kdgrid's baseline, no paper's criterion); MaskedKD's criterion is kdgrid's
``mask_input: teacher, mask_by: saliency``, compared here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core import masking
from kdgrid.core.models import bert_config
from kdgrid.core.shapes import StudentShape
from kdgrid.trial import Trial
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


def kdgrid_teacher_batch(monkeypatch: pytest.MonkeyPatch) -> dict[str, torch.Tensor]:
    """kdgrid's teacher input for MaskedKD's setting: teacher masking by saliency, half the candidates."""
    monkeypatch.setattr(masking, "special_ids", lambda job: (MASK_ID, SPECIALS))
    trial = Trial(task="sst2", teacher="bert-base", student="bert-tiny",
                  options={"mask_input": "teacher", "mask_by": "saliency", "mask_fraction": 0.5})  # fmt: skip
    job = SimpleNamespace(teacher_model=TEACHER)
    return masking.teacher_input(job, trial, BATCH, masking.TRAINING, 1)  # type: ignore[arg-type]


def test_kdgrids_saliency_masking_is_its_documented_teacher_attention_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours = kdgrid_teacher_batch(monkeypatch)
    removed = removed_positions(cls_attention(last_attention(TEACHER)), CANDIDATES, 0.5)
    assert removed.sum(dim=1).tolist() == [4, 3]  # floor(f n + 1/2) of n = 7 and n = 5 candidates
    expected_ids = IDS.masked_fill(removed, MASK_ID)
    assert torch.equal(ours["input_ids"], expected_ids)
    assert torch.equal(ours["attention_mask"], BATCH["attention_mask"])  # [MASK] tokens are still attended to


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="kdgrid's default departs: saliency masking ranks tokens by the teacher's [CLS] attention and replaces "
    "them by [MASK], where MaskedKD ranks them by the student's last-layer [CLS] attention and removes them from "
    "the teacher's input",
)
def test_the_teacher_reads_maskedkds_input(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = kdgrid_teacher_batch(monkeypatch)
    removed = removed_positions(cls_attention(last_attention(STUDENT)), CANDIDATES, 0.5)
    theirs = teacher_batch(BATCH, removed)
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])


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
