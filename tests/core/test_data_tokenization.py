"""Cached tokenization: no padding, truncation, the in-memory and on-disk caches and their keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from kdgrid.assets import teacher_dir
from kdgrid.core.data import load_splits, tokenization
from kdgrid.core.data.tokenization import TokenizedSplit, tokenize_task, tokenizer_fingerprint
from kdgrid.errors import ConfigError


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(teacher_dir())


@pytest.fixture
def counted(monkeypatch, tmp_path: Path) -> list[str]:
    """A private disk cache, an empty memory cache, and a record of every real data load."""
    calls: list[str] = []
    real_load = tokenization.load_splits

    def counting_load(task):
        calls.append(task.name)
        return real_load(task)

    monkeypatch.setattr(tokenization, "load_splits", counting_load)
    monkeypatch.setattr(tokenization, "_disk_path", lambda key: tmp_path / "tokenized" / key)
    tokenization.clear_memory_cache()
    yield calls
    tokenization.clear_memory_cache()


def test_examples_are_unpadded_and_match_the_tokenizer(tokenizer, counted) -> None:
    tokenized = tokenize_task("synthetic-pair-3class-n40-d8", tokenizer, 16)
    assert list(tokenized) == ["train", "validation"]
    train = tokenized["train"]
    assert len(train) == 40 and train.labels.dtype == np.int64
    rows = load_splits("synthetic-pair-3class-n40-d8")["train"]
    for i in range(len(train)):
        expected = tokenizer(rows[i]["sentence1"], rows[i]["sentence2"], truncation=True, max_length=16)
        ids, types = train.example(i)
        assert ids.tolist() == expected["input_ids"] and types.tolist() == expected["token_type_ids"]
    assert train.lengths.max() == 16  # pairs of 6-14 words are truncated to max_length
    assert len(set(train.lengths.tolist())) > 1  # and not padded to it
    assert train.labels.tolist() == rows["label"]
    assert train.pad_token_id == tokenizer.pad_token_id


def test_dev_sets_cut_to_their_first_examples_and_train_kept(tokenizer, counted) -> None:
    tokenized = tokenize_task("synthetic-pair-3class-n40-d8", tokenizer, 16)
    cut = tokenized.with_dev_sets_cut(3)
    assert cut["train"] is tokenized["train"] and len(cut["validation"]) == 3
    whole = tokenized["validation"]
    for i in range(3):
        assert [a.tolist() for a in cut["validation"].example(i)] == [a.tolist() for a in whole.example(i)]
    assert cut["validation"].labels.tolist() == whole.labels[:3].tolist()
    assert cut.key != tokenized.key and tokenized.with_dev_sets_cut(100)["validation"] is whole


def test_regression_labels_are_float(tokenizer, counted) -> None:
    tokenized = tokenize_task("synthetic-pair-regression-n20-d5", tokenizer, 32)
    assert tokenized["train"].labels.dtype == np.float32


def test_second_call_hits_memory_then_disk_and_other_settings_miss(tokenizer, counted, tmp_path) -> None:
    first = tokenize_task("synthetic-single-binary-n30-d6", tokenizer, 24)
    assert counted == ["synthetic-single-binary-n30-d6"]
    assert tokenize_task("synthetic-single-binary-n30-d6", tokenizer, 24) is first  # memory
    assert counted == ["synthetic-single-binary-n30-d6"]
    assert (tmp_path / "tokenized" / first.key / "meta.json").is_file()

    tokenization.clear_memory_cache()  # as in a new process
    again = tokenize_task("synthetic-single-binary-n30-d6", tokenizer, 24)
    assert len(counted) == 1  # read from disk, not recomputed
    assert again is not first and again.key == first.key
    for split in ("train", "validation"):
        assert np.array_equal(again[split].input_ids, first[split].input_ids)
        assert np.array_equal(again[split].offsets, first[split].offsets)
        assert np.array_equal(again[split].labels, first[split].labels)

    shorter = tokenize_task("synthetic-single-binary-n30-d6", tokenizer, 8)
    subset = tokenize_task("synthetic-single-binary-n30-d6", tokenizer, 24, max_train_samples=10)
    assert len(counted) == 3 and len({first.key, shorter.key, subset.key}) == 3
    assert len(subset["train"]) == 10 and len(subset["validation"]) == 6


def test_a_memory_only_result_is_written_later_and_a_damaged_entry_is_rebuilt(
    tokenizer, counted, tmp_path
) -> None:
    first = tokenize_task("synthetic-single-3class-n20-d5", tokenizer, 16, disk_cache=False)
    entry = tmp_path / "tokenized" / first.key
    assert not entry.exists()
    tokenize_task("synthetic-single-3class-n20-d5", tokenizer, 16)
    assert (entry / "meta.json").is_file() and len(counted) == 1

    (entry / "train.parquet").write_bytes(b"not parquet")
    tokenization.clear_memory_cache()
    rebuilt = tokenize_task("synthetic-single-3class-n20-d5", tokenizer, 16)
    assert len(counted) == 2 and np.array_equal(rebuilt["train"].input_ids, first["train"].input_ids)
    tokenization.clear_memory_cache()
    tokenize_task("synthetic-single-3class-n20-d5", tokenizer, 16)
    assert len(counted) == 2  # the rewritten entry is whole again


def test_max_train_samples_keeps_a_fixed_nested_subset_of_both_classes(tokenizer, counted) -> None:
    small = tokenize_task("polarity", tokenizer, 32, max_train_samples=40, disk_cache=False)
    large = tokenize_task("polarity", tokenizer, 32, max_train_samples=80, disk_cache=False)
    assert len(small["train"]) == 40 and len(small["validation"]) == 1000
    assert set(small["train"].labels.tolist()) == {0, 1}  # the corpus file is sorted by label
    small_rows = {tuple(small["train"].example(i)[0]) for i in range(40)}
    large_rows = {tuple(large["train"].example(i)[0]) for i in range(80)}
    assert small_rows <= large_rows


def test_the_key_follows_tokenizer_content_not_its_state(tokenizer, counted) -> None:
    before = tokenizer_fingerprint(tokenizer)
    tokenizer("some text", truncation=True, max_length=5)  # changes the backend's truncation state
    assert tokenizer_fingerprint(tokenizer) == before
    assert (
        tokenize_task("synthetic-single-binary-n12-d4", str(teacher_dir()), 16).key
        == tokenize_task("synthetic-single-binary-n12-d4", tokenizer, 16).key
    )


def test_local_file_content_is_part_of_the_key(tokenizer, counted, tmp_path) -> None:
    from kdgrid.core.data import task_from_spec

    (tmp_path / "train.csv").write_text("text,label\nhello world,1\nbad day,0\n")
    (tmp_path / "dev.csv").write_text("text,label\nfine,1\n")
    spec = {
        "name": "tiny",
        "files": {"train": "train.csv", "validation": "dev.csv"},
        "text_columns": ["text"],
        "type": "classification",
        "num_labels": 2,
    }
    first = tokenize_task(task_from_spec(spec, base_dir=tmp_path), tokenizer, 16)
    (tmp_path / "train.csv").write_text("text,label\nhello there world,1\nbad day,0\n")
    second = tokenize_task(task_from_spec(spec, base_dir=tmp_path), tokenizer, 16)
    assert first.key != second.key and len(counted) == 2
    assert second["train"].lengths.tolist() == [5, 4]


def test_table_round_trip_and_bad_settings() -> None:
    split = TokenizedSplit(
        input_ids=np.array([101, 7, 102, 101, 102], dtype=np.int32),
        token_type_ids=np.array([0, 0, 0, 0, 0], dtype=np.int8),
        offsets=np.array([0, 3, 5]),
        labels=np.array([1, 0]),
    )
    back = TokenizedSplit.from_table(split.to_table(), pad_token_id=0)
    assert back.lengths.tolist() == [3, 2] and back.example(1)[0].tolist() == [101, 102]
    with pytest.raises(ConfigError, match="max_length"):
        tokenize_task("synthetic-single-binary", "unused", 2)
    with pytest.raises(ConfigError, match="max_train_samples"):
        tokenize_task("synthetic-single-binary", "unused", 16, max_train_samples=0)


def test_the_memory_cache_keeps_only_the_most_recent_tasks(tokenizer, counted, monkeypatch) -> None:
    monkeypatch.setattr(tokenization, "MEMORY_CACHE_SIZE", 1)
    first = tokenize_task("synthetic-single-binary-n10-d2", tokenizer, 16, disk_cache=False)
    assert tokenize_task("synthetic-single-binary-n10-d2", tokenizer, 16, disk_cache=False) is first
    tokenize_task("synthetic-single-binary-n11-d2", tokenizer, 16, disk_cache=False)
    assert tokenize_task("synthetic-single-binary-n10-d2", tokenizer, 16, disk_cache=False) is not first
    assert len(counted) == 3
