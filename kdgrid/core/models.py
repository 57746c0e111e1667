"""Students and teachers: the paper's shapes, parameter counts, FLOPs, and where each teacher comes from.

Students are plain `transformers` BERTs (`BertForSequenceClassification`) built from a `StudentShape`; capture
reads Q, K and V through hooks and recomputes the scores of the layers a loss needs, so no model has to return its
attention maps: models are built with eager attention (on CPU as fast as the fused kernel for these shapes, and
faster in the backward pass), and the training runtime switches them to PyTorch's fused attention on CUDA
(`kdgrid.core.runtime.Runtime.place`).

Teachers are named by a Hub name (the paper's fine-tuned BERT-base list of Appendix A.1.3, the BERT-large models
of yoshitomo-matsubara), a local directory, or the offline alias ``minilm-l6`` (the MiniLM base weights; a trial
uses the copy fine-tuned on its task by `kdgrid teacher finetune`, see `kdgrid.core.teacher_cache`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kdgrid.core.teacher_cache import MINILM_ALIAS, finetuned_teacher_dir
from kdgrid.errors import ConfigError, KdgridError

# transformers is imported inside the functions that build or load models: it costs about 2 s, and sweep
# expansion (`kdgrid plan`) reads shapes and teachers from here without needing it.
if TYPE_CHECKING:
    from transformers import BertConfig, BertForSequenceClassification

VOCAB_SIZE = 30522  # bert-base-uncased's WordPiece vocabulary, shared by every teacher and student here
MAX_POSITIONS = 512
TYPE_VOCAB = 2
# Attention kernels by device type: capture needs only the Q / K / V projections, never the attention maps, so
# the choice is speed alone (measured on CPU, bert-tiny step: eager 0.055 s, sdpa 0.058 s; MiniLM forward equal).
ATTENTION_BY_DEVICE = {"cpu": "eager", "cuda": "sdpa"}
ATTENTION_IMPLEMENTATION = ATTENTION_BY_DEVICE[
    "cpu"
]  # what models are built with, before a runtime places them


@dataclass(frozen=True)
class StudentShape:
    """A BERT encoder's shape: ``layers`` transformer layers of width ``width`` with ``heads`` attention heads
    and a feed-forward inner size ``ffn`` (the paper's students use ``ffn = 4 * width``)."""

    layers: int
    width: int
    heads: int
    ffn: int

    def __post_init__(self) -> None:
        if min(self.layers, self.width, self.heads, self.ffn) < 1:
            raise ConfigError(f"student shape {self} has a non-positive size")
        if self.width % self.heads:
            raise ConfigError(
                f"student width {self.width} is not divisible by its {self.heads} attention heads"
            )

    @property
    def name(self) -> str:
        return f"w{self.width}-l{self.layers}-h{self.heads}-f{self.ffn}"

    def bert_config(self, num_labels: int, vocab_size: int = VOCAB_SIZE) -> BertConfig:
        """A `BertConfig` of this shape (eager attention, BERT's default dropout and initializer)."""
        from transformers import BertConfig

        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=self.width,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            intermediate_size=self.ffn,
            max_position_embeddings=MAX_POSITIONS,
            type_vocab_size=TYPE_VOCAB,
            num_labels=num_labels,
            problem_type="regression" if num_labels == 1 else "single_label_classification",
        )
        config._attn_implementation = ATTENTION_IMPLEMENTATION
        return config

    def param_count(self, num_labels: int = 2, vocab_size: int = VOCAB_SIZE) -> int:
        """Parameters of a `BertForSequenceClassification` of this shape: embeddings (word, position, type,
        LayerNorm), each layer (Q, K, V, output, two LayerNorms, FFN), the pooler and the classifier."""
        d, f = self.width, self.ffn
        embeddings = (vocab_size + MAX_POSITIONS + TYPE_VOCAB) * d + 2 * d
        layer = 4 * (d * d + d) + 2 * d + (d * f + f) + (f * d + d) + 2 * d
        pooler = d * d + d
        classifier = d * num_labels + num_labels
        return embeddings + self.layers * layer + pooler + classifier

    def flops_per_sequence(self, seq_len: int, num_labels: int = 2) -> int:
        """Forward FLOPs of one sequence of ``seq_len`` tokens, counting a multiply-add as 2 FLOPs: per layer the
        Q/K/V/output projections (4 L d^2), the FFN (2 L d f), scores and the weighted sum of values (2 L^2 d);
        plus pooler and classifier. Embedding lookups, softmax, LayerNorm and activations are not counted."""
        n, d, f = seq_len, self.width, self.ffn
        per_layer = 2 * (4 * n * d * d + 2 * n * d * f + 2 * n * n * d)
        head = 2 * (d * d + d * num_labels)
        return self.layers * per_layer + head


