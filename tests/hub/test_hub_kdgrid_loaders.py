"""kdgrid's own loaders (GLUE splits, teachers, tokenizers, `pretrain` students) read the fixture unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from kdgrid.core.data import get_task, load_splits, tokenize_task
from kdgrid.core.data.glue import GLUE_TASKS, GlueUnavailableError
from kdgrid.core.job.init import build_student
from kdgrid.core.model.models import load_pretrained_bert, load_teacher, load_tokenizer
from kdgrid.core.model.shapes import TEACHERS, resolve_teacher, student_shape, turc_hub_name
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial
from tests.hub.hub_cache import GLUE, HubModel, build_model, saved_files, vocabulary_files, write_repo

Switch = Callable[[Path], dict[str, str]]


def _check_splits(task_name: str) -> None:
    task = get_task(task_name)
    splits = load_splits(task_name)
    assert list(splits) == ["train", *task.dev_sets]
    for split in splits.values():
        assert split.column_names == [*task.text_keys, "label"]
        assert len(split) > 0
        assert -1 not in split["label"]  # never a test split


@pytest.mark.parametrize("task_name", ["mrpc", "mnli", "stsb"])
def test_load_splits_reads_glue_from_the_cache(task_name: str, small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    _check_splits(task_name)


def test_an_uncached_glue_task_is_kdgrids_one_message(small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    with pytest.raises(GlueUnavailableError, match="cannot load GLUE task 'rte'"):
        load_splits("rte")


@pytest.mark.parametrize("task_name", ["mrpc", "mnli", "stsb"])
def test_the_paper_teacher_and_tokenizer_load(task_name: str, small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    task = get_task(task_name)
    teacher = resolve_teacher("bert-base", task_name)
    assert teacher.source == TEACHERS["bert-base"][task_name].hub_name and not teacher.is_local
    model = load_teacher(teacher, task.num_labels)
    assert model.config.num_labels == task.num_labels and not model.training
    assert all(not p.requires_grad for p in model.parameters())
    tokenizer = load_tokenizer(teacher)
    tokenized = tokenize_task(task, tokenizer, 32)
    assert len(tokenized["train"]) == len(load_splits(task_name)["train"])
    batch = tokenizer(["a short sentence"], return_tensors="pt")
    with torch.no_grad():
        assert model(**batch).logits.shape == (1, task.num_labels)


def test_a_pretrain_student_starts_from_the_compact_bert(small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    teacher = resolve_teacher("bert-base", "mrpc")
    trial = Trial(task="mrpc", teacher="bert-base", student="bert-tiny", init="pretrain")
    shape = student_shape("bert-tiny")
    model, info = build_student(trial, shape, 2, teacher, vocab_size=30522)
    assert info["init_source"] == turc_hub_name(shape) == "google/bert_uncased_L-2_H-128_A-2"
    assert model.config.vocab_size == 30522 and model.classifier.out_features == 2


def test_a_teacher_with_the_wrong_number_of_labels_is_one_config_error(
    small_hub: Path, use_hub: Switch
) -> None:
    use_hub(small_hub)
    with pytest.raises(ConfigError, match="outputs"):
        load_teacher(resolve_teacher("textattack/bert-base-uncased-MRPC", "mnli"), 3)


def test_weights_load_as_float32_whatever_the_saved_dtype(tmp_path: Path, use_hub: Switch) -> None:
    spec = HubModel(
        "google/bert_uncased_L-2_H-128_A-2", 2, 128, 2, 512, num_labels=None, tokenizer_files=False
    )
    model = build_model(spec, seed=0).to(torch.bfloat16)
    write_repo(tmp_path / "hub", spec.repo_id, {**saved_files(model, ()), **vocabulary_files(False)})
    use_hub(tmp_path)
    loaded = load_pretrained_bert(
        spec.repo_id, 2, what="init 'pretrain'", fresh_head=True, ignore_mismatched_sizes=True
    )
    assert loaded.dtype == torch.float32


@pytest.mark.slow
def test_every_paper_teacher_and_task_loads(paper_hub: Path, use_hub: Switch) -> None:
    use_hub(paper_hub)
    for task_name, task in GLUE_TASKS.items():
        assert task_name in GLUE
        _check_splits(task_name)
        for size, table in TEACHERS.items():
            teacher = resolve_teacher(size, task_name)
            model = load_teacher(teacher, task.num_labels)
            assert model.config.num_labels == task.num_labels, (size, task_name)
            assert model.config.num_hidden_layers == teacher.shape.layers, (size, task_name)
            assert model.config.num_attention_heads == teacher.shape.heads, (size, task_name)
            assert len(load_tokenizer(teacher)) == 30522
            assert table[task_name].hub_name == teacher.source


@pytest.mark.slow
@pytest.mark.parametrize("student", ["bert-tiny", "bert-mini", "bert-small"])
def test_every_sweep_student_starts_from_its_compact_bert(
    student: str, paper_hub: Path, use_hub: Switch
) -> None:
    use_hub(paper_hub)
    teacher = resolve_teacher("bert-base", "rte")
    shape = student_shape(student)
    trial = Trial(task="rte", teacher="bert-base", student=student, init="pretrain")
    model, info = build_student(trial, shape, 2, teacher, vocab_size=30522)
    assert info["init_source"] == turc_hub_name(shape)
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (shape.layers, shape.width)
