"""GLUE loading: the offline error and column handling, with the Hub replaced."""

from __future__ import annotations

import datasets
import pytest

from kdgrid.core.data import glue, load_splits
from kdgrid.errors import KdgridError


def test_offline_without_a_cached_copy_gives_one_clear_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no cached copy can exist here
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets", raising=False)
    with pytest.raises(KdgridError) as error:
        load_splits("rte")
    message = str(error.value)
    assert "cannot load GLUE task 'rte' from the Hugging Face Hub" in message
    assert "offline?" in message and "local task spec" in message and "HF_DATASETS_OFFLINE" in message


def test_a_connection_error_is_turned_into_the_same_error(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(glue, "_load_dataset", refuse)
    with pytest.raises(glue.GlueUnavailableError, match=r"cannot load GLUE task 'cola'.*ConnectionError"):
        load_splits("cola")


def _fake_glue(calls: list[tuple[str, str]]):
    def load(name: str, config: str) -> datasets.DatasetDict:
        calls.append((name, config))
        if config == "mnli":

            def split(n: int, offset: int) -> datasets.Dataset:
                return datasets.Dataset.from_dict(
                    {
                        "premise": [f"premise {offset + i}" for i in range(n)],
                        "hypothesis": [f"hypothesis {offset + i}" for i in range(n)],
                        "label": [i % 3 for i in range(n)],
                        "idx": list(range(n)),
                    }
                )

            return datasets.DatasetDict(
                {
                    "train": split(6, 0),
                    "validation_matched": split(3, 100),
                    "validation_mismatched": split(4, 200),
                    "test_matched": split(2, 300),
                }
            )
        if config == "stsb":

            def pairs(n: int) -> datasets.Dataset:
                return datasets.Dataset.from_dict(
                    {
                        "sentence1": ["a cat"] * n,
                        "sentence2": ["a dog"] * n,
                        "label": [float(i) / 2 for i in range(n)],
                        "idx": list(range(n)),
                    }
                )

            return datasets.DatasetDict({"train": pairs(5), "validation": pairs(3), "test": pairs(2)})
        raise AssertionError(config)

    return load


def test_mnli_has_a_train_split_and_two_dev_sets(monkeypatch) -> None:
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(glue, "_load_dataset", _fake_glue(calls))
    splits = load_splits("mnli")
    assert calls == [("nyu-mll/glue", "mnli")]
    assert list(splits) == ["train", "validation_matched", "validation_mismatched"]
    assert [len(s) for s in splits.values()] == [6, 3, 4]
    assert splits["validation_mismatched"].column_names == ["premise", "hypothesis", "label"]  # idx dropped
    assert splits["validation_matched"][0]["premise"] == "premise 100"


def test_stsb_keeps_float_labels_and_drops_the_test_split(monkeypatch) -> None:
    monkeypatch.setattr(glue, "_load_dataset", _fake_glue([]))
    splits = load_splits("stsb")
    assert list(splits) == ["train", "validation"]
    assert splits["train"]["label"] == [0.0, 0.5, 1.0, 1.5, 2.0]


def test_a_dataset_missing_a_column_is_reported(monkeypatch) -> None:
    def load(name: str, config: str) -> datasets.DatasetDict:
        split = datasets.Dataset.from_dict({"sentence": ["x"], "label": [0]})
        return datasets.DatasetDict({"train": split, "validation": split})

    monkeypatch.setattr(glue, "_load_dataset", load)
    with pytest.raises(glue.GlueUnavailableError, match=r"missing column\(s\) \['sentence1', 'sentence2'\]"):
        load_splits("rte")
