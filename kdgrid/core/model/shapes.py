"""Model shapes and where each model comes from, read without torch or transformers: the paper's student shapes
(`StudentShape`, `student_shape`: ``bert-tiny``..., ``w{width}-l{layers}``) and SSM students' (`SSMShape`,
``ssm-l6-h384-a12``) with their parameter and FLOP counts; the teachers (`TEACHERS`, aliases, Hub, local; `resolve_teacher`); a model's ``config.json`` read before
any weight (`ModelConfig`, `cached_config`, `fetch_config`) and the teacher's head check. Sweep expansion, the
memory estimate, the store and pre-flight read them here; loading weights is `kdgrid.core.model.models`.

Teachers are named by a Hub name (the paper's fine-tuned BERT-base list of Appendix A.1.3, the BERT-large models
of yoshitomo-matsubara), a local directory, or the offline alias ``minilm-l6`` (the MiniLM base weights; a trial
uses the copy fine-tuned on its task by `kdgrid teacher finetune`, see `kdgrid.core.model.teacher_cache`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kdgrid.core.model import trained_teacher
from kdgrid.core.model.teacher_cache import MINILM_ALIAS, finetuned_teacher_dir
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.suggest import did_you_mean
from kdgrid.trial import assistant_id
from kdgrid.trial import trained_teacher as trained_teacher_value

# huggingface_hub (about 0.2 s) is imported inside the functions that look up the Hub cache: sweep expansion
# (`kdgrid plan`) reads shapes and teachers from here without it.
if TYPE_CHECKING:
    from transformers import BertConfig

CONFIG_FILE = "config.json"
# BertConfig's own defaults, for a config.json that leaves a shape key out (as transformers reads it).
BERT_CONFIG_DEFAULTS = {
    "num_hidden_layers": 12,
    "hidden_size": 768,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}
PREFETCH_HINT = "run `kdgrid prefetch SWEEP` on a machine with network access first"

VOCAB_SIZE = 30522  # bert-base-uncased's WordPiece vocabulary, shared by every teacher and student here
MAX_POSITIONS = 512
TYPE_VOCAB = 2


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

    def param_count(self, num_labels: int = 2, vocab_size: int = VOCAB_SIZE) -> int:
        """Parameters of a `BertForSequenceClassification` of this shape: embeddings (word, position, type,
        LayerNorm), each layer (Q, K, V, output, two LayerNorms, FFN), the pooler and the classifier."""
        d, f = self.width, self.ffn
        embeddings = (vocab_size + MAX_POSITIONS + TYPE_VOCAB) * d + 2 * d
        layer = 4 * (d * d + d) + 2 * d + (d * f + f) + (f * d + d) + 2 * d
        pooler = d * d + d
        return embeddings + self.layers * layer + pooler + self.classifier_param_count(num_labels)

    def classifier_param_count(self, num_labels: int = 2) -> int:
        """Parameters of one classification head (``Linear(width, num_labels)``)."""
        return self.width * num_labels + num_labels

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

SSM_PREFIX = "ssm-"  # a state-space student (`SSMShape`, below): ``ssm-l6-h384-a12``
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
    ``w{width}-l{layers}[-h{heads}][-f{ffn}]`` (defaults: head size 64 where possible, ffn = 4 x width); a name
    starting ``ssm-`` is a state-space student (`SSMShape`, docs/ssm.md)."""
    key = name.strip().lower()
    if key in STUDENTS:
        return STUDENTS[key]
    if key.startswith(SSM_PREFIX):
        return ssm_shape(key)
    match = _SHAPE_RE.match(key)
    if not match:
        raise ConfigError(
            f"unknown student {name!r}; use one of {', '.join(STUDENTS)}, a shape "
            "'w{width}-l{layers}[-h{heads}][-f{ffn}]' such as 'w144-l8', or an SSM student 'ssm-l6-h384-a12'"
        )
    width, layers = int(match["w"]), int(match["l"])
    heads = int(match["h"]) if match["h"] else _default_heads(width)
    ffn = int(match["f"]) if match["f"] else 4 * width
    return StudentShape(layers=layers, width=width, heads=heads, ffn=ffn)


