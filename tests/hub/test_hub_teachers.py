"""The fixture's teachers are real teachers: on their task's generated dev split they beat the majority class by
far, and only in the class order the real checkpoint declares (the order a teacher gate must find)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
import torch
from transformers import BertForSequenceClassification

from tests.hub.conftest import SMALL_REPOS
from tests.hub.hub_cache import (
    GLUE,
    LEGACY_RUN_GLUE_MNLI_ORDER,
    SEED,
    paper_models,
    teacher_examples,
    vocabulary_file,
)
from tests.hub.teacher_training import predict

TEACHERS = [m for m in paper_models() if m.repo_id in SMALL_REPOS and m.task is not None]


def _dev_split(task: str) -> str:
    return next(s for s in GLUE[task].splits if s.startswith("validation"))


@pytest.mark.parametrize("spec", TEACHERS, ids=lambda spec: spec.repo_id)
def test_a_fixture_teacher_is_trained_in_its_class_order(spec, small_hub: Path, use_hub) -> None:
    use_hub(small_hub)
    model = BertForSequenceClassification.from_pretrained(spec.repo_id)
    texts, targets = teacher_examples(spec, _dev_split(spec.task), SEED)
    logits = predict(model, vocabulary_file(), texts)
    if spec.num_labels == 1:
        pearson = torch.corrcoef(torch.stack([logits.squeeze(-1), torch.tensor(targets)]))[0, 1].item()
        assert pearson > 0.9
        return
    outputs = logits.argmax(-1)
    labels = torch.tensor(targets).long()  # the teacher's own output index of each row's label
    majority = torch.bincount(labels).max().item() / len(labels)
    accuracy = (outputs == labels).float().mean().item()
    assert accuracy >= 0.9 and accuracy > majority + 0.3
    for permutation in itertools.permutations(range(spec.num_labels)):
        if permutation != tuple(range(spec.num_labels)):
            permuted = torch.tensor(permutation)[outputs]
            assert (permuted == labels).float().mean().item() < majority + 0.2, permutation


def test_the_mnli_teacher_uses_the_legacy_run_glue_order() -> None:
    (mnli,) = [m for m in TEACHERS if m.task == "mnli"]
    assert mnli.class_order == LEGACY_RUN_GLUE_MNLI_ORDER
    _, legacy = teacher_examples(mnli, "validation_matched", SEED)
    _, dataset_order = teacher_examples(
        dataclasses.replace(mnli, class_order=(0, 1, 2)), "validation_matched", SEED
    )
    assert [
        LEGACY_RUN_GLUE_MNLI_ORDER[int(k)] for k in legacy
    ] == dataset_order  # output k means label order[k]
