"""The four initialization schemes of the paper's section 3.1, and their checks before anything trains.

- ``random``: BERT's own initializer (normal(0, 0.02)), seeded by the trial's seed.
- ``pretrain``: weights of a pretrained BERT of the student's exact shape: ``init_from`` (a Hub name or a local
  ``save_pretrained`` directory) or, by default, Turc et al.'s compact BERT
  ``google/bert_uncased_L-{layers}_H-{width}_A-{heads}``.
- ``general_distillation``: a checkpoint produced by a general-distillation (pre-training distillation) run,
  always a local directory given as ``init_from``. Format: what ``save_pretrained`` writes for any BERT of the
  student's shape (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``; a ``BertModel``,
  ``BertForMaskedLM``, ``BertForPreTraining`` or ``BertForSequenceClassification``; only the encoder
  (``bert.*``) weights are used, the classifier starts fresh). An optional ``general_distillation.json`` beside it
  describes the run (teacher, corpus, steps); it is copied into the trial's result (``extra``).
- ``general_distillation`` or ``pretrain`` with the trial option ``init_recipe`` (a recipe name or file): the
  content-addressed checkpoint of that pre-training recipe completed by the trial's student and teacher
  (`kdgrid.core.pretrained.needed.recipe_for_trial`, `kdgrid.core.pretrained.artifacts.artifact_dir`), made by
  ``kdgrid pretrain``; its key is recorded in the result (``extra["init_recipe"]``).
- ``preload``: the embeddings, the pooler and chosen teacher layers copied into a student of the teacher's width,
  head count and FFN size (DistilBERT's scheme). The layers are the trial option ``preload_layers`` (1-based
  teacher layers, one per student layer) or by default evenly spaced ``round(i * L_T / L_S)``, i = 1..L_S. The
  source is ``init_from`` (Hub name or directory) or the trial's teacher.

In every scheme the classification head is freshly initialised from the trial's seed. A checkpoint's keys are
checked as it loads (`kdgrid.core.model.models.load_checkpoint`): the keys it does not provide and that start fresh (the
classifier, and the pooler of a masked-LM checkpoint) are recorded (``extra["init_fresh_keys"]``); any other
missing or unexpected key refuses it, since those weights would silently stay random.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import BertForSequenceClassification

from kdgrid.core.choices import INIT_SCHEMES, unknown_choice
from kdgrid.core.model.models import (
    ATTENTION_IMPLEMENTATION,
    bert_config,
    load_checkpoint,
    load_pretrained_bert,
)
from kdgrid.core.model.runtime import set_attention
from kdgrid.core.model.shapes import (
    VOCAB_SIZE,
    ResolvedTeacher,
    SSMShape,
    StudentShape,
    cached_config,
    local_config,
    shape_of_config,
    turc_hub_name,
)
from kdgrid.core.model.ssm.init import build_ssm_student
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.needed import recipe_for_trial
from kdgrid.core.trial_rules import GENERAL_DISTILLATION_NEEDS_INIT_FROM, preload_problems
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial


def preload_layers(trial: Trial, student_layers: int, teacher_layers: int) -> list[int]:
    """The 1-based teacher layers copied into student layers 1..L_S by ``preload``."""
    chosen = trial.option("preload_layers")
    if chosen is None:
        return [round(i * teacher_layers / student_layers) for i in range(1, student_layers + 1)]
    layers = [int(x) for x in chosen]
    if len(layers) != student_layers or not all(1 <= x <= teacher_layers for x in layers):
        raise ConfigError(
            f"option preload_layers={chosen!r} must list {student_layers} teacher layers, each in 1..{teacher_layers}"
        )
    return layers


def init_source(trial: Trial, shape: StudentShape, teacher: ResolvedTeacher) -> str | None:
    """Where the scheme takes weights from (``None`` for random)."""
    if trial.init == "random":
        return None
    use = recipe_for_trial(trial)
    if use is not None:
        return str(artifacts.artifact_dir(use.recipe))
    if trial.init == "pretrain":
        return trial.init_from or turc_hub_name(shape)
    if trial.init == "general_distillation":
        if not trial.init_from:
            raise ConfigError(GENERAL_DISTILLATION_NEEDS_INIT_FROM)
        return trial.init_from
    return trial.init_from or teacher.source  # preload


def _local_config_shape(path: Path) -> StudentShape:
    return local_config(path).shape


def check_init(trial: Trial, shape: StudentShape, teacher: ResolvedTeacher) -> None:
    """Fail with `ConfigError` when the scheme cannot apply to this student (before any training).

    Shapes are checked wherever they are known without the network (local directories, a Hub checkpoint in the
    local Hugging Face cache, the teacher's shape). Relative paths are relative to the working directory.
    """
    if trial.init not in INIT_SCHEMES:
        raise ConfigError(unknown_choice("init", trial.init, INIT_SCHEMES))
    source = init_source(trial, shape, teacher)
    if source is None:
        return
    use = recipe_for_trial(trial)
    if use is not None and not artifacts.exists(use.recipe):
        raise ConfigError(
            f"init {trial.init!r}: the checkpoint of recipe {use.name!r} for {use.recipe.student} (key "
            f"{use.recipe.key}) is not made yet; make it with: {use.recipe.command()}"
        )
    if trial.init == "preload":
        source_shape = teacher.shape if source == teacher.source else None
        if source_shape is None:
            found = cached_config(source)
            source_shape = found.shape if found is not None else None
        if source_shape is not None:
            _refuse_preload(shape, source_shape, source)
            preload_layers(trial, shape.layers, source_shape.layers)
        return
    path = Path(source).expanduser()
    if trial.init == "general_distillation" and not path.is_dir():
        raise ConfigError(
            f"init 'general_distillation': init_from {source!r} is not a directory ({path.absolute()})"
        )
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"init {trial.init!r}: {path} has no config.json (not a save_pretrained directory)"
            )
        _check_same_shape(shape, _local_config_shape(path), trial.init, source)
        return
    cached = cached_config(source)  # a Hub checkpoint: checked here only if it is already cached
    if cached is not None:
        _check_same_shape(shape, cached.shape, trial.init, source)


def _check_same_shape(student: StudentShape, found: StudentShape, scheme: str, source: str) -> None:
    if found != student:
        raise ConfigError(
            f"init {scheme!r}: {source} has shape {found.name}, the student is {student.name}; "
            "the checkpoint must have the student's layers, width, heads and ffn"
        )


def _refuse_preload(student: StudentShape, source: StudentShape, source_name: str) -> None:
    problems = preload_problems(student, source, source_name)
    if problems:
        raise ConfigError(problems[0])


def build_student(
    trial: Trial,
    shape: StudentShape,
    num_labels: int,
    teacher: ResolvedTeacher,
    teacher_model: BertForSequenceClassification | None = None,
    vocab_size: int | None = None,
) -> tuple[BertForSequenceClassification, dict[str, object]]:
    """A student initialised by ``trial.init``, with every random draw seeded by ``trial.seed`` (the global
    torch RNG is left as it was). Returns the model (eager attention, train mode) and facts to record.

    ``vocab_size`` (the tokenizer's) defaults to the teacher model's; a loaded checkpoint must match it. ``teacher_model`` (already loaded) spares a reload for preload.
    """
    if vocab_size is None and teacher_model is not None:
        vocab_size = teacher_model.config.vocab_size
    if isinstance(shape, SSMShape):  # an SSM student (`kdgrid.core.model.ssm`): fresh, or another trial's
        return build_ssm_student(trial, shape, num_labels, vocab_size)
    check_init(trial, shape, teacher)
    source = init_source(trial, shape, teacher)
    info: dict[str, object] = {"init_source": source}
    use = recipe_for_trial(trial)
    if use is not None:
        info["init_recipe"] = {"name": use.name, "key": use.recipe.key}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(trial.seed)
        if trial.init == "random":
            model = BertForSequenceClassification(
                bert_config(shape, num_labels, vocab_size=vocab_size or VOCAB_SIZE)
            )
        elif trial.init in ("pretrain", "general_distillation"):
            assert source is not None
            loaded = load_checkpoint(
                source, num_labels, what=f"init {trial.init!r}", fresh_head=True, ignore_mismatched_sizes=True
            )
            model = loaded.model
            info["init_fresh_keys"] = list(loaded.fresh_keys)  # what the checkpoint did not provide
            _check_same_shape(shape, shape_of_config(model.config), trial.init, source)
            _fresh_classifier(model)
            info_file = Path(source).expanduser() / artifacts.GENERAL_DISTILLATION_INFO
            if trial.init == "general_distillation" and info_file.is_file():
                info["general_distillation"] = json.loads(info_file.read_text())
        else:
            assert source is not None
            model = _preload(trial, shape, num_labels, source, teacher, teacher_model)
            info["preload_layers"] = preload_layers(
                trial, shape.layers, _layers_of(source, teacher, teacher_model)
            )
    set_attention(model, ATTENTION_IMPLEMENTATION)
    if vocab_size is not None and model.config.vocab_size != vocab_size:
        raise ConfigError(
            f"init {trial.init!r}: {source} has a vocabulary of {model.config.vocab_size} tokens, the teacher's "
            f"tokenizer {vocab_size}"
        )
    model.train()
    return model, info


def _fresh_classifier(model: BertForSequenceClassification) -> None:
    """Re-draw the classifier head from the (seeded) global RNG, as BERT initialises it."""
    std = model.config.initializer_range
    torch.nn.init.normal_(model.classifier.weight, std=std)
    torch.nn.init.zeros_(model.classifier.bias)


def _layers_of(
    source: str, teacher: ResolvedTeacher, teacher_model: BertForSequenceClassification | None
) -> int:
    if source == teacher.source:
        return teacher.shape.layers
    path = Path(source).expanduser()
    if path.is_dir():
        return _local_config_shape(path).layers
    if teacher_model is not None:
        return teacher_model.config.num_hidden_layers
    return teacher.shape.layers


def _preload(
    trial: Trial,
    shape: StudentShape,
    num_labels: int,
    source: str,
    teacher: ResolvedTeacher,
    teacher_model: BertForSequenceClassification | None,
) -> BertForSequenceClassification:
    if source == teacher.source and teacher_model is not None:
        donor = teacher_model
    else:
        donor = load_pretrained_bert(
            source, num_labels, what="init 'preload'", fresh_head=True, ignore_mismatched_sizes=True
        )
    donor_shape = shape_of_config(donor.config)
    _refuse_preload(shape, donor_shape, source)
    layers = preload_layers(trial, shape.layers, donor_shape.layers)
    model = BertForSequenceClassification(bert_config(shape, num_labels, vocab_size=donor.config.vocab_size))
    with torch.no_grad():
        model.bert.embeddings.load_state_dict(donor.bert.embeddings.state_dict())
        if donor.bert.pooler is not None and model.bert.pooler is not None:
            model.bert.pooler.load_state_dict(donor.bert.pooler.state_dict())
        for student_index, teacher_layer in enumerate(layers):
            model.bert.encoder.layer[student_index].load_state_dict(
                donor.bert.encoder.layer[teacher_layer - 1].state_dict()
            )
    return model