# ------------------------------------------------------------------------------------------------ SSM students
# An SSM student's shape and name, read without torch: what sweep expansion, the memory estimate and the trial
# rules need to know of a state-space student before anything is built.
#
# Names follow Turc et al.'s compact BERTs (L layers, H hidden width, A heads) behind the family prefix:
#
#     ssm-l{layers}-h{width}-a{heads}[-n{state}][-f{ffn}][-causal][-mean]
#
# ``state`` is the SSD state size N per head (default: the head size ``width / heads``, so that the mixer's C and B
# have the width of a teacher head's query and key, as in MOHAWK's Phi-Mamba), ``ffn`` the feed-forward inner size
# (default ``4 x width``), ``-causal`` a forward scan only (default: bidirectional, a forward and a backward scan),
# ``-mean`` mean pooling over the real tokens (default: the [CLS] token). ``ssm-l6-h384-a12`` is MiniLM-L6's shape.
# The canonical name writes every part (``ssm-l6-h384-a12-n32-f1536``), so two spellings of one student are one
# trial.

SSM_CHUNK = 64
"""Tokens per chunk of the SSD scan (`kdgrid.core.model.ssm.scan`): memory per layer grows as ``L x SSM_CHUNK``, not
``L^2``."""
SSM_POOLINGS = ("cls", "mean")

_SSM_NAME_RE = re.compile(
    r"^ssm-l(?P<l>\d+)-h(?P<h>\d+)-a(?P<a>\d+)(?:-n(?P<n>\d+))?(?:-f(?P<f>\d+))?"
    r"(?P<causal>-causal)?(?P<mean>-mean)?$"
)
SSM_NAME_FORM = "ssm-l{layers}-h{width}-a{heads}[-n{state}][-f{ffn}][-causal][-mean]"


@dataclass(frozen=True)
class SSMShape(StudentShape):
    """A state-space student: ``layers`` post-LN blocks of width ``width``, each an SSD mixer of ``heads`` mixing
    heads (one per teacher head) with state size ``state`` per head and a feed-forward of inner size ``ffn``.

    Attributes (beyond `StudentShape`'s):
        state: N, the SSD state size per head (the width of B and C per head).
        causal: a forward scan only; else bidirectional (a forward scan plus a flipped backward scan).
        pooling: ``cls`` (the first token, through a dense + tanh pooler as BERT's) or ``mean`` (the mean over
            real tokens, through the same pooler).
    """

    state: int = 0
    causal: bool = False
    pooling: str = "cls"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.state < 1:
            raise ConfigError(f"SSM student {self.name}: state size must be at least 1")
        if self.pooling not in SSM_POOLINGS:
            raise ConfigError(f"SSM student pooling {self.pooling!r}: use one of {', '.join(SSM_POOLINGS)}")

    @property
    def name(self) -> str:
        suffix = ("-causal" if self.causal else "") + ("-mean" if self.pooling == "mean" else "")
        return f"ssm-l{self.layers}-h{self.width}-a{self.heads}-n{self.state}-f{self.ffn}{suffix}"

    @property
    def directions(self) -> int:
        return 1 if self.causal else 2

    def mixer_param_count(self) -> int:
        """One mixer's parameters: the value and output projections (``d x d`` + bias each), per direction the
        B and C projections (``d x H N`` + bias each) and the decay projection (``d x H`` + bias), and D (``H``)."""
        d, h, n = self.width, self.heads, self.state
        direction = 2 * (d * h * n + h * n) + (d * h + h)
        return 2 * (d * d + d) + self.directions * direction + h

    def param_count(self, num_labels: int = 2, vocab_size: int = VOCAB_SIZE) -> int:
        """Parameters of an `kdgrid.core.model.ssm.model.SSMForSequenceClassification` of this shape: BERT's
        embeddings, per block the mixer, two LayerNorms and the FFN, the pooler and the classifier."""
        d, f = self.width, self.ffn
        embeddings = (vocab_size + MAX_POSITIONS + TYPE_VOCAB) * d + 2 * d
        block = self.mixer_param_count() + 4 * d + (d * f + f) + (f * d + d)
        pooler = d * d + d
        return embeddings + self.layers * block + pooler + self.classifier_param_count(num_labels)

    def flops_per_sequence(self, seq_len: int, num_labels: int = 2) -> int:
        """Forward FLOPs of one sequence (a multiply-add = 2 FLOPs): per block the value / output projections
        (4 L d^2), per direction the B, C and decay projections (2 L d (2 H N + H)) and the chunked scan (per head,
        within chunks of Q = `SSM_CHUNK` tokens ``C B^T`` and its product with the values, 2 L Q (N + P); across chunks
        the states in and out, 4 L N P), the FFN (4 L d f); plus pooler and classifier."""
        n_tok, d, f, h, n = seq_len, self.width, self.ffn, self.heads, self.state
        p = d // h
        q = min(SSM_CHUNK, n_tok)
        scan = h * (2 * n_tok * q * (n + p) + 4 * n_tok * n * p)
        direction = 2 * n_tok * d * (2 * h * n + h) + scan
        per_block = 2 * (2 * n_tok * d * d + 2 * n_tok * d * f) + self.directions * direction
        head = 2 * (d * d + d * num_labels)
        return self.layers * per_block + head


