"""Loading models: students are plain `transformers` BERTs (`BertForSequenceClassification`) built from a
`kdgrid.core.model.shapes.StudentShape` (`bert_config`); teachers and pre-trained checkpoints are loaded in float32
(`load_checkpoint`, `load_pretrained_bert`, `load_teacher`, `load_tokenizer`), their keys checked; the torch floor. Shapes, teacher names and configs
are read without torch in `kdgrid.core.model.shapes`.

Capture reads Q, K and V through hooks and recomputes the scores of the layers a loss needs, so no model has to
return its attention maps: models are built with eager attention (on CPU as fast as the fused kernel for these
shapes, and faster in the backward pass), and the training runtime switches them to PyTorch's fused attention on
CUDA (`kdgrid.core.model.runtime.Runtime.place`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kdgrid.core.model.shapes import (
    MAX_POSITIONS,
    PREFETCH_HINT,
    TYPE_VOCAB,
    VOCAB_SIZE,
    ResolvedTeacher,
    StudentShape,
    check_teacher_config,
    hub_offline,
    hub_unavailable,
    is_local_source,
)
from kdgrid.errors import KdgridError

# transformers (about 2 s) is imported inside the functions that build or load models.
if TYPE_CHECKING:
    from transformers import BertConfig, BertForSequenceClassification

# transformers refuses `torch.load` (every `pytorch_model.bin`: the paper's teachers and compact BERTs) below
# torch 2.6, and transformers 5 disables torch below it altogether.
TORCH_FLOOR = (2, 6)
# Attention kernels by device type: capture needs only the Q / K / V projections, never the attention maps, so
# the choice is speed alone (measured on CPU, bert-tiny step: eager 0.055 s, sdpa 0.058 s; MiniLM forward equal).
ATTENTION_BY_DEVICE = {"cpu": "eager", "cuda": "sdpa"}
ATTENTION_IMPLEMENTATION = ATTENTION_BY_DEVICE[
    "cpu"
]  # what models are built with, before a runtime places them


def bert_config(shape: StudentShape, num_labels: int, vocab_size: int = VOCAB_SIZE) -> BertConfig:
    """A `BertConfig` of ``shape`` (eager attention, BERT's default dropout and initializer)."""
    from transformers import BertConfig

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=shape.width,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.ffn,
        max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=TYPE_VOCAB,
        num_labels=num_labels,
        problem_type="regression" if num_labels == 1 else "single_label_classification",
        attn_implementation=ATTENTION_IMPLEMENTATION,  # transformers' own argument, checked by the model
    )
    return config


def check_torch_version(version: str | None = None) -> None:
    """Refuse a torch older than `TORCH_FLOOR` (``version`` defaults to the installed one) with one message."""
    if version is None:
        import torch

        version = torch.__version__
    match = re.match(r"(\d+)\.(\d+)", version)
    if match and (int(match[1]), int(match[2])) < TORCH_FLOOR:
        floor = ".".join(map(str, TORCH_FLOOR))
        raise KdgridError(
            f"kdgrid needs torch >= {floor}, found {version}: transformers refuses to read pytorch_model.bin "
            f"checkpoints (the paper's teachers and compact BERTs) with an older torch; upgrade torch"
        )


# The documented differences between a checkpoint's keys and a `BertForSequenceClassification`'s. A checkpoint
# may carry pre-training heads (`BertForPreTraining` / `BertForMaskedLM`: ``cls.predictions.*``,
# ``cls.seq_relationship.*``) and the position-ids buffer older checkpoints saved; they are not used. Where the head
# is meant to start fresh (a student's init, a base model to fine-tune), the classifier and the pooler (absent from
# masked-LM checkpoints) may be missing: they are drawn fresh and named in the row. Any other missing or unexpected
# key (a renamed layer, another architecture) would leave weights at their random init without an error, so it
# refuses the checkpoint.
UNUSED_KEY_PREFIXES = ("cls.", "bert.embeddings.position_ids")
FRESH_HEAD_PREFIXES = ("classifier.", "bert.pooler.")
KEYS_NAMED = 8  # keys a refusal lists at most


@dataclass(frozen=True)
class LoadedBert:
    """A loaded checkpoint and the model keys it did not provide (drawn fresh: only ``FRESH_HEAD_PREFIXES`` keys,
    and only where the head was meant to be fresh), sorted."""

    model: BertForSequenceClassification
    fresh_keys: tuple[str, ...]


