"""`huggingface_hub`, `transformers` and `datasets` read the fixture's cache offline, through their public APIs,
and see what the real repos carry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest
from huggingface_hub import hf_hub_download
from transformers import AutoConfig, AutoTokenizer, BertConfig, BertForSequenceClassification

Switch = Callable[[Path], dict[str, str]]


def test_hf_hub_download_resolves_refs_main_offline(small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    path = Path(hf_hub_download("textattack/bert-base-uncased-MRPC", "config.json"))
    commit = (small_hub / "hub" / "models--textattack--bert-base-uncased-MRPC" / "refs" / "main").read_text()
    assert path.parent.name == commit and path.parent.parent.name == "snapshots"
    assert json.loads(path.read_text())["architectures"] == ["BertForSequenceClassification"]


def test_transformers_loads_the_teachers_and_their_tokenizer(small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    tokenizer = AutoTokenizer.from_pretrained("textattack/bert-base-uncased-MRPC")
    assert len(tokenizer) == 30522
    assert tokenizer("Hello World")["input_ids"] == [101, 7592, 2088, 102]  # lower-cased, [CLS] ... [SEP]
    config = AutoConfig.from_pretrained("ishan/bert-base-uncased-mnli")
    assert config.model_type == "bert" and config.num_labels == 3
    assert config.id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}  # generic names: no order to read
    model = BertForSequenceClassification.from_pretrained("textattack/bert-base-uncased-STS-B")
    # the 2020 STS-B config names no problem_type (as on the Hub): one label is what makes it a regression head
    assert model.config.num_labels == 1 and model.config.problem_type is None
    assert (model.config.num_hidden_layers, model.config.num_attention_heads) == (12, 12)


def test_compact_bert_config_has_no_model_type(small_hub: Path, use_hub: Switch) -> None:
    """Turc et al.'s configs name no model type: `BertConfig` reads them, `AutoConfig` (transformers 5 no longer
    guesses from the repo name) refuses them, so a loader of these repos must not go through `AutoConfig`."""
    use_hub(small_hub)
    config = BertConfig.from_pretrained("google/bert_uncased_L-2_H-128_A-2")
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (2, 128, 2)
    with pytest.raises(ValueError, match="model_type"):
        AutoConfig.from_pretrained("google/bert_uncased_L-2_H-128_A-2")


def test_datasets_loads_glue_offline_with_the_hubs_splits_and_columns(
    small_hub: Path, use_hub: Switch
) -> None:
    use_hub(small_hub)
    mnli = datasets.load_dataset("nyu-mll/glue", "mnli")
    assert list(mnli) == [
        "train",
        "validation_matched",
        "validation_mismatched",
        "test_matched",
        "test_mismatched",
    ]
    train = mnli["train"]
    assert train.column_names == ["premise", "hypothesis", "label", "idx"]
    assert train.features["label"].names == ["entailment", "neutral", "contradiction"]
    assert train.features["idx"].dtype == "int32"
    assert set(train["label"]) == {0, 1, 2}
    assert set(mnli["test_matched"]["label"]) == {-1}
    stsb = datasets.load_dataset("nyu-mll/glue", "stsb")
    assert stsb["train"].features["label"].dtype == "float32"
    assert set(stsb["test"]["label"]) == {-1.0}
    assert all(0 <= x <= 5 for x in stsb["validation"]["label"])
    mrpc = datasets.load_dataset("nyu-mll/glue", "mrpc")
    assert mrpc["validation"].column_names == ["sentence1", "sentence2", "label", "idx"]
    assert mrpc["validation"].features["label"].names == ["not_equivalent", "equivalent"]


def test_an_uncached_config_is_a_library_error_offline(small_hub: Path, use_hub: Switch) -> None:
    use_hub(small_hub)
    with pytest.raises(ValueError, match="Couldn't find cache for nyu-mll/glue for config 'rte'"):
        datasets.load_dataset("nyu-mll/glue", "rte")
