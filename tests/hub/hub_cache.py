"""A Hugging Face cache shaped like the Hub's, for running kdgrid's real loading code offline.

`build_hub_cache(root)` writes, under ``root``:

- ``hub/`` (``HF_HUB_CACHE``): one ``models--{org}--{name}`` folder per repo id kdgrid names (the paper's
  BERT-base and BERT-large teachers of the 8 GLUE tasks, Turc et al.'s compact BERTs the sweeps initialise from)
  and ``datasets--nyu-mll--glue``, each laid out as ``huggingface_hub`` downloads it: ``blobs/<etag>`` (the file's
  bytes; the etag is the git blob SHA-1 of a regular file, the SHA-256 of an LFS file: weights, parquet),
  ``refs/main`` (the commit hash, no newline) and ``snapshots/<commit>/<path>``, a relative symlink to its blob.
  Offline, ``hf_hub_download`` reads ``refs/main`` to find the snapshot and returns the file under it.
- ``datasets/`` (``HF_DATASETS_CACHE``): what ``datasets.load_dataset("nyu-mll/glue", config)`` leaves there
  when it runs online: ``nyu-mll___glue/{config}/0.0.0/{commit}/`` with ``dataset_info.json`` and one Arrow file
  per split (``glue-{split}.arrow``). Offline, ``datasets`` 5.2 never reads the Hub cache's snapshot: its
  ``dataset_module_factory`` raises on offline mode before any download and falls back to
  ``CachedDatasetModuleFactory``, which reads only this folder. The builder therefore runs ``datasets``' own Parquet
  builder over the snapshot's parquet files, with the repo id, dataset name and commit the online path uses, so the
  folder is written by the library itself.

Point ``HF_HOME`` at ``root`` (``HF_HUB_CACHE`` = ``root/hub``, ``HF_DATASETS_CACHE`` = ``root/datasets``) and set
``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``: ``from_pretrained(repo_id)``, ``AutoTokenizer.from_pretrained``
and ``load_dataset("nyu-mll/glue", config)`` then resolve from it unchanged.

The teachers keep their real depth and head count (12 / 12 for BERT-base, 24 / 16 for BERT-large, so layer
matching sees the real teacher layers) at a tiny width, and are trained (`train_teacher`): they read the generated
data's marker words and beat the majority class by far, in the class order of the real checkpoint. The compact
BERTs are random, at their real shape (``kdgrid`` checks a ``pretrain`` checkpoint's shape against the
student's). All share bert-base-uncased's WordPiece vocabulary (30,522 tokens), taken from the offline MiniLM
teacher, as every real repo here does. The GLUE data is generated text, deterministic (seeded): 256 train rows,
64 per dev split, 16 per test split; a row's label is a marker word in its first sentence.

The files are the real repos' kinds: minimal 2020 textattack configs (no label keys on the binary teachers, no
``problem_type`` on STS-B), ``model.safetensors`` beside ``pytorch_model.bin`` on the compact BERTs,
``tokenizer.json`` on the BERT-large teachers, one legacy (non-zip) ``pytorch_model.bin`` (`LEGACY_BIN_REPO`), and
the RTE BERT-base teacher as weak as the weakest real one (`WEAK_TEACHER_Z`, `weaken_teacher`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import torch
from datasets.info import DatasetInfosDict
from datasets.load import LocalDatasetModuleFactory, get_dataset_builder_class
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData
from tokenizers import Tokenizer
from transformers import BertConfig, BertForPreTraining, BertForSequenceClassification, BertTokenizerFast

from kdgrid.assets import teacher_dir
from tests.hub.teacher_training import fine_tune_head, plant_marker_reader, predict

GLUE_REPO = "nyu-mll/glue"
SEED = 20240601

# ------------------------------------------------------------------------------------------------------- models


@dataclass(frozen=True)
class HubModel:
    """One model repo of the fixture.

    Attributes:
        repo_id: the exact Hub id kdgrid names.
        layers, width, heads, ffn: the fixture's shape (see the module docstring).
        num_labels: classifier outputs (``None``: a pretrained encoder saved as ``BertForPreTraining``).
        class_order: the dataset label index each output means, output by output, as the real checkpoint was
            trained (``None`` for an encoder and for a regression head). The fixture teacher is fine-tuned in
            this order (`train_teacher`): its output k predicts the label ``class_order[k]``.
        task: the GLUE config a teacher is fine-tuned on (``None`` for an encoder).
        config_extra: keys the real repo's ``config.json`` carries beyond the shape.
        drop_config_keys: keys ``save_pretrained`` writes that the real ``config.json`` lacks.
        tokenizer_files: whether the repo ships ``tokenizer_config.json`` and ``special_tokens_map.json`` (all
            of them ship ``vocab.txt``).
        tokenizer_json: whether the repo ships a fast tokenizer's ``tokenizer.json`` too.
        safetensors: whether the repo ships ``model.safetensors`` beside ``pytorch_model.bin`` (transformers
            then reads the safetensors file).
        legacy_bin: ``pytorch_model.bin`` in torch's legacy (non-zip) pickle format, as torch < 1.6 saved it.
        weaker: a fine-tuned teacher made realistically weak: its head's bias moved until its dev accuracy is
            this many standard errors above the majority class (`weaken_teacher`).
    """

    repo_id: str
    layers: int
    width: int
    heads: int
    ffn: int
    num_labels: int | None
    class_order: tuple[int, ...] | None = None
    task: str | None = None
    config_extra: dict[str, Any] = field(default_factory=dict)
    drop_config_keys: tuple[str, ...] = ()
    tokenizer_files: bool = True
    tokenizer_json: bool = False
    safetensors: bool = False
    legacy_bin: bool = False
    weaker: float | None = None


GLUE_CONFIGS = ("cola", "mrpc", "stsb", "rte", "qqp", "mnli", "sst2", "qnli")

# The dataset's MNLI labels are 0 entailment, 1 neutral, 2 contradiction (the ClassLabel below). BERT-base MNLI
# checkpoints of 2020 were trained with transformers' legacy run_glue processor, whose label list is
# [contradiction, entailment, neutral]: output 0 means dataset label 2, output 1 label 0, output 2 label 1.
# - textattack/bert-base-uncased-MNLI: confirmed by QData/TextAttack issue 684 ("0 (model) -> 2 (GT), 1 (model) ->
#   0 (GT), 2 (model) -> 1 (GT)"), https://github.com/QData/TextAttack/issues/684 (kdgrid uses ishan's, below).
# - ishan/bert-base-uncased-mnli (kdgrid's MNLI teacher): NOT confirmed offline. Public code disagrees: one
#   project using a local copy of it maps {"contradiction": 0, "entailment": 1, "neutral": 2} (the legacy order
#   above); another maps every "bert-base-uncased-mnli" to {"neutral": 0, "entailment": 1, "contradiction": 2}.
#   The fixture declares the legacy order, the more common of the two; its config carries generic names.
LEGACY_RUN_GLUE_MNLI_ORDER = (2, 0, 1)

# TextAttack's GLUE models (model cards: "fine-tuned with TextAttack and the glue dataset loaded using the nlp
# library") were trained on the `nlp`/`datasets` GLUE labels, so their binary classes follow the dataset's order;
# their configs carry generic LABEL_k names, BertForSequenceClassification, model_type bert, and the repos ship
# pytorch_model.bin without safetensors on main (2020 uploads). STS-B is a 1-output regression head. From the
# public model cards and configs as remembered, NOT re-checked offline here.
# yoshitomo-matsubara/bert-large-uncased-{task}: fine-tuned with torchdistill on `datasets`' GLUE
# (load_dataset("glue", task)), so every class order is the dataset's, MNLI included (the sources are cited in
# `kdgrid.core.teacher.label_order.KNOWN_LABEL_ORDERS`); pytorch_model.bin, tokenizer.json and a training.log (the repo
# listing of 2021). Generic LABEL_k names: a config derived from their BERT-base MNLI model carries them.
# google/bert_uncased_L-{L}_H-{H}_A-{A} (Turc et al.): converted TF checkpoints whose config.json has no
# `architectures` (keras-team/keras-hub issue 3009, "Fix 'architectures' error for hf://google/bert_uncased");
# pytorch_model.bin and vocab.txt, no tokenizer_config.json. Its `model_type` is NOT confirmed: the config was
# rewritten by the Hub staff on 2020-04-24 (285 -> 382 bytes) and the repos are tagged `bert`, which suggests it is
# there now; the fixture leaves it out, the harder case (kdgrid reads both; AutoConfig of transformers 5 needs it).
# The shapes are Turc et al.'s (BERT's README table).
_TEXTATTACK_NAMES = {
    "mnli": None,  # kdgrid's BERT-base MNLI teacher is ishan's, not textattack's
    "qqp": "QQP",
    "qnli": "QNLI",
    "sst2": "SST-2",
    "cola": "CoLA",
    "stsb": "STS-B",
    "mrpc": "MRPC",
    "rte": "RTE",
}
NUM_LABELS = {"cola": 2, "mrpc": 2, "stsb": 1, "rte": 2, "qqp": 2, "mnli": 3, "sst2": 2, "qnli": 2}
# The real textattack configs are minimal 2020 ones: the binary teachers' carry no id2label, label2id or
# num_labels (transformers' default, 2 labels, applies), the STS-B teacher's no problem_type (a one-output head is
# read as regression). `save_pretrained` writes these keys: the fixture drops them.
TEXTATTACK_DROPPED_KEYS = ("id2label", "label2id", "num_labels", "problem_type")
# The weakest real teacher, RTE's, scores about 0.73 on its 277 dev examples: 4.4 standard errors above the
# majority class. The fixture's RTE teacher is made as weak, on its own dev split (`weaken_teacher`).
WEAK_TEACHER_Z = 4.4
# One 2020 upload saved by torch < 1.6, in the legacy (non-zip) pickle format. Its storages are keyed by their
# memory addresses (as in the real files), so this repo's bytes, unlike every other's, differ between builds.
LEGACY_BIN_REPO = "textattack/bert-base-uncased-CoLA"

# The teachers keep depth and head count, at head size 4 (BERT-base: 12 layers, 12 heads; BERT-large: 24, 16).
BASE_TEACHER_SHAPE = {"layers": 12, "width": 48, "heads": 12, "ffn": 192}
LARGE_TEACHER_SHAPE = {"layers": 24, "width": 64, "heads": 16, "ffn": 256}
# The compact BERTs the paper's sweeps use (bert-tiny, -mini, -small) and bert-medium, at their real shape.
COMPACT_SHAPES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512)}


def _classifier_config(task: str, *, minimal: bool = False) -> dict[str, Any]:
    """The classification keys of a fine-tuned GLUE teacher's config.json: generic label names. ``minimal``: a
    2020 textattack config: only the architecture, plus one label name for the regression head."""
    n = NUM_LABELS[task]
    if minimal:
        regression = {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}} if n == 1 else {}
        return {"architectures": ["BertForSequenceClassification"], **regression}
    return {
        "architectures": ["BertForSequenceClassification"],
        "id2label": {str(k): f"LABEL_{k}" for k in range(n)},
        "label2id": {f"LABEL_{k}": k for k in range(n)},
        **({"problem_type": "regression"} if n == 1 else {}),
    }


def _textattack_dropped_keys(task: str) -> tuple[str, ...]:
    """The keys `save_pretrained` writes that a textattack config lacks (`TEXTATTACK_DROPPED_KEYS`)."""
    if NUM_LABELS[task] == 1:
        return ("problem_type", "num_labels")
    return TEXTATTACK_DROPPED_KEYS


def paper_models() -> list[HubModel]:
    """Every model repo kdgrid names for the paper (`kdgrid.core.model.models.TEACHERS`, `kdgrid.core.job.init`)."""
    models = []
    for task in GLUE_CONFIGS:
        n = NUM_LABELS[task]
        identity = None if n == 1 else tuple(range(n))
        suffix = _TEXTATTACK_NAMES[task]
        base_id = (
            "ishan/bert-base-uncased-mnli" if suffix is None else f"textattack/bert-base-uncased-{suffix}"
        )
        base_order = LEGACY_RUN_GLUE_MNLI_ORDER if task == "mnli" else identity
        textattack = suffix is not None
        models.append(
            HubModel(
                base_id,
                **BASE_TEACHER_SHAPE,
                num_labels=n,
                class_order=base_order,
                task=task,
                config_extra=_classifier_config(task, minimal=textattack),
                drop_config_keys=_textattack_dropped_keys(task) if textattack else (),
                legacy_bin=base_id == LEGACY_BIN_REPO,
                weaker=WEAK_TEACHER_Z if task == "rte" else None,
            )
        )
        models.append(
            HubModel(
                f"yoshitomo-matsubara/bert-large-uncased-{task}",
                **LARGE_TEACHER_SHAPE,
                num_labels=n,
                class_order=identity,
                task=task,
                config_extra=_classifier_config(task),
                tokenizer_json=True,
            )
        )
    for layers, width in COMPACT_SHAPES.values():
        heads = width // 64
        models.append(
            HubModel(
                f"google/bert_uncased_L-{layers}_H-{width}_A-{heads}",
                layers,
                width,
                heads,
                4 * width,
                num_labels=None,
                drop_config_keys=(
                    "architectures",
                    "model_type",
                    "transformers_version",
                    "dtype",
                    "torch_dtype",
                ),
                tokenizer_files=False,
                safetensors=True,  # on main beside pytorch_model.bin (converted by the Hub's bot)
            )
        )
    return models


# --------------------------------------------------------------------------------------------- the cache layout


def git_blob_sha1(data: bytes) -> str:
    """The etag the Hub gives a regular (non-LFS) file: git's blob hash."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


