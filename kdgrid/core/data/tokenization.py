"""Tokenization of a task's splits, cached once per (task, tokenizer, max length, max_train_samples).

Nothing is padded here: each example keeps its own length (at most ``max_length`` tokens, ``[CLS]`` and
``[SEP]`` included; pairs are truncated longest-first), and batches pad to their own longest sequence
(`kdgrid.core.data.batching`). Two caches:

- in memory, per process, keyed by the cache key (a second call returns the same object; the
  `MEMORY_CACHE_SIZE` most recently used are kept);
- on disk under ``kdgrid.assets.cache_dir()/tokenized/<key>/`` (one Parquet file per split plus ``meta.json``),
  written to a temporary folder and renamed, so later processes and concurrent workers reuse it.

The key hashes the task's definition (for local tasks the file contents; for generated tasks the generator's
parameters and version; for GLUE the Hub dataset and config name), the tokenizer's content (its normalizer,
pre-tokenizer, vocabulary and post-processor, not its path), ``max_length`` and ``max_train_samples``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from transformers import AutoTokenizer

from kdgrid.assets import cache_dir
from kdgrid.core.data.local import task_files
from kdgrid.core.data.registry import get_task, load_splits
from kdgrid.core.data.spec import TRAIN_SPLIT, TaskSpec
from kdgrid.errors import ConfigError
from kdgrid.file_digest import file_sha256

CACHE_FORMAT_VERSION = 1
SUBSET_SEED = (
    0  # max_train_samples keeps a fixed random subset, nested across sizes, independent of trial seeds
)
ENCODE_CHUNK = 4096  # examples per tokenizer call: bounds memory on QQP / MNLI


@dataclass
class TokenizedSplit:
    """One split's token ids, unpadded, stored flat.

    Example ``i`` is ``input_ids[offsets[i]:offsets[i + 1]]`` (and the same slice of ``token_type_ids``).

    Attributes:
        input_ids: int32 ``[total tokens]``.
        token_type_ids: int8 ``[total tokens]`` (0 = first segment, 1 = second).
        offsets: int64 ``[N + 1]``, starting at 0.
        labels: int64 class ids ``[N]``, or float32 scores for regression.
        pad_token_id: the tokenizer's padding id (batches pad ``input_ids`` with it).
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    pad_token_id: int = 0

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per example, int64 ``[N]``."""
        return np.diff(self.offsets)

    def head(self, count: int) -> TokenizedSplit:
        """The first ``count`` examples (the split itself when it has no more)."""
        if count >= len(self):
            return self
        end = int(self.offsets[count])
        return TokenizedSplit(
            input_ids=self.input_ids[:end],
            token_type_ids=self.token_type_ids[:end],
            offsets=self.offsets[: count + 1],
            labels=self.labels[:count],
            pad_token_id=self.pad_token_id,
        )

    def example(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, token_type_ids) of one example."""
        start, end = self.offsets[index], self.offsets[index + 1]
        return self.input_ids[start:end], self.token_type_ids[start:end]

    def to_table(self) -> Any:
        offsets = pa.array(self.offsets, type=pa.int64())
        return pa.table(
            {
                "input_ids": pa.LargeListArray.from_arrays(
                    offsets, pa.array(self.input_ids, type=pa.int32())
                ),
                "token_type_ids": pa.LargeListArray.from_arrays(
                    offsets, pa.array(self.token_type_ids, type=pa.int8())
                ),
                "label": pa.array(self.labels),
            }
        )

    @classmethod
    def from_table(cls, table: Any, pad_token_id: int) -> TokenizedSplit:
        def flat(name: str) -> tuple[np.ndarray, np.ndarray]:
            column = table.column(name).combine_chunks()
            offsets = column.offsets.to_numpy().astype(np.int64)
            return column.flatten().to_numpy(), offsets - offsets[0]

        input_ids, offsets = flat("input_ids")
        token_type_ids, _ = flat("token_type_ids")
        return cls(
            input_ids=input_ids.astype(np.int32),
            token_type_ids=token_type_ids.astype(np.int8),
            offsets=offsets,
            labels=table.column("label").to_numpy(),
            pad_token_id=pad_token_id,
        )


