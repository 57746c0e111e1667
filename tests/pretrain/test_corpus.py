"""Corpora: the spellings, reading (local text, generated, polarity, a Hub stream), packing into full blocks,
the cache written once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kdgrid.core.pretrained.corpus_spec import HUB_PRESETS, parse_corpus
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.pretrain import corpus as corpus_module
from kdgrid.pretrain.corpus import documents, load_tokenizer, pack, packed_corpus


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer("minilm-l6")


def test_pack_joins_documents_and_drops_the_rest() -> None:
    blocks = np.concatenate(
        list(pack([[1, 2, 3], [4, 5], [6, 7, 8, 9]], block_length=5, cls_id=101, sep_id=102))
    )
    # stream: 1 2 3 SEP 4 5 SEP 6 7 8 9 -> pieces of 3: (1 2 3) (SEP 4 5) (SEP 6 7); "8 9" dropped
    assert blocks.tolist() == [[101, 1, 2, 3, 102], [101, 102, 4, 5, 102], [101, 102, 6, 7, 102]]


def test_local_folder_is_read_by_paragraph_in_sorted_order(tmp_path: Path) -> None:
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("second file.\n")
    (folder / "a.txt").write_text("first one.\n\n  \n\nfirst two\nstill two.\n")
    (folder / "sub" / "c.txt").write_text("nested.")
    (folder / "notes.md").write_text("not read.")
    assert list(documents(parse_corpus(str(folder)))) == [
        "first one.",
        "first two\nstill two.",
        "second file.",
        "nested.",
    ]


def test_blocks_are_full_and_cached_once(
    tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(f"document number {i} has a few words in it." for i in range(50)))
    packed = packed_corpus(str(path), tokenizer, block_length=16)
    assert packed.blocks.shape == (len(packed), 16) and len(packed) == packed.info["blocks"] > 10
    assert (packed.blocks[:, 0] == tokenizer.cls_token_id).all()
    assert (packed.blocks[:, -1] == tokenizer.sep_token_id).all()
    assert tokenizer.pad_token_id not in np.asarray(packed.blocks)
    assert packed.info["documents"] == 50
    monkeypatch.setattr(corpus_module, "_build", lambda *args: pytest.fail("the cache was rebuilt"))
    again = packed_corpus(str(path), tokenizer, block_length=16)
    assert again.path == packed.path and np.array_equal(again.blocks, packed.blocks)


def test_max_documents_reads_a_prefix(tmp_path: Path, tokenizer: Any) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(f"document number {i} has a few words in it." for i in range(50)))
    head = packed_corpus(str(path), tokenizer, block_length=16, max_documents=10)
    whole = packed_corpus(str(path), tokenizer, block_length=16)
    assert head.info["documents"] == 10 and head.path != whole.path
    assert np.array_equal(head.blocks, whole.blocks[: len(head)])


def test_generated_corpus_needs_no_download(tokenizer: Any) -> None:
    packed = packed_corpus("generated", tokenizer, block_length=64)
    assert packed.info["documents"] == 2500 and len(packed) > 1000


def test_polarity_corpus(tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kdgrid.assets import polarity_files
    from kdgrid.errors import AssetMissingError

    monkeypatch.delenv("KDGRID_CACHE")
    try:
        polarity_files()
    except AssetMissingError:
        pytest.skip("the polarity corpus is not fetched (kdgrid assets fetch)")
    texts = list(documents(parse_corpus("polarity")))
    assert len(texts) == 3000 and all(texts)


def test_hub_corpus_is_streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    calls = []

    def fake_load(name: str, config: str | None, *, split: str, streaming: bool) -> list[dict[str, str]]:
        calls.append((name, config, split, streaming))
        return [{"text": f"{name} one"}, {"text": "  "}, {"text": f"{name} two"}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    texts = list(documents(parse_corpus("wikibooks")))
    names = [source[0] for source in HUB_PRESETS["wikibooks"]]
    assert texts == [f"{names[0]} one", f"{names[0]} two", f"{names[1]} one", f"{names[1]} two"]
    assert [call[:2] for call in calls] == [source[:2] for source in HUB_PRESETS["wikibooks"]]
    assert all(call[2:] == ("train", True) for call in calls)


def test_hub_corpus_without_a_text_column_or_network_is_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: [{"content": "x"}])
    with pytest.raises(ConfigError, match="has no 'text' column"):
        list(documents(parse_corpus("hub:someone/corpus")))

    def offline(*args: object, **kwargs: object) -> None:
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(KdgridError, match=r"could not be streamed .*needs the network"):
        list(documents(parse_corpus("hub:someone/corpus:en")))


def test_vocabulary_corpus_reads_every_word_of_the_vocabulary_the_same_way_each_time() -> None:
    from kdgrid.core.data.synthetic import vocabulary_words

    texts = list(documents(parse_corpus("vocabulary")))
    assert len(texts) == corpus_module.VOCABULARY_DOCUMENTS
    assert all(text.count(" .") == corpus_module.SENTENCES_PER_DOCUMENT for text in texts)
    used = {word for text in texts for word in text.split() if word != "."}
    vocabulary = set(vocabulary_words())
    assert used <= vocabulary
    # ~15 draws per word: a word left out has odds of about e^-15; the seed fixes which words are drawn.
    assert len(vocabulary - used) <= 2, sorted(vocabulary - used)
    assert list(documents(parse_corpus("vocabulary"))) == texts


def test_joined_corpus_reads_its_parts_in_order_and_has_an_identity_of_its_own(tmp_path: Path) -> None:
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("one.\n\ntwo.")
    second.write_text("three.")
    joined = parse_corpus(f"{first}+{second}")
    assert joined.kind == "joined"
    assert list(documents(joined)) == ["one.", "two.", "three."]
    identities = {
        joined.identity(),
        parse_corpus(f"{second}+{first}").identity(),
        parse_corpus(str(first)).identity(),
        parse_corpus(str(second)).identity(),
    }
    assert len(identities) == 4  # the order of the parts is part of the checkpoint's key
    before = joined.identity()
    second.write_text("three, edited.")
    assert parse_corpus(f"{first}+{second}").identity() != before


def test_joined_corpus_refuses_an_empty_or_unknown_part(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"an empty corpus between '\+'"):
        parse_corpus("generated+")
    with pytest.raises(ConfigError, match=r"corpus 'nosuch' is not a file or folder"):
        parse_corpus("generated+nosuch")
    plus = tmp_path / "a+b.txt"  # a file whose name holds the join character is that file
    plus.write_text("text.")
    assert parse_corpus(str(plus)).kind == "local"