LFS_SUFFIXES = (".bin", ".safetensors", ".parquet", ".h5", ".msgpack", ".arrow")


def write_repo(hub_cache: Path, repo_id: str, files: dict[str, bytes], repo_type: str = "model") -> Path:
    """Write one repo into ``hub_cache`` the way ``hf_hub_download`` leaves it; returns its snapshot folder.

    The commit hash is derived from the repo id and the files (40 hex digits, stable across runs).
    """
    folder = hub_cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    digest = hashlib.sha1(repo_id.encode())
    etags = {}
    for path in sorted(files):
        data = files[path]
        etag = hashlib.sha256(data).hexdigest() if path.endswith(LFS_SUFFIXES) else git_blob_sha1(data)
        etags[path] = etag
        digest.update(f"{path}\0{etag}\0".encode())
    commit = digest.hexdigest()
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    for path, data in files.items():
        blob = folder / "blobs" / etags[path]
        if not blob.exists():
            blob.write_bytes(data)
        link = snapshot / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


def saved_files(
    model: torch.nn.Module,
    drop_config_keys: Sequence[str],
    *,
    safetensors: bool = False,
    legacy: bool = False,
) -> dict[str, bytes]:
    """``config.json`` and ``pytorch_model.bin`` of a model (most real repos predate safetensors), in torch's
    legacy non-zip format if ``legacy``; ``model.safetensors`` too if ``safetensors``."""
    from safetensors.torch import save as safetensors_bytes

    config = model.config.to_dict()
    for key in drop_config_keys:
        config.pop(key, None)
    for key in ("_name_or_path", "_attn_implementation_autoset", "_commit_hash", "transformers_version"):
        config.pop(key, None)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "pytorch_model.bin"
        torch.save(state, weights, _use_new_zipfile_serialization=not legacy)
        files = {
            "config.json": (json.dumps(config, indent=2, sort_keys=True) + "\n").encode(),
            "pytorch_model.bin": weights.read_bytes(),
        }
    if safetensors:
        # Tied tensors (the masked-LM decoder is the word embeddings) stored once, as the Hub's conversions do.
        seen: set[int] = set()
        unique = {}
        for key, tensor in state.items():
            if tensor.data_ptr() not in seen:
                seen.add(tensor.data_ptr())
                unique[key] = tensor
        files["model.safetensors"] = safetensors_bytes(unique, metadata={"format": "pt"})
    return files


