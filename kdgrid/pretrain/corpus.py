"""A corpus as fixed-length token blocks: read (Hub stream, local text, offline sentences), tokenized once into
the kdgrid cache, packed, and memory-mapped by every process of a run.

Packing (BERT's, without the next-sentence task): each document is tokenized without special tokens, documents
are joined with a ``[SEP]`` between them, and the stream is cut into pieces of ``block_length - 2`` tokens, each
wrapped as ``[CLS] piece [SEP]``; the last incomplete piece is dropped. Every block is full, so no block has
padding and a loss averaged per token is the same whatever the micro-batch (what makes a data-parallel run
equal a single-process one, `kdgrid.pretrain.train`).

The cache: ``kdgrid.assets.cache_dir()/pretrain_corpora/<key>/`` with ``blocks.bin`` (``[N, block_length]``
integers, row-major, little-endian; ``uint16`` when the vocabulary fits) and ``blocks.json`` (N, the dtype, what
was read). The key hashes the corpus's identity, the document limit, the tokenizer's content and the block
length. The folder appears whole (written under a temporary name and renamed).
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kdgrid.assets import cache_dir, polarity_files, teacher_dir
from kdgrid.atomic_files import fsync_dir
from kdgrid.core.data.synthetic import MAX_WORDS, MIN_WORDS, generate_examples, vocabulary_words
from kdgrid.core.data.tokenization import tokenizer_fingerprint
from kdgrid.core.model.shapes import PREFETCH_HINT, hub_offline, is_local_source
from kdgrid.core.model.teacher_cache import MINILM_ALIAS, base_source
from kdgrid.core.pretrained.corpus_spec import CORPUS_FORMAT_VERSION, CorpusSpec, parse_corpus
from kdgrid.errors import ConfigError, KdgridError

BLOCKS_FILE = "blocks.bin"
BLOCKS_INFO = "blocks.json"
TOKENIZE_BATCH = 1000  # documents per tokenizer call
SENTENCES_PER_DOCUMENT = 8  # the generated and vocabulary corpora: documents of this many sentences
GENERATED_SENTENCES = 20_000  # the generated corpus: this many sentences
# The vocabulary corpus: this many documents of sentences of MIN_WORDS..MAX_WORDS whole words drawn uniformly
# (with replacement) from the vocabulary's ~21,000 words: ~320,000 draws, each word read ~15 times.
VOCABULARY_DOCUMENTS = 4_000
VOCABULARY_SEED = 0
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class PackedCorpus:
    """A corpus's token blocks: ``blocks`` is ``[N, block_length]`` (memory-mapped), ``path`` its cache folder."""

    blocks: np.ndarray
    path: Path
    info: dict[str, Any]

    def __len__(self) -> int:
        return int(self.blocks.shape[0])


def load_tokenizer(name: str) -> Any:
    """The tokenizer named by a recipe: ``minilm-l6`` (the offline MiniLM's, bert-base-uncased's vocabulary), a
    local ``save_pretrained`` folder or a Hub name (cached by `kdgrid prefetch` when offline)."""
    from transformers import AutoTokenizer  # about 2 s: only when a corpus is tokenized or a run starts

    source = str(teacher_dir()) if name == MINILM_ALIAS else base_source(name)
    local = is_local_source(source)
    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=local or hub_offline())
    except OSError as error:
        hint = "check the path" if local else PREFETCH_HINT
        raise KdgridError(
            f"the tokenizer {name!r} could not be loaded ({str(error).splitlines()[0][:200]}); {hint}"
        ) from None


def documents(spec: CorpusSpec) -> Iterator[str]:
    """The corpus's documents as text, in a fixed order (empty documents skipped)."""
    if spec.kind == "joined":
        for part in spec.parts:
            yield from documents(part)
    elif spec.kind == "polarity":
        with open(polarity_files().train, encoding="utf-8", newline="") as handle:
            yield from (row["text"] for row in csv.DictReader(handle) if row["text"].strip())
    elif spec.kind == "generated":
        sentences = [e["sentence"] for e in generate_examples("single", "3class", GENERATED_SENTENCES)]
        for start in range(0, len(sentences), SENTENCES_PER_DOCUMENT):
            yield " ".join(f"{s}." for s in sentences[start : start + SENTENCES_PER_DOCUMENT])
    elif spec.kind == "vocabulary":
        yield from vocabulary_documents()
    elif spec.kind == "local":
        for file in spec.files():
            for paragraph in _PARAGRAPH_BREAK.split(file.read_text(encoding="utf-8")):
                if paragraph.strip():
                    yield paragraph.strip()
    else:
        for dataset, config, column in spec.sources:
            yield from (text for text in _hub_texts(dataset, config, column) if text and text.strip())


def vocabulary_documents() -> Iterator[str]:
    """The ``vocabulary`` corpus: `VOCABULARY_DOCUMENTS` documents of `SENTENCES_PER_DOCUMENT` sentences, each
    of MIN_WORDS..MAX_WORDS whole words of the offline MiniLM's vocabulary (bert-base-uncased's:
    `kdgrid.core.data.synthetic.vocabulary_words`) drawn uniformly, ending in `` .``. Word salad, not language:
    what it brings a general distillation is the teacher's representation of every word, including those the
    offline task's few thousand sentences never use (where Wikipedia would bring them)."""
    words = vocabulary_words()
    rng = random.Random(VOCABULARY_SEED)
    for _ in range(VOCABULARY_DOCUMENTS):
        yield " ".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(MIN_WORDS, MAX_WORDS))) + " ."
            for _ in range(SENTENCES_PER_DOCUMENT)
        )