def is_ssm_name(name: str) -> bool:
    """Whether a student name is of the SSM family (its prefix), well formed or not."""
    return name.strip().lower().startswith(SSM_PREFIX)


def ssm_shape(name: str) -> SSMShape:
    """The shape an SSM student name (`SSM_NAME_FORM`) stands for; `ConfigError` naming the form otherwise."""
    match = _SSM_NAME_RE.match(name.strip().lower())
    if not match:
        raise ConfigError(f"unknown SSM student {name!r}; write it {SSM_NAME_FORM!r}, e.g. 'ssm-l6-h384-a12'")
    width, heads = int(match["h"]), int(match["a"])
    if heads < 1 or width % heads:
        raise ConfigError(f"SSM student {name!r}: width {width} is not divisible by its {heads} heads")
    return SSMShape(
        layers=int(match["l"]),
        width=width,
        heads=heads,
        ffn=int(match["f"]) if match["f"] else 4 * width,
        state=int(match["n"]) if match["n"] else width // heads,
        causal=bool(match["causal"]),
        pooling="mean" if match["mean"] else "cls",
    )


# Turc et al. (2019) released compact BERTs for every L in TURC_LAYERS and H in TURC_WIDTHS, with H/64 heads.
TURC_LAYERS = (2, 4, 6, 8, 10, 12)
TURC_WIDTHS = (128, 256, 512, 768)


def turc_hub_name(shape: StudentShape) -> str:
    """The Hub name of Turc et al.'s compact BERT of a shape; `ConfigError` if they released none."""
    if (
        shape.layers not in TURC_LAYERS
        or shape.width not in TURC_WIDTHS
        or shape.heads != shape.width // 64
        or shape.ffn != 4 * shape.width
    ):
        raise ConfigError(
            f"init 'pretrain': Turc et al. released no compact BERT of shape {shape.name} (layers in "
            f"{TURC_LAYERS}, width in {TURC_WIDTHS}, width/64 heads, ffn 4 x width); set init_from to a "
            "pretrained checkpoint of this shape"
        )
    return f"google/bert_uncased_L-{shape.layers}_H-{shape.width}_A-{shape.heads}"


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
        shape: the teacher's shape (layers, width, heads, ffn): from its ``config.json`` wherever one is on this
            machine (a directory, the Hugging Face cache), else the shape kdgrid declares for a paper teacher
            (`TEACHERS`), which `load_teacher` checks against the real config before loading weights.
        is_local: ``source`` is a directory on this machine.
        task: the task it was resolved for (named in messages), if known.
        shape_declared: ``shape`` is the declared one (no config was found when the teacher was resolved).
    """

    source: str
    shape: StudentShape
    is_local: bool
    task: str | None = None
    shape_declared: bool = False


@dataclass(frozen=True)
class ModelConfig:
    """What kdgrid reads from a model's ``config.json`` before loading any weight.

    Attributes:
        source: the directory or Hub name it was read from.
        shape: the encoder's shape.
        num_labels: classifier outputs (``len(id2label)``, else ``num_labels``, else transformers' default 2).
        problem_type: the config's ``problem_type`` (``regression``, ``single_label_classification``, ...) or
            None.
        max_positions: its position embeddings (``max_position_embeddings``): the longest input it takes.
        has_classifier: whether the checkpoint holds a trained classification head (its ``architectures`` name a
            ``...ForSequenceClassification``; without ``architectures``, whether it gives ``id2label``). An encoder
            checkpoint (``BertModel``, ``BertForPreTraining``) gets a new head of the task's size, so its label
            count means nothing.
    """

    source: str
    shape: StudentShape
    num_labels: int
    problem_type: str | None
    max_positions: int = MAX_POSITIONS
    has_classifier: bool = True

    @property
    def is_regression(self) -> bool:
        """A regression head, as transformers decides it: ``problem_type`` if set, else one output."""
        if self.problem_type:
            return self.problem_type == "regression"
        return self.num_labels == 1


def hub_offline() -> bool:
    """True when the Hugging Face Hub must not be contacted (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def parse_model_config(data: dict[str, Any], source: str) -> ModelConfig:
    """A `ModelConfig` from the JSON of a ``config.json``. Read as a BERT config whether or not it names its
    ``model_type`` (Turc et al.'s compact BERTs do not, and transformers 5's AutoConfig refuses them); a config
    of another model type is refused (`ConfigError`): kdgrid's students and teachers are BERTs."""
    model_type = data.get("model_type")
    if model_type not in (None, "bert"):
        raise ConfigError(
            f"{source}: its config.json is a {model_type!r} model; kdgrid loads BERT models only "
            "(BertForSequenceClassification)"
        )
    sizes = {key: data.get(key, default) for key, default in BERT_CONFIG_DEFAULTS.items()}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in sizes.values()):
        raise ConfigError(f"{source}: config.json has a non-integer size among {sizes}")
    id2label = data.get("id2label")
    num_labels = len(id2label) if isinstance(id2label, dict) and id2label else int(data.get("num_labels", 2))
    return ModelConfig(
        source=source,
        shape=StudentShape(
            layers=sizes["num_hidden_layers"],
            width=sizes["hidden_size"],
            heads=sizes["num_attention_heads"],
            ffn=sizes["intermediate_size"],
        ),
        num_labels=num_labels,
        problem_type=data.get("problem_type"),
        max_positions=int(data.get("max_position_embeddings", MAX_POSITIONS)),
        has_classifier=_has_classifier(data),
    )


def _has_classifier(data: dict[str, Any]) -> bool:
    """See `ModelConfig.has_classifier`."""
    architectures = data.get("architectures")
    if isinstance(architectures, list) and architectures:
        return any(str(name).endswith("ForSequenceClassification") for name in architectures)
    return isinstance(data.get("id2label"), dict) and bool(data["id2label"])


def _read_config_file(path: Path, source: str) -> ModelConfig:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"{source}: {CONFIG_FILE} cannot be read ({error})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {CONFIG_FILE} is not a JSON object")
    return parse_model_config(data, source)