def vocabulary_files(with_config: bool, *, tokenizer_json: bool = False) -> dict[str, bytes]:
    source = teacher_dir()
    files = {"vocab.txt": (source / "vocab.txt").read_bytes()}
    if tokenizer_json:
        # A fast tokenizer's serialisation of the same WordPiece vocabulary (lower-casing, [CLS]/[SEP] pairs).
        # (bert-base-uncased's, as the real repos ship it: no truncation or padding stored in it).
        backend = Tokenizer.from_str(
            BertTokenizerFast.from_pretrained(str(source)).backend_tokenizer.to_str()
        )
        backend.no_truncation()
        backend.no_padding()
        files["tokenizer.json"] = backend.to_str().encode()
    if with_config:
        # What a 2020 `save_pretrained` of BertTokenizer wrote: lower-casing, the special tokens, max length.
        files["tokenizer_config.json"] = json.dumps({"do_lower_case": True, "model_max_length": 512}).encode()
        files["special_tokens_map.json"] = (source / "special_tokens_map.json").read_bytes()
    return files


def vocab_size() -> int:
    return len((teacher_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines())


def build_model(spec: HubModel, seed: int) -> torch.nn.Module:
    """The random model of a repo, float32, seeded."""
    config = BertConfig(
        vocab_size=vocab_size(),
        hidden_size=spec.width,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        intermediate_size=spec.ffn,
        max_position_embeddings=512,
        type_vocab_size=2,
        **({"num_labels": spec.num_labels} if spec.num_labels else {}),
        **spec.config_extra,
    )
    torch.manual_seed(seed)
    model = BertForPreTraining(config) if spec.num_labels is None else BertForSequenceClassification(config)
    return model.float().eval()


def teacher_examples(spec: HubModel, split: str, seed: int) -> tuple[list[tuple[str, ...]], list[float]]:
    """The generated rows of ``split`` of the teacher's task as (texts, targets in the teacher's own output
    order): the target of a row of label y is the output k with ``class_order[k] == y`` (regression: the score)."""
    assert spec.task is not None
    config = GLUE[spec.task]
    rows = generate_split(config, split, seed)
    texts = list(zip(*(rows[c] for c in config.text_columns), strict=True))
    if spec.class_order is None:
        return texts, [float(y) for y in rows["label"]]
    return texts, [float(spec.class_order.index(y)) for y in rows["label"]]


def vocabulary_file() -> Path:
    return teacher_dir() / "vocab.txt"


def train_teacher(model: torch.nn.Module, spec: HubModel, seed: int) -> None:
    """Make a fixture teacher read the marker words and fine-tune its head on its task's generated train split in
    its class order (`tests.hub.teacher_training`); ``seed`` is the GLUE data's (`SEED`)."""
    texts, targets = teacher_examples(spec, "train", seed)
    plant_marker_reader(model, vocabulary_file(), marker_words())
    fine_tune_head(model, vocabulary_file(), texts, targets, seed=seed)


def dev_split(task: str) -> str:
    """The first dev split of a GLUE config (MNLI: ``validation_matched``)."""
    return next(s for s in GLUE[task].splits if s.startswith("validation"))


@torch.no_grad()
def weaken_teacher(model: torch.nn.Module, spec: HubModel, data_seed: int) -> float:
    """Move a trained binary teacher's output-1 bias until its accuracy on its task's dev split is the nearest it
    can be to ``spec.weaker`` standard errors above the majority class (its [CLS] state carries the marker
    word diluted by the sentence's length, so a bias shift misreads the longer sentences of one class first, as a
    weak real teacher errs). Returns that accuracy."""
    assert spec.weaker is not None and spec.num_labels == 2 and spec.task is not None
    texts, targets = teacher_examples(spec, dev_split(spec.task), data_seed)
    logits = predict(model, vocabulary_file(), texts)
    labels = torch.tensor(targets).long()
    n = len(labels)
    majority = torch.bincount(labels).max().item() / n
    target = majority + spec.weaker * (majority * (1 - majority) / n) ** 0.5
    margin = logits[:, 1] - logits[:, 0]  # output 1 is predicted where margin + shift > 0
    cuts = sorted({0.0, *(-m - 1e-4 for m in margin.tolist()), *(-m + 1e-4 for m in margin.tolist())})
    accuracy = {cut: ((margin + cut > 0).long() == labels).float().mean().item() for cut in cuts}
    shift = min(cuts, key=lambda cut: (abs(accuracy[cut] - target), abs(cut)))
    model.classifier.bias[1] += shift
    return accuracy[shift]


def write_model(
    hub_cache: Path, spec: HubModel, seed: int, *, data_seed: int = SEED, train: bool = True
) -> Path:
    model = build_model(spec, seed)
    if train and spec.task is not None:
        train_teacher(model, spec, data_seed)
        if spec.weaker is not None:
            weaken_teacher(model, spec, data_seed)
    files = {
        **saved_files(model, spec.drop_config_keys, safetensors=spec.safetensors, legacy=spec.legacy_bin),
        **vocabulary_files(spec.tokenizer_files, tokenizer_json=spec.tokenizer_json),
    }
    return write_repo(hub_cache, spec.repo_id, files)


# ------------------------------------------------------------------------------------------------------ GLUE


@dataclass(frozen=True)
class GlueConfig:
    """One GLUE config as ``nyu-mll/glue`` has it: text columns, label names (``None``: regression, float32)
    and splits (test splits have label -1)."""

    name: str
    text_columns: tuple[str, ...]
    label_names: tuple[str, ...] | None
    splits: tuple[str, ...] = ("train", "validation", "test")


# Column names, ClassLabel names and split names of the nyu-mll/glue dataset card's `dataset_info`
# (https://huggingface.co/datasets/nyu-mll/glue, README.md).
GLUE = {
    c.name: c
    for c in (
        GlueConfig("cola", ("sentence",), ("unacceptable", "acceptable")),
        GlueConfig("sst2", ("sentence",), ("negative", "positive")),
        GlueConfig("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent")),
        GlueConfig("qqp", ("question1", "question2"), ("not_duplicate", "duplicate")),
        GlueConfig("stsb", ("sentence1", "sentence2"), None),
        GlueConfig(
            "mnli",
            ("premise", "hypothesis"),
            ("entailment", "neutral", "contradiction"),
            ("train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"),
        ),
        GlueConfig("qnli", ("question", "sentence"), ("entailment", "not_entailment")),
        GlueConfig("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment")),
    )
}
ROWS = {"train": 256, "test": 16}  # every other split (the dev sets): DEV_ROWS
DEV_ROWS = 64
SENTENCE_WORDS = (3, 8)  # words per generated sentence, before the marker: a pair stays under 32 tokens
STSB_LEVELS = 6  # STS-B scores 0..5, one marker word each
MARKER_COUNT = STSB_LEVELS