def _hub_texts(dataset: str, config: str | None, column: str) -> Iterator[str]:
    import datasets  # about 1 s: only for a Hub corpus

    name = f"{dataset}" + (f" ({config})" if config else "")
    try:
        stream = datasets.load_dataset(dataset, config, split="train", streaming=True)
        for row in stream:
            if column not in row:
                raise ConfigError(f"the Hub dataset {name} has no {column!r} column (columns: {sorted(row)})")
            yield row[column]
    except (OSError, ValueError, ConnectionError, datasets.exceptions.DatasetNotFoundError) as error:
        raise KdgridError(
            f"the Hub corpus {name} could not be streamed ({str(error).splitlines()[0][:200]}); it needs the "
            "network (HF_DATASETS_OFFLINE unset) or a local copy given as a text file or folder"
        ) from None


def blocks_key(spec: CorpusSpec, max_documents: int | None, tokenizer: Any, block_length: int) -> str:
    payload = {
        "corpus": spec.name,
        "identity": spec.identity(),
        "format": CORPUS_FORMAT_VERSION,
        "max_documents": max_documents,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "block_length": block_length,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def corpus_cache_root() -> Path:
    return cache_dir() / "pretrain_corpora"


def pack(
    token_lists: Iterable[list[int]], block_length: int, cls_id: int, sep_id: int
) -> Iterator[np.ndarray]:
    """Blocks ``[CLS] piece [SEP]`` of ``block_length`` tokens from documents' token ids, documents joined by
    ``[SEP]``; yields ``[k, block_length]`` arrays as they fill (the last incomplete piece is dropped)."""
    piece = block_length - 2
    buffer: list[int] = []
    for index, ids in enumerate(token_lists):
        if index:
            buffer.append(sep_id)
        buffer.extend(ids)
        whole = len(buffer) // piece
        if whole:
            body = np.asarray(buffer[: whole * piece], dtype=np.int64).reshape(whole, piece)
            ends = np.full((whole, 1), sep_id, dtype=np.int64)
            yield np.concatenate([np.full((whole, 1), cls_id, dtype=np.int64), body, ends], axis=1)
            buffer = buffer[whole * piece :]


def packed_corpus(
    corpus: str, tokenizer: Any, block_length: int, max_documents: int | None = None
) -> PackedCorpus:
    """The corpus's blocks, tokenized and packed into the cache on first use. `ConfigError` for a corpus that is
    missing, empty, or too small for one block."""
    spec = parse_corpus(corpus)
    folder = corpus_cache_root() / blocks_key(spec, max_documents, tokenizer, block_length)
    if not (folder / BLOCKS_INFO).is_file():
        _build(spec, tokenizer, block_length, max_documents, folder)
    info = json.loads((folder / BLOCKS_INFO).read_text())
    blocks = np.memmap(
        folder / BLOCKS_FILE, dtype=info["dtype"], mode="r", shape=(info["blocks"], block_length)
    )
    return PackedCorpus(blocks, folder, info)


def _build(
    spec: CorpusSpec, tokenizer: Any, block_length: int, max_documents: int | None, folder: Path
) -> None:
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.{uuid.uuid4().hex}.tmp"
    staging.mkdir()
    counts = {"documents": 0, "tokens": 0, "blocks": 0}

    def token_lists() -> Iterator[list[int]]:
        texts = documents(spec)
        if max_documents is not None:
            texts = itertools.islice(texts, max_documents)
        while batch := list(itertools.islice(texts, TOKENIZE_BATCH)):
            encoded = tokenizer(batch, add_special_tokens=False, return_attention_mask=False, verbose=False)
            for ids in encoded["input_ids"]:
                counts["documents"] += 1
                counts["tokens"] += len(ids)
                yield ids

    try:
        with open(staging / BLOCKS_FILE, "wb") as handle:
            for chunk in pack(token_lists(), block_length, tokenizer.cls_token_id, tokenizer.sep_token_id):
                handle.write(chunk.astype(np.dtype(dtype).newbyteorder("<")).tobytes())
                counts["blocks"] += len(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        if counts["documents"] == 0:
            raise ConfigError(f"corpus {spec.name!r} is empty: it has no document with text")
        if counts["blocks"] == 0:
            raise ConfigError(
                f"corpus {spec.name!r} has {counts['tokens']} tokens in {counts['documents']} documents, fewer "
                f"than one block of {block_length}; use a larger corpus or a shorter block_length"
            )
        info = {"corpus": spec.name, "block_length": block_length, "dtype": np.dtype(dtype).str, **counts}
        (staging / BLOCKS_INFO).write_text(json.dumps(info, indent=2, sort_keys=True))
        fsync_dir(staging)
        try:
            os.replace(staging, folder)
        except OSError:
            if not (folder / BLOCKS_INFO).is_file():  # not another process's identical cache: a real failure
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
