"""ReAugKD's knowledge base (Zhang et al., ACL 2023, sec. 3.3): the train split's teacher embeddings through the
projection head, L2-normalised (``[N, d_S]``), and the teacher's soft labels (``[N, C]``), with an HNSW index for
approximate search (Malkov and Yashunin, TPAMI 2018) and an exact search for checking it.

The approximate search is faiss's ``IndexHNSWFlat`` on inner products (cosine similarity, the vectors being unit
length); the exact search is a plain matrix product and a sort, independent of faiss, so the two check each other
(`recall_at_k`).

A knowledge base is built once per (teacher, head, task, train split, tokenizer, teacher label order) and cached by content hash in
``$KDGRID_CACHE/reaugkd/knowledge_bases/<key>/`` (``kb.npz``, ``index.faiss``, ``kb.json``), beside the teachers'
cache. Its identity (`KBIdentity`) holds the content hashes of what built it; opening it with another expected
identity is refused, naming each field that differs (`StaleKnowledgeBase`), never a path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from kdgrid.core.methods.reaugkd.projection_head import reaugkd_cache_root
from kdgrid.errors import ConfigError

KB_ARRAYS = "kb.npz"
KB_INDEX = "index.faiss"
KB_INFO = "kb.json"
HNSW_M = 32  # graph degree
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 128  # at least k is used
UNRECORDED = "unrecorded"  # an identity field a record written by an older kdgrid lacks


class StaleKnowledgeBase(ConfigError):
    """A knowledge base built for another teacher, head, task, train split, tokenizer or teacher label order."""


@dataclass(frozen=True)
class KBIdentity:
    """The content hashes a knowledge base was built from.

    Attributes:
        teacher: SHA-256 of the teacher's weight files (a Hub teacher: of its name).
        head: the projection head's key (`kdgrid.core.methods.reaugkd.projection_head.head_key`).
        task: the task's name.
        train_split: the tokenized train split's fingerprint (examples, token ids and labels).
        tokenizer: SHA-256 of the tokenizer's vocabulary and casing.
        label_order: the teacher's label order its soft labels were aligned by
            (`kdgrid.core.methods.reaugkd.pipeline.label_order_identity`); `UNRECORDED` in a record written before the
            order was part of the identity, so such a base or student is refused rather than trusted.
    """

    teacher: str
    head: str
    task: str
    train_split: str
    tokenizer: str
    label_order: str = UNRECORDED

    def key(self) -> str:
        """16 hex digits naming the knowledge base."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def differences(self, other: KBIdentity) -> list[str]:
        """The fields where ``other`` differs, as ``"name (built for X, expected Y)"``."""
        return [
            f"{f.name} (built for {getattr(self, f.name)}, expected {getattr(other, f.name)})"
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


def check_identity(built: KBIdentity, expected: KBIdentity, what: str = "knowledge base") -> None:
    """Refuse (`StaleKnowledgeBase`) when ``built`` is not ``expected``, naming every field that differs."""
    differences = built.differences(expected)
    if differences:
        raise StaleKnowledgeBase(
            f"the ReAugKD {what} {built.key()} was built for another " + "; ".join(differences)
        )


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32, contiguous); a zero row stays zero."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.maximum(norms, 1e-12), dtype=np.float32)