def glue_features(config: GlueConfig) -> datasets.Features:
    label = (
        datasets.Value("float32")
        if config.label_names is None
        else datasets.ClassLabel(names=list(config.label_names))
    )
    return datasets.Features(
        {
            **{c: datasets.Value("string") for c in config.text_columns},
            "label": label,
            "idx": datasets.Value("int32"),
        }
    )


def _vocabulary() -> list[str]:
    return (teacher_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()


def _plain(words: Iterable[str]) -> list[str]:
    return [w for w in words if w.isalpha() and w.isascii() and len(w) >= 3]


def _words() -> list[str]:
    """Plain lower-case words of bert-base-uncased's vocabulary (so generated text tokenizes to whole words):
    the filler of every sentence."""
    return _plain(_vocabulary()[2000:6000])


def marker_words() -> tuple[str, ...]:
    """One marker word per class (per STS-B score level), from a part of the vocabulary the filler never uses:
    a sentence's label is the marker it carries, so the data is learnable and a teacher fine-tuned on it beats
    the majority class by far."""
    return tuple(_plain(_vocabulary()[7000:8000])[:MARKER_COUNT])


def _sentence(rng: random.Random, words: Sequence[str], marker: str | None, question: bool) -> str:
    chosen = [rng.choice(words) for _ in range(rng.randint(*SENTENCE_WORDS))]
    if marker is not None:
        chosen.insert(rng.randint(0, len(chosen)), marker)
    return " ".join(chosen) + ("?" if question else ".")


def _split_rows(split: str) -> int:
    if split.startswith("test"):
        return ROWS["test"]
    return ROWS["train"] if split == "train" else DEV_ROWS


def generate_split(config: GlueConfig, split: str, seed: int) -> dict[str, list[Any]]:
    """Rows of one split: random sentences of `SENTENCE_WORDS` words, the first text column carrying the marker
    word of the row's class (`marker_words`; STS-B: of its score rounded, the score being that level plus up to
    0.4 of noise, clipped to [0, 5]). Classes cycle (every class present), shuffled; test labels are -1 as on the
    Hub (their first column carries a random marker)."""
    rng = random.Random(f"{seed}-{config.name}-{split}")
    words, markers = _words(), marker_words()
    n = _split_rows(split)
    test = split.startswith("test")
    levels = STSB_LEVELS if config.label_names is None else len(config.label_names)
    classes = [i % levels for i in range(n)]
    rng.shuffle(classes)
    columns: dict[str, list[Any]] = {c: [] for c in config.text_columns}
    for row in range(n):
        for position, column in enumerate(config.text_columns):
            marker = markers[classes[row]] if position == 0 else None
            columns[column].append(_sentence(rng, words, marker, column.startswith("question")))
    labels: list[Any]
    if config.label_names is None:
        noisy = [min(5.0, max(0.0, k + rng.uniform(-0.4, 0.4))) for k in classes]
        labels = [-1.0] * n if test else [round(x, 3) for x in noisy]
    else:
        labels = [-1] * n if test else classes
    return {**columns, "label": labels, "idx": list(range(n))}


def _glue_card(configs: Iterable[GlueConfig], infos: dict[str, datasets.DatasetInfo]) -> bytes:
    """The dataset card: YAML ``configs`` (data files per split) and ``dataset_info`` (features, splits), written
    by ``datasets``' own card helpers, as ``push_to_hub`` writes them."""
    card_data = DatasetCardData(pretty_name="GLUE (General Language Understanding Evaluation benchmark)")
    MetadataConfigs(
        {c.name: {"data_files": [{"split": s, "path": f"{c.name}/{s}-*"} for s in c.splits]} for c in configs}
    ).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    return str(DatasetCard(f"---\n{card_data.to_yaml()}\n---\n\n# GLUE (generated test fixture)\n")).encode()


def write_glue(hub_cache: Path, datasets_cache: Path, configs: Sequence[str], seed: int) -> Path:
    """The ``nyu-mll/glue`` repo (parquet per config and split, the card) and its prepared ``datasets`` cache."""
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        return _write_glue([GLUE[name] for name in configs], hub_cache, datasets_cache, seed)
    finally:
        if bars:
            datasets.enable_progress_bars()


def _write_glue(chosen: list[GlueConfig], hub_cache: Path, datasets_cache: Path, seed: int) -> Path:
    files: dict[str, bytes] = {}
    infos: dict[str, datasets.DatasetInfo] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for config in chosen:
            features = glue_features(config)
            split_infos = []
            for split in config.splits:
                table = datasets.Dataset.from_dict(generate_split(config, split, seed), features=features)
                path = Path(tmp) / f"{split}.parquet"
                table.to_parquet(str(path))
                files[f"{config.name}/{split}-00000-of-00001.parquet"] = path.read_bytes()
                split_infos.append(datasets.SplitInfo(name=split, num_examples=len(table)))
            infos[config.name] = datasets.DatasetInfo(
                features=features,
                config_name=config.name,
                splits=datasets.SplitDict({s.name: s for s in split_infos}),
            )
    files["README.md"] = _glue_card(chosen, infos)
    snapshot = write_repo(hub_cache, GLUE_REPO, files, repo_type="dataset")
    commit = snapshot.name
    local = LocalDatasetModuleFactory(str(snapshot)).get_module()
    # Online, `load_dataset("nyu-mll/glue", config)` prepares the same card and data files with the builder named
    # "glue", repo id "nyu-mll/glue" and hash = the commit, into <cache>/nyu-mll___glue/<config>/0.0.0/<commit>.
    # The builder accepts a repo id only with hf:// data files, which need the network to resolve: it prepares
    # here without one (into <tmp>/glue/...), and the folder is moved under the namespaced name.
    staging = Path(tempfile.mkdtemp(dir=datasets_cache, prefix=".glue-"))
    try:
        for config in chosen:
            builder = get_dataset_builder_class(local, dataset_name="glue")(
                cache_dir=str(staging),
                dataset_name="glue",
                config_name=config.name,
                hash=commit,
                info=local.dataset_infos.get(config.name),
                base_path=str(snapshot),
            )
            builder.download_and_prepare()
        target = datasets_cache / GLUE_REPO.replace("/", "___")
        for config_dir in (staging / "glue").iterdir():
            shutil.rmtree(target / config_dir.name, ignore_errors=True)
            target.mkdir(parents=True, exist_ok=True)
            config_dir.rename(target / config_dir.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return snapshot


# ---------------------------------------------------------------------------------------------------- entry


def build_hub_cache(
    root: Path,
    *,
    repo_ids: Iterable[str] | None = None,
    glue_configs: Sequence[str] = GLUE_CONFIGS,
    seed: int = SEED,
    train_teachers: bool = True,
) -> Path:
    """Populate ``root/hub`` and ``root/datasets`` (see the module docstring); returns ``root``.

    ``repo_ids`` limits the models (default: every repo of `paper_models`); ``glue_configs`` the GLUE configs.
    Every model's weights are seeded by ``seed`` and its position in `paper_models`, so a repo's bytes do not
    depend on which others are built. Teachers are fine-tuned on their task's generated data (`train_teacher`)
    unless ``train_teachers`` is false (random teachers, as a permuted or untrained teacher is made in tests).
    """
    root = Path(root)
    hub_cache, datasets_cache = root / "hub", root / "datasets"
    hub_cache.mkdir(parents=True, exist_ok=True)
    datasets_cache.mkdir(parents=True, exist_ok=True)
    wanted = None if repo_ids is None else set(repo_ids)
    known = paper_models()
    unknown = (wanted or set()) - {m.repo_id for m in known}
    if unknown:
        raise ValueError(f"no fixture model for {sorted(unknown)}")
    for index, spec in enumerate(known):
        if wanted is None or spec.repo_id in wanted:
            write_model(hub_cache, spec, seed + index, data_seed=seed, train=train_teachers)
    if glue_configs:
        write_glue(hub_cache, datasets_cache, glue_configs, seed)
    return root


def offline_environment(root: Path) -> dict[str, str]:
    """The environment variables that make the libraries read ``root`` offline."""
    root = Path(root)
    return {
        "HF_HOME": str(root),
        "HF_HUB_CACHE": str(root / "hub"),
        "HF_DATASETS_CACHE": str(root / "datasets"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