def key_problems(
    missing: Iterable[str], unexpected: Iterable[str], mismatched: Iterable[str], *, fresh_head: bool
) -> tuple[list[str], tuple[str, ...]]:
    """What of a checkpoint's loading report is not documented (module comment above), and the keys drawn fresh.

    Args:
        missing: model keys the checkpoint lacks; unexpected: checkpoint keys the model has no place for;
            mismatched: keys of another shape (loaded with ``ignore_mismatched_sizes``: drawn fresh too).
        fresh_head: the classifier and pooler may be missing or mismatched (drawn fresh).

    Returns:
        One phrase per kind of problem (empty when the checkpoint loads as documented), and the fresh keys.
    """
    allowed_fresh = FRESH_HEAD_PREFIXES if fresh_head else ()
    fresh = sorted({*missing, *mismatched})
    wrong_missing = [k for k in sorted(missing) if not k.startswith(allowed_fresh)]
    wrong_mismatched = [k for k in sorted(mismatched) if not k.startswith(allowed_fresh)]
    wrong_unexpected = [k for k in sorted(unexpected) if not k.startswith(UNUSED_KEY_PREFIXES)]
    problems = [
        f"{what} {len(keys)} key(s) {_some(keys)}"
        for what, keys in (
            ("the model expects and the checkpoint lacks", wrong_missing),
            ("the checkpoint has of another shape", wrong_mismatched),
            ("the checkpoint has and the model has no place for", wrong_unexpected),
        )
        if keys
    ]
    return problems, tuple(k for k in fresh if k.startswith(allowed_fresh))


def _some(keys: list[str]) -> str:
    shown = ", ".join(keys[:KEYS_NAMED])
    return f"({shown}{', ...' if len(keys) > KEYS_NAMED else ''})"


def load_checkpoint(
    source: str, num_labels: int, *, what: str, fresh_head: bool, ignore_mismatched_sizes: bool = False
) -> LoadedBert:
    """Load ``source`` (Hub name or directory) as an eager-attention float32 `BertForSequenceClassification`,
    whatever dtype it was saved in (transformers 5 would keep a bf16 checkpoint in bf16), its keys checked.

    Raises:
        KdgridError: a missing Hub model (offline, or not found), naming ``what`` and ``source``; a checkpoint
            whose missing or unexpected keys are not the documented ones (`key_problems`), naming them.
    """
    import torch
    from transformers import BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    check_torch_version()
    local = is_local_source(source)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the loading report is read below: its table is noise here
    try:
        model, info = BertForSequenceClassification.from_pretrained(
            str(Path(source).expanduser()) if local else source,
            num_labels=num_labels,
            dtype=torch.float32,
            attn_implementation=ATTENTION_IMPLEMENTATION,
            local_files_only=local or hub_offline(),
            ignore_mismatched_sizes=ignore_mismatched_sizes,
            output_loading_info=True,
        )
    except OSError as error:
        if not local and hub_offline():
            raise KdgridError(hub_unavailable(source, what)) from None
        where = "directory" if local else "Hugging Face Hub model"
        raise KdgridError(
            f"{what}: the {where} {source!r} could not be loaded ({str(error).splitlines()[0][:200]}); "
            f"{'check the path' if local else PREFETCH_HINT + ', or name a local directory'}"
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    problems, fresh = key_problems(
        info.get("missing_keys", ()),
        info.get("unexpected_keys", ()),
        [entry[0] for entry in info.get("mismatched_keys", ())],
        fresh_head=fresh_head,
    )
    if problems:
        head = "the classifier and pooler may start fresh; " if fresh_head else ""
        raise KdgridError(
            f"{what}: {source} does not match a BERT classifier's weights: {'; '.join(problems)}. Loaded anyway, "
            f"those weights would stay random without an error ({head}pre-training heads "
            f"{', '.join(p + '*' for p in UNUSED_KEY_PREFIXES)} are ignored); check that it is a BERT checkpoint "
            "saved by transformers"
        )
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        raise KdgridError(
            f"{what}: {source} loaded with parameters of {sorted(map(str, dtypes))}, not float32"
        )
    return LoadedBert(model, fresh)


def load_pretrained_bert(
    source: str,
    num_labels: int,
    *,
    what: str,
    fresh_head: bool = False,
    ignore_mismatched_sizes: bool = False,
) -> BertForSequenceClassification:
    """`load_checkpoint`'s model alone: for callers that record nothing of the keys drawn fresh."""
    return load_checkpoint(
        source, num_labels, what=what, fresh_head=fresh_head, ignore_mismatched_sizes=ignore_mismatched_sizes
    ).model


def load_teacher(
    teacher: ResolvedTeacher, num_labels: int, *, fresh_head: bool = False
) -> BertForSequenceClassification:
    """The teacher in eval mode with gradients off. Its config is checked first (`check_teacher_config`: a head
    of ``num_labels`` outputs, the planned shape), so a wrong teacher is one message, not a loader's error.
    ``fresh_head``: the classifier and pooler may be missing (drawn fresh): only for a teacher the trials declare
    not meant to be accurate (``teacher_gate: false``, which every row records); any other teacher's checkpoint
    must hold its head."""
    check_teacher_config(teacher, num_labels)
    model = load_pretrained_bert(teacher.source, num_labels, what="teacher", fresh_head=fresh_head)
    model.eval()
    model.requires_grad_(False)
    return model


def load_tokenizer(teacher: ResolvedTeacher):
    """The teacher's tokenizer (students share the teacher's vocabulary)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(
            teacher.source, local_files_only=teacher.is_local or hub_offline()
        )
    except OSError as error:
        if not teacher.is_local and hub_offline():
            raise KdgridError(hub_unavailable(teacher.source, "the teacher's tokenizer")) from None
        raise KdgridError(
            f"the tokenizer of teacher {teacher.source!r} could not be loaded ({str(error).splitlines()[0][:200]})"
        ) from None