class TokenizedTask(dict[str, TokenizedSplit]):
    """``{split name: TokenizedSplit}`` (``train`` and each dev set) plus what produced it.

    Attributes:
        task: the `TaskSpec`.
        key: the cache key (hex).
        max_length, max_train_samples: the settings it was tokenized with.
        pad_token_id: the tokenizer's padding id.
    """

    def __init__(
        self,
        splits: dict[str, TokenizedSplit],
        *,
        task: TaskSpec,
        key: str,
        max_length: int,
        max_train_samples: int | None,
        pad_token_id: int,
    ) -> None:
        super().__init__(splits)
        self.task = task
        self.key = key
        self.max_length = max_length
        self.max_train_samples = max_train_samples
        self.pad_token_id = pad_token_id


    def with_dev_sets_cut(self, count: int) -> TokenizedTask:
        """The same task with each dev set cut to its first ``count`` examples (``train`` as it is); never cached:
        its scores are not comparable with a full dev set's."""
        splits = {name: split if name == "train" else split.head(count) for name, split in self.items()}
        return TokenizedTask(
            splits,
            task=self.task,
            key=f"{self.key}-dev{count}",
            max_length=self.max_length,
            max_train_samples=self.max_train_samples,
            pad_token_id=self.pad_token_id,
        )


# A long-lived worker (a Ray actor) may run jobs of many tasks: keep only the most recently used few in memory.
MEMORY_CACHE_SIZE = 4
_MEMORY_CACHE: dict[str, TokenizedTask] = {}


def clear_memory_cache() -> None:
    """Forget every tokenized task held in this process (the disk cache stays)."""
    _MEMORY_CACHE.clear()


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def _sha256_file(path: Path) -> str:
    """Content hash of a file, remembered per (path, size, mtime) so repeated calls do not re-read it."""
    stat = path.stat()
    memo_key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo_key not in _FILE_DIGESTS:
        _FILE_DIGESTS[memo_key] = file_sha256(path)
    return _FILE_DIGESTS[memo_key]