# The paper's students (section 4.2; Turc et al.'s compact BERTs): FFN = 4 x width, head size 64.
STUDENTS: dict[str, StudentShape] = {
    "bert-tiny": StudentShape(layers=2, width=128, heads=2, ffn=512),
    "bert-mini": StudentShape(layers=4, width=256, heads=4, ffn=1024),
    "bert-small": StudentShape(layers=4, width=512, heads=8, ffn=2048),
    "bert-medium": StudentShape(layers=8, width=512, heads=8, ffn=2048),
}

_SHAPE_RE = re.compile(r"^w(?P<w>\d+)-l(?P<l>\d+)(?:-h(?P<h>\d+))?(?:-f(?P<f>\d+))?$")


def _default_heads(width: int) -> int:
    """Heads of a free-form shape: head size 64 where it divides (BERT's habit), else the largest head count
    <= width/32 that divides the width (Table 2's widths 132, 142, 154, ... are not multiples of 64)."""
    if width % 64 == 0:
        return width // 64
    for heads in range(max(1, width // 32), 0, -1):
        if width % heads == 0:
            return heads
    return 1


def student_shape(name: str) -> StudentShape:
    """The shape of a student named ``bert-tiny`` / ``bert-mini`` / ``bert-small`` / ``bert-medium`` or written
    ``w{width}-l{layers}[-h{heads}][-f{ffn}]`` (defaults: head size 64 where possible, ffn = 4 x width)."""
    key = name.strip().lower()
    if key in STUDENTS:
        return STUDENTS[key]
    match = _SHAPE_RE.match(key)
    if not match:
        raise ConfigError(
            f"unknown student {name!r}; use one of {', '.join(STUDENTS)} or a shape "
            "'w{width}-l{layers}[-h{heads}][-f{ffn}]' such as 'w144-l8'"
        )
    width, layers = int(match["w"]), int(match["l"])
    heads = int(match["h"]) if match["h"] else _default_heads(width)
    ffn = int(match["f"]) if match["f"] else 4 * width
    return StudentShape(layers=layers, width=width, heads=heads, ffn=ffn)


def shape_of_config(config: BertConfig) -> StudentShape:
    return StudentShape(
        layers=config.num_hidden_layers,
        width=config.hidden_size,
        heads=config.num_attention_heads,
        ffn=config.intermediate_size,
    )


# ---------------------------------------------------------------------------------------------------- teachers


@dataclass(frozen=True)
class TeacherSpec:
    """A Hub teacher: its name and shape (known without the network, so a job validates offline)."""

    hub_name: str
    shape: StudentShape


_BASE = StudentShape(layers=12, width=768, heads=12, ffn=3072)
_LARGE = StudentShape(layers=24, width=1024, heads=16, ffn=4096)

# Appendix A.1.3: the fine-tuned BERT-base teachers per GLUE task, and the BERT-large ones.
TEACHERS: dict[str, dict[str, TeacherSpec]] = {
    "bert-base": {
        "mnli": TeacherSpec("ishan/bert-base-uncased-mnli", _BASE),
        "qqp": TeacherSpec("textattack/bert-base-uncased-QQP", _BASE),
        "qnli": TeacherSpec("textattack/bert-base-uncased-QNLI", _BASE),
        "sst2": TeacherSpec("textattack/bert-base-uncased-SST-2", _BASE),
        "cola": TeacherSpec("textattack/bert-base-uncased-CoLA", _BASE),
        "stsb": TeacherSpec("textattack/bert-base-uncased-STS-B", _BASE),
        "mrpc": TeacherSpec("textattack/bert-base-uncased-MRPC", _BASE),
        "rte": TeacherSpec("textattack/bert-base-uncased-RTE", _BASE),
    },
    "bert-large": {
        task: TeacherSpec(f"yoshitomo-matsubara/bert-large-uncased-{task}", _LARGE)
        for task in ("mnli", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte")
    },
}


@dataclass(frozen=True)
class ResolvedTeacher:
    """Where a trial's teacher weights come from.

    Attributes:
        source: a local directory or a Hub name, loadable by ``from_pretrained``.
        shape: the teacher's shape (layers, width, heads, ffn).
        is_local: ``source`` is a directory on this machine.
    """

    source: str
    shape: StudentShape
    is_local: bool


def hub_offline() -> bool:
    """True when the Hugging Face Hub must not be contacted (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _local_shape(path: Path) -> StudentShape:
    from transformers import AutoConfig

    if not (path / "config.json").is_file():
        raise ConfigError(
            f"teacher directory {path} has no config.json (expected a `save_pretrained` directory)"
        )
    return shape_of_config(AutoConfig.from_pretrained(str(path)))


def resolve_teacher(name: str, task: str) -> ResolvedTeacher:
    """Resolve a trial's teacher for a task without loading weights.

    ``name`` is ``minilm-l6`` (the fine-tuned copy in the teacher cache: `kdgrid teacher finetune TASK` makes
    it), ``bert-base`` / ``bert-large`` (the paper's Hub teacher of the task), a Hub name, or a local directory.
    Raises `ConfigError` for an unknown alias or task and `KdgridError` when a needed local teacher is missing.
    """
    if name == MINILM_ALIAS:
        path = finetuned_teacher_dir(task)  # raises KdgridError naming the fine-tune command
        return ResolvedTeacher(str(path), _local_shape(path), True)
    if name in TEACHERS:
        table = TEACHERS[name]
        if task not in table:
            raise ConfigError(
                f"no {name} teacher for task {task!r}; the paper's teachers cover {', '.join(table)}; "
                f"name a Hub model or a local directory as the teacher instead"
            )
        spec = table[task]
        return ResolvedTeacher(spec.hub_name, spec.shape, False)
    path = Path(name).expanduser()
    if path.is_dir():
        return ResolvedTeacher(str(path), _local_shape(path), True)
    for table in TEACHERS.values():
        for spec in table.values():
            if spec.hub_name == name:
                return ResolvedTeacher(name, spec.shape, False)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name) and not name.startswith((".", "/")):
        return ResolvedTeacher(name, _hub_shape(name), False)
    raise KdgridError(
        f"teacher {name!r} is neither a local directory, a Hub name (owner/model), nor one of the aliases "
        f"{MINILM_ALIAS}, {', '.join(TEACHERS)}"
    )


def _hub_shape(hub_name: str) -> StudentShape:
    """The shape of an unlisted Hub teacher, from its config (the Hub or the local Hub cache)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(hub_name, local_files_only=hub_offline())
    except OSError as error:
        raise KdgridError(
            f"teacher {hub_name!r} could not be found on the Hugging Face Hub or in its local cache "
            f"({type(error).__name__}); fetch it with `kdgrid prefetch SWEEP` while online, or name a local directory"
        ) from None
    return shape_of_config(config)


def load_pretrained_bert(
    source: str, num_labels: int, *, what: str, ignore_mismatched_sizes: bool = False
) -> BertForSequenceClassification:
    """Load ``source`` (Hub name or directory) as an eager-attention `BertForSequenceClassification`.

    A missing Hub model (offline, or not found) becomes a `KdgridError` naming ``what`` and ``source``.
    """
    from transformers import BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    local = Path(source).expanduser().is_dir()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # a new classifier head is expected; its warning is noise here
    try:
        model = BertForSequenceClassification.from_pretrained(
            str(Path(source).expanduser()) if local else source,
            num_labels=num_labels,
            attn_implementation=ATTENTION_IMPLEMENTATION,
            local_files_only=local or hub_offline(),
            ignore_mismatched_sizes=ignore_mismatched_sizes,
        )
    except OSError as error:
        where = "directory" if local else "Hugging Face Hub model"
        raise KdgridError(
            f"{what}: the {where} {source!r} could not be loaded ({str(error).splitlines()[0][:200]}); "
            f"{'check the path' if local else 'fetch it with `kdgrid prefetch SWEEP` while online, or name a local directory'}"
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return model


def load_teacher(teacher: ResolvedTeacher, num_labels: int) -> BertForSequenceClassification:
    """The teacher in eval mode with gradients off; its head must have ``num_labels`` outputs."""
    model = load_pretrained_bert(teacher.source, num_labels, what="teacher")
    if model.config.num_labels != num_labels:
        raise ConfigError(
            f"teacher {teacher.source} has {model.config.num_labels} outputs, the task needs {num_labels}"
        )
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
        raise KdgridError(
            f"the tokenizer of teacher {teacher.source!r} could not be loaded ({str(error).splitlines()[0][:200]})"
        ) from None