def local_config(path: Path) -> ModelConfig:
    """The config of a ``save_pretrained`` directory; `ConfigError` if it has none."""
    if not (path / CONFIG_FILE).is_file():
        raise ConfigError(f"{path} has no {CONFIG_FILE} (expected a `save_pretrained` directory)")
    return _read_config_file(path / CONFIG_FILE, str(path))


def is_local_source(source: str) -> bool:
    """``source`` names a directory on this machine (relative paths: the working directory)."""
    return Path(source).expanduser().is_dir()


def cached_config(source: str) -> ModelConfig | None:
    """The config of a directory or of a Hub model already in the local Hugging Face cache, without the
    network; None for a Hub model whose config is not cached."""
    if is_local_source(source):
        return local_config(Path(source).expanduser())
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(source, CONFIG_FILE)
    except ValueError:  # not a valid repo id
        return None
    return _read_config_file(Path(found), source) if isinstance(found, str) else None


def fetch_config(source: str, *, what: str) -> ModelConfig:
    """The config of a directory or a Hub model: from the local cache, else downloaded (unless offline).

    Raises:
        KdgridError: the Hub model is unknown, or not cached while offline (the message names `kdgrid prefetch`).
    """
    if is_local_source(source):
        return local_config(Path(source).expanduser())
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        path = hf_hub_download(source, CONFIG_FILE, local_files_only=hub_offline())
    except LocalEntryNotFoundError:
        raise KdgridError(hub_unavailable(source, what)) from None
    except (RepositoryNotFoundError, HFValidationError):
        raise KdgridError(
            f"{what}: {source!r} is neither a directory here nor a model on the Hugging Face Hub; check the name "
            "(Hub ids are owner/model) or the path"
        ) from None
    except OSError as error:
        raise KdgridError(f"{what}: the config of {source!r} could not be fetched ({error})") from None
    return _read_config_file(Path(path), source)


def hub_unavailable(source: str, what: str) -> str:
    """The one message for a Hub model that is not in the local cache and cannot be downloaded now."""
    why = "HF_HUB_OFFLINE forbids downloading it" if hub_offline() else "the Hub could not be reached"
    return (
        f"{what} {source!r} could not be found on the Hugging Face Hub or in its local cache (not cached, and "
        f"{why}); {PREFETCH_HINT}, or name a local directory"
    )


def _local_shape(path: Path) -> StudentShape:
    return local_config(path).shape