def task_fingerprint(task: TaskSpec) -> dict[str, Any]:
    """What the tokenized data depends on; local files enter by content, not by path."""
    fingerprint: dict[str, Any] = {
        "name": task.name,
        "source": task.source,
        "text_keys": list(task.text_keys),
        "label_key": task.label_key,
        "num_labels": task.num_labels,
        "params": {k: v for k, v in task.params if k not in ("files", "asset")},
    }
    if task.source == "local":
        files = task_files(task)
        fingerprint["files"] = {split: _sha256_file(files[split]) for split in task.split_names}
    return fingerprint


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """SHA-256 of the tokenizer's content.

    Fast tokenizers: their full JSON minus the truncation / padding state (which every call changes).
    Others: class, lower-casing and the sorted vocabulary.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        content = json.loads(backend.to_str())
        content.pop("truncation", None)
        content.pop("padding", None)
    else:
        content = {
            "class": type(tokenizer).__name__,
            "lower": getattr(tokenizer, "do_lower_case", None),
            "vocab": sorted(tokenizer.get_vocab().items()),
        }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def cache_key(task: TaskSpec, tokenizer: Any, max_length: int, max_train_samples: int | None) -> str:
    payload = {
        "format": CACHE_FORMAT_VERSION,
        "task": task_fingerprint(task),
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "max_length": max_length,
        "max_train_samples": max_train_samples,
        "subset_seed": SUBSET_SEED,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


def train_subset(num_examples: int, max_train_samples: int | None) -> np.ndarray | None:
    """Sorted indices of the kept training examples, or None to keep all.

    A fixed random subset (seed `SUBSET_SEED`): files sorted by label (like the polarity corpus) still give
    both classes, and a smaller subset is contained in a larger one.
    """
    if max_train_samples is None or max_train_samples >= num_examples:
        return None
    order = np.random.default_rng(SUBSET_SEED).permutation(num_examples)
    return np.sort(order[:max_train_samples])


def encode_split(dataset: Any, task: TaskSpec, tokenizer: Any, max_length: int) -> TokenizedSplit:
    """Tokenize one `datasets.Dataset` (text columns + label column) without padding."""
    ids: list[np.ndarray] = []
    types: list[np.ndarray] = []
    lengths: list[int] = []
    for start in range(0, len(dataset), ENCODE_CHUNK):
        rows = dataset[start : start + ENCODE_CHUNK]
        texts = [rows[key] for key in task.text_keys]
        encoded = tokenizer(
            *texts,
            truncation=True,
            max_length=max_length,
            padding=False,
            return_token_type_ids=True,
            return_attention_mask=False,
        )
        for row_ids, row_types in zip(encoded["input_ids"], encoded["token_type_ids"], strict=True):
            ids.append(np.asarray(row_ids, dtype=np.int32))
            types.append(np.asarray(row_types, dtype=np.int8))
            lengths.append(len(row_ids))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    labels = np.asarray(dataset[task.label_key], dtype=np.float32 if task.is_regression else np.int64)
    if not task.is_regression and len(labels) and (labels.min() < 0 or labels.max() >= task.num_labels):
        raise ConfigError(
            f"task {task.name!r}: labels outside 0..{task.num_labels - 1} (found {labels.min()}..{labels.max()})"
        )
    return TokenizedSplit(
        input_ids=np.concatenate(ids) if ids else np.zeros(0, np.int32),
        token_type_ids=np.concatenate(types) if types else np.zeros(0, np.int8),
        offsets=offsets,
        labels=labels,
        pad_token_id=int(tokenizer.pad_token_id or 0),
    )


def _disk_path(key: str) -> Path:
    return cache_dir() / "tokenized" / key


def _read_disk(task: TaskSpec, key: str) -> dict[str, TokenizedSplit] | None:
    folder = _disk_path(key)
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text())
        return {
            split: TokenizedSplit.from_table(pq.read_table(folder / f"{split}.parquet"), meta["pad_token_id"])
            for split in task.split_names
        }
    except Exception:
        # Entries appear whole (renamed into place), so a failure here means outside damage: drop the entry
        # and let the caller recompute and rewrite it.
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _write_disk(key: str, splits: dict[str, TokenizedSplit], meta: dict[str, Any]) -> None:
    folder = _disk_path(key)
    if (folder / "meta.json").is_file():
        return  # another process wrote it meanwhile; entries with the same key hold the same data
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    staging.mkdir()
    try:
        for split, data in splits.items():
            pq.write_table(data.to_table(), staging / f"{split}.parquet")
        (staging / "meta.json").write_text(json.dumps(meta, indent=1))  # written last: marks a complete entry
        if folder.exists() and not (folder / "meta.json").is_file():
            shutil.rmtree(folder, ignore_errors=True)  # an entry without its completion marker is damaged
        os.rename(staging, folder)
    except OSError:
        pass  # another process renamed its copy first (or the cache is read-only): ours is not needed
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _encode_task(
    task: TaskSpec, tokenizer: Any, max_length: int, max_train_samples: int | None
) -> dict[str, TokenizedSplit]:
    """Load and tokenize every split (the cache miss path)."""
    datasets_by_split = load_splits(task)
    subset = train_subset(len(datasets_by_split[TRAIN_SPLIT]), max_train_samples)
    if subset is not None:
        datasets_by_split[TRAIN_SPLIT] = datasets_by_split[TRAIN_SPLIT].select(subset.tolist())
    return {
        split: encode_split(datasets_by_split[split], task, tokenizer, max_length)
        for split in task.split_names
    }


def _resolve_tokenizer(tokenizer: Any) -> Any:
    if isinstance(tokenizer, str | Path):
        return AutoTokenizer.from_pretrained(str(tokenizer))
    return tokenizer


def tokenize_task(
    task: str | Path | TaskSpec,
    tokenizer: Any,
    max_length: int,
    max_train_samples: int | None = None,
    *,
    disk_cache: bool = True,
) -> TokenizedTask:
    """Every split of ``task`` tokenized (``train`` cut to ``max_train_samples``), from a cache when possible.

    Args:
        task: a task name, spec path or `TaskSpec`.
        tokenizer: a Hugging Face tokenizer, or a directory / Hub name to load one from.
        max_length: the most tokens per example, specials included.
        max_train_samples: keep a fixed random subset of this many training examples; None keeps all.
        disk_cache: read and write the on-disk cache (the in-memory cache is always used).
    """
    spec = get_task(task)
    if not isinstance(max_length, int) or max_length < 4:
        raise ConfigError(f"max_length must be an integer >= 4 tokens, got {max_length!r}")
    if max_train_samples is not None and (not isinstance(max_train_samples, int) or max_train_samples < 1):
        raise ConfigError(f"max_train_samples must be a positive integer or null, got {max_train_samples!r}")
    tokenizer = _resolve_tokenizer(tokenizer)
    key = cache_key(spec, tokenizer, max_length, max_train_samples)
    tokenized = _MEMORY_CACHE.pop(key, None)  # re-inserted below as the most recent
    if tokenized is None:
        splits = _read_disk(spec, key) if disk_cache else None
        if splits is None:
            splits = _encode_task(spec, tokenizer, max_length, max_train_samples)
        tokenized = TokenizedTask(
            splits,
            task=spec,
            key=key,
            max_length=max_length,
            max_train_samples=max_train_samples,
            pad_token_id=int(tokenizer.pad_token_id or 0),
        )
    if disk_cache and not (_disk_path(key) / "meta.json").is_file():
        meta = {
            "task": spec.name,
            "tokenizer": str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__)),
            "max_length": max_length,
            "max_train_samples": max_train_samples,
            "pad_token_id": tokenized.pad_token_id,
            "sizes": {split: len(data) for split, data in tokenized.items()},
        }
        _write_disk(key, dict(tokenized), meta)
    _MEMORY_CACHE[key] = tokenized
    while len(_MEMORY_CACHE) > MEMORY_CACHE_SIZE:
        del _MEMORY_CACHE[next(iter(_MEMORY_CACHE))]  # dicts keep insertion order: the first is the oldest
    return tokenized