def build_hnsw(embeddings: np.ndarray) -> faiss.Index:
    """An HNSW index (inner product) over unit-length ``[N, d]`` float32 rows."""
    index = faiss.IndexHNSWFlat(embeddings.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.add(embeddings)
    return index


def exact_search(base: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact k nearest rows of ``base`` by inner product: similarities ``[B, k]`` (descending) and ids
    ``[B, k]``; ties broken by the smaller id."""
    sims = queries @ base.T
    ids = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, ids, axis=1), ids


def recall_at_k(approximate: np.ndarray, exact: np.ndarray) -> float:
    """The fraction of the exact neighbours ``[B, k]`` that the approximate search ``[B, k]`` found."""
    if exact.size == 0:
        return 1.0
    found = sum(len(set(a.tolist()) & set(e.tolist())) for a, e in zip(approximate, exact, strict=True))
    return found / exact.size


@dataclass
class KnowledgeBase:
    """A loaded knowledge base.

    Attributes:
        embeddings: ``[N, d_S]`` float32, unit-length rows.
        soft_labels: ``[N, C]`` float32 teacher probabilities in the task's label order.
        identity: what it was built from.
        index: the HNSW index over ``embeddings``.
        info: what ``kb.json`` records (sizes, HNSW settings, build time).
    """

    embeddings: np.ndarray
    soft_labels: np.ndarray
    identity: KBIdentity
    index: Any
    info: dict[str, Any]

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    def check_k(self, k: int) -> None:
        if not 1 <= k <= len(self):
            raise ConfigError(
                f"option retrieval_k={k} is invalid; allowed: 1 to the knowledge base's size, {len(self)} "
                "training examples"
            )

    def search(self, queries: np.ndarray, k: int, *, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The k nearest teacher embeddings of unit-length ``[B, d_S]`` queries: similarities ``[B, k]`` and
        ids ``[B, k]``, by HNSW (``exact`` False) or by `exact_search`."""
        self.check_k(k)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if exact:
            return exact_search(self.embeddings, queries, k)
        self.index.hnsw.efSearch = max(HNSW_EF_SEARCH, k)
        threads = faiss.omp_get_max_threads()
        # One thread: a dev batch is a few dozen queries, and on shared CPUs faiss's OpenMP pool spin-waits (a
        # 2,000-entry search measured 40 ms with the pool, 0.4 ms without, on 2 loaded cores).
        faiss.omp_set_num_threads(1)
        try:
            sims, ids = self.index.search(queries, k)
        finally:
            faiss.omp_set_num_threads(threads)
        return sims, ids


def kb_folder(key: str) -> Path:
    return reaugkd_cache_root() / "knowledge_bases" / key


def open_knowledge_base(folder: Path, expected: KBIdentity) -> KnowledgeBase:
    """Load a knowledge base and check it was built for ``expected`` (`check_identity`)."""
    info = json.loads((folder / KB_INFO).read_text())
    built = KBIdentity(**info["identity"])
    check_identity(built, expected)
    with np.load(folder / KB_ARRAYS) as arrays:
        embeddings, soft_labels = arrays["embeddings"], arrays["soft_labels"]
    if len(embeddings) != info["size"] or len(soft_labels) != info["size"]:
        raise StaleKnowledgeBase(
            f"the ReAugKD knowledge base {built.key()} is damaged: {len(embeddings)} embeddings and "
            f"{len(soft_labels)} soft labels, its record says {info['size']}; delete its folder to rebuild it"
        )
    index = faiss.read_index(str(folder / KB_INDEX))
    return KnowledgeBase(embeddings, soft_labels, built, index, info)


def build_knowledge_base(
    embeddings: np.ndarray, soft_labels: np.ndarray, identity: KBIdentity
) -> tuple[KnowledgeBase, float]:
    """A knowledge base of projected teacher embeddings ``[N, d_S]`` (normalised here) and soft labels
    ``[N, C]``, with its HNSW index; and the seconds the index took to build."""
    if len(embeddings) != len(soft_labels) or len(embeddings) == 0:
        raise ConfigError(
            f"a knowledge base needs as many soft labels as embeddings (at least one): {len(embeddings)} "
            f"and {len(soft_labels)}"
        )
    unit = normalize_rows(embeddings)
    started = time.perf_counter()
    index = build_hnsw(unit)
    seconds = time.perf_counter() - started
    info = {
        "identity": asdict(identity),
        "key": identity.key(),
        "size": len(unit),
        "dim": int(unit.shape[1]),
        "classes": int(soft_labels.shape[1]),
        "hnsw": {"M": HNSW_M, "efConstruction": HNSW_EF_CONSTRUCTION, "efSearch": HNSW_EF_SEARCH},
        "index_build_seconds": round(seconds, 4),
        "faiss_version": faiss.__version__,
    }
    labels = np.ascontiguousarray(soft_labels, dtype=np.float32)
    return KnowledgeBase(unit, labels, identity, index, info), seconds


def save_knowledge_base(kb: KnowledgeBase) -> Path:
    """Write ``kb`` to its cache folder atomically (a temporary folder renamed); an existing one is kept."""
    final = kb_folder(kb.identity.key())
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        np.savez(staging / KB_ARRAYS, embeddings=kb.embeddings, soft_labels=kb.soft_labels)
        faiss.write_index(kb.index, str(staging / KB_INDEX))
        (staging / KB_INFO).write_text(json.dumps(kb.info, indent=2, sort_keys=True))
        # OSError: built by another process meanwhile, the same content under the same key
        with contextlib.suppress(OSError):
            os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def cached_knowledge_base(identity: KBIdentity) -> KnowledgeBase | None:
    """The cached knowledge base of ``identity``, or None when it was never built."""
    folder = kb_folder(identity.key())
    if not (folder / KB_INFO).is_file():
        return None
    return open_knowledge_base(folder, identity)