def resolve_teacher(name: str, task: str) -> ResolvedTeacher:
    """Resolve a trial's teacher for a task without loading weights.

    ``name`` is ``minilm-l6`` (the fine-tuned copy in the teacher cache: `kdgrid teacher finetune TASK` makes
    it), ``bert-base`` / ``bert-large`` (the paper's Hub teacher of the task), a Hub name, or a local directory
    (a relative path is relative to the working directory). Raises `ConfigError` for an unknown alias or task
    and `KdgridError` when a needed local teacher is missing or an unlisted Hub teacher cannot be found.
    """
    assistant = assistant_id(name)
    if assistant is not None:
        return _assistant_teacher(assistant, task)
    if name == MINILM_ALIAS:
        path = finetuned_teacher_dir(task)  # raises KdgridError naming the fine-tune command
        return ResolvedTeacher(str(path), _local_shape(path), True, task)
    if name in TEACHERS:
        table = TEACHERS[name]
        if task not in table:
            raise ConfigError(
                f"no {name} teacher for task {task!r}; the paper's teachers cover {', '.join(table)}; "
                f"name a Hub model or a local directory as the teacher instead"
            )
        spec = table[task]
        return _hub_teacher(spec, task)
    path = Path(name).expanduser()
    if path.is_dir():
        return ResolvedTeacher(str(path), _local_shape(path), True, task)
    for table in TEACHERS.values():
        for spec in table.values():
            if spec.hub_name == name:
                return _hub_teacher(spec, task)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name) and not name.startswith((".", "/")):
        return ResolvedTeacher(name, fetch_config(name, what="teacher").shape, False, task)
    raise KdgridError(
        f"teacher {name!r} is neither a local directory, a Hub name (owner/model), nor one of the aliases "
        f"{MINILM_ALIAS}, {', '.join(TEACHERS)}{did_you_mean(name, [MINILM_ALIAS, *TEACHERS])}"
    )


def _assistant_teacher(trial_id: str, task: str) -> ResolvedTeacher:
    """A teacher assistant (``trial:<id>``, `kdgrid.core.model.trained_teacher`): its saved student, checked against
    its done row, where this process was told of one; else the shape its sweep planned (nothing to load yet)."""
    directory = trained_teacher.trained_source(trial_id)
    if directory is not None:
        return ResolvedTeacher(str(directory), _local_shape(directory), True, task)
    plan = trained_teacher.planned(trial_id)
    if plan is None:
        raise KdgridError(trained_teacher.unknown_message(trial_id))
    return ResolvedTeacher(trained_teacher_value(trial_id), plan.shape, False, task, shape_declared=True)


def _hub_teacher(spec: TeacherSpec, task: str) -> ResolvedTeacher:
    """A paper teacher, planned with its cached config's shape, else the declared one."""
    config = cached_config(spec.hub_name)
    if config is None:
        return ResolvedTeacher(spec.hub_name, spec.shape, False, task, shape_declared=True)
    return ResolvedTeacher(spec.hub_name, config.shape, False, task)


def teacher_head_problems(source: str, task: str, config: ModelConfig, num_labels: int) -> list[str]:
    """Why a teacher's head (its label count, regression or classification, from its config) cannot serve a
    task of ``num_labels`` outputs (1: regression); empty when it fits."""
    if not config.has_classifier:
        return []  # an encoder checkpoint: its head is new, of the task's size
    where = f"task {task}" if task else "the task"
    task_kind = "regression" if num_labels == 1 else "classification"
    kind = "regression" if config.is_regression else "classification"
    if config.num_labels == num_labels and kind == task_kind:
        return []
    return [
        f"teacher {source} has {config.num_labels} outputs ({kind}, from its {CONFIG_FILE}); "
        f"{where} needs {num_labels} ({task_kind}): name a teacher fine-tuned on this task"
    ]


def teacher_config_problems(teacher: ResolvedTeacher, config: ModelConfig, num_labels: int) -> list[str]:
    """Why a teacher cannot serve its task, from its config alone: its head does not fit the task's
    ``num_labels`` (`teacher_head_problems`), or its real shape is not the one its trials were planned with.
    Empty when it fits."""
    problems = teacher_head_problems(teacher.source, teacher.task, config, num_labels)
    if config.shape != teacher.shape:
        planned = (
            "the shape kdgrid declares for it (its config was not cached when the trials were planned)"
            if teacher.shape_declared
            else "its config when the trials were planned"
        )
        problems.append(
            f"teacher {teacher.source}: its {CONFIG_FILE} gives shape {config.shape.name}, but its trials were "
            f"planned with {teacher.shape.name}, {planned}; run `kdgrid prefetch SWEEP` and plan again"
        )
    return problems


def check_teacher_config(teacher: ResolvedTeacher, num_labels: int) -> None:
    """Read the teacher's config (cached, else downloaded unless offline) and refuse (`ConfigError`) a teacher
    that `teacher_config_problems` finds wrong, before any weight loads."""
    problems = teacher_config_problems(teacher, fetch_config(teacher.source, what="teacher"), num_labels)
    if problems:
        raise ConfigError("; ".join(problems))
