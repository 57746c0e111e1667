"""An SSM student for sequence classification: BERT's embeddings, post-LN blocks whose self-attention is an SSD
mixer (`kdgrid.core.model.ssm.mixer`), [CLS] or mean pooling, a classification head.

Each block is a BERT layer with the mixer in attention's place, post-LN as BERT's:

    h   = LayerNorm(u + Dropout(mixer(u)))          (mixer_norm)
    out = LayerNorm(h + Dropout(W_2 gelu(W_1 h)))   (output_norm)

The parts BERT and the SSM student share keep BERT's sizes (embeddings with their LayerNorm, the blocks' feed-forward
and LayerNorms, the pooler, the classifier), so MOHAWK's weight transfer copies them from a BERT teacher of the
same shape (`transfer_from_bert`). `save_pretrained` and `load_ssm` keep a trained student in a folder laid out
as transformers lays one out (``config.json``, ``model.safetensors``). The model's forward mirrors a transformers classifier's (``input_ids``,
``attention_mask``, ``token_type_ids``, ``output_hidden_states``; an output with ``logits`` and
``hidden_states``), so evaluation and latency code written for BERTs runs it; `mixing_matrices` and `mixer_outputs`
are what distillation reads of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from kdgrid.core.model.shapes import MAX_POSITIONS, SSM_CHUNK, TYPE_VOCAB, VOCAB_SIZE, SSMShape, student_shape
from kdgrid.core.model.ssm.mixer import SSDMixer
from kdgrid.errors import KdgridError

CONFIG_FILE = "config.json"  # beside the weights, as transformers names its files
WEIGHTS_FILE = "model.safetensors"
MODEL_TYPE = (
    "kdgrid-ssm"  # the config's ``model_type``: transformers' loaders (and kdgrid's BERT loader) refuse it
)

LAYER_NORM_EPS = 1e-12  # BERT's
DROPOUT = 0.1  # BERT's hidden dropout
INIT_STD = 0.02  # BERT's initializer range


@dataclass
class SSMConfig:
    """What builds an `SSMForSequenceClassification`: its shape, label count and vocabulary. ``num_attention_heads``
    and ``hidden_size`` are named as a BertConfig names them, for code that reads a model's config."""

    shape: SSMShape
    num_labels: int
    vocab_size: int = VOCAB_SIZE
    dropout: float = DROPOUT
    chunk: int = SSM_CHUNK
    max_positions: int = MAX_POSITIONS  # BERT's 512, so the embeddings are a BERT's; longer for a benchmark

    @property
    def num_attention_heads(self) -> int:
        return self.shape.heads

    @property
    def hidden_size(self) -> int:
        return self.shape.width

    @property
    def num_hidden_layers(self) -> int:
        return self.shape.layers

    @property
    def problem_type(self) -> str:
        return "regression" if self.num_labels == 1 else "single_label_classification"


@dataclass
class SSMOutput:
    """A forward pass: ``logits [B, C]`` and, when asked, ``hidden_states`` (layer 0 = the embeddings, then
    each block's output, ``[B, L, d]`` each)."""

    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None


class SSMEmbeddings(nn.Module):
    """BERT's embeddings: word + position + token type, LayerNorm, dropout."""

    def __init__(self, config: SSMConfig) -> None:
        super().__init__()
        width = config.shape.width
        self.word_embeddings = nn.Embedding(config.vocab_size, width)
        self.position_embeddings = nn.Embedding(config.max_positions, width)
        self.token_type_embeddings = nn.Embedding(TYPE_VOCAB, width)
        self.LayerNorm = nn.LayerNorm(width, eps=LAYER_NORM_EPS)  # BERT's name, so transfer maps name to name
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        summed = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(token_type_ids)
        )
        return self.dropout(self.LayerNorm(summed))


class SSMBlock(nn.Module):
    """One post-LN block (module docstring)."""

    def __init__(self, config: SSMConfig) -> None:
        super().__init__()
        shape = config.shape
        self.mixer = SSDMixer(shape.width, shape.heads, shape.state, causal=shape.causal, chunk=config.chunk)
        self.mixer_norm = nn.LayerNorm(shape.width, eps=LAYER_NORM_EPS)
        self.intermediate = nn.Linear(shape.width, shape.ffn)
        self.output = nn.Linear(shape.ffn, shape.width)
        self.output_norm = nn.LayerNorm(shape.width, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.mixer_norm(u + self.dropout(self.mixer(u, mask)))
        return self.output_norm(h + self.dropout(self.output(nn.functional.gelu(self.intermediate(h)))))


class SSMForSequenceClassification(nn.Module):
    """The SSM student (module docstring)."""

    def __init__(self, config: SSMConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.config = config
        self.embeddings = SSMEmbeddings(config)
        self.layers = nn.ModuleList(SSMBlock(config) for _ in range(config.shape.layers))
        self.pooler = nn.Linear(config.shape.width, config.shape.width)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.shape.width, config.num_labels)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """BERT's initialisation (normal(0, 0.02) weights, zero biases, unit LayerNorms), then each mixer's decay
        drawn as `kdgrid.core.model.ssm.mixer.DECAY_RANGE` says and D = 1; from the global RNG unless
        ``generator`` is given."""
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Linear | nn.Embedding):
                    module.weight.normal_(0.0, INIT_STD, generator=generator)
                    if isinstance(module, nn.Linear) and module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, nn.LayerNorm):
                    module.weight.fill_(1.0)
                    module.bias.zero_()
            for layer in self.layers:
                layer.mixer.skip.fill_(1.0)
                for direction in (layer.mixer.forward_scan, layer.mixer.backward_scan):
                    if direction is not None:
                        direction.reset_decay(generator)

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B, d]``: the [CLS] vector, or the mean over real tokens, through the pooler (dense + tanh)."""
        if self.config.shape.pooling == "mean":
            weights = mask.to(hidden.dtype)[..., None]
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        else:
            pooled = hidden[:, 0]
        return torch.tanh(self.pooler(pooled))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        return_dict: bool = True,
    ) -> SSMOutput:
        """Logits ``[B, C]`` (and every layer's hidden states when ``output_hidden_states``)."""
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        hidden = self.embeddings(input_ids, token_type_ids)
        states = [hidden]
        for layer in self.layers:
            hidden = layer(hidden, mask)
            states.append(hidden)
        logits = self.classifier(self.dropout(self.pool(hidden, mask)))
        return SSMOutput(logits, tuple(states) if output_hidden_states else None)

    def save_pretrained(self, directory: str | Path, *, state_dict: dict[str, torch.Tensor] | None = None,
                        **_: Any) -> None:  # fmt: skip
        """Write ``config.json`` (the student's name, labels, vocabulary) and ``model.safetensors`` (float32) to
        ``directory``, as transformers' ``save_pretrained`` lays a model out (its other keywords are accepted and
        ignored), so a kept student is saved the way a BERT student is (`kdgrid.core.training.student_export`)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        config = {
            "model_type": MODEL_TYPE,
            "student": self.config.shape.name,
            "num_labels": self.config.num_labels,
            "vocab_size": self.config.vocab_size,
        }
        (directory / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n")
        state = self.state_dict() if state_dict is None else state_dict
        save_file(
            {k: v.detach().float().contiguous().cpu() for k, v in state.items()},
            str(directory / WEIGHTS_FILE),
        )

    def mixing_matrices(self, hidden_states: list[torch.Tensor] | tuple[torch.Tensor, ...], mask: torch.Tensor,
                        layers: list[int] | None = None) -> list[torch.Tensor | None]:  # fmt: skip
        """Per block 1..L (index 0 is None), the mixer's M ``[B, H, L, L]`` of the hidden state entering it
        (``hidden_states[l - 1]``: this model's own, or a teacher's for a teacher-forced stage); only the
        ``layers`` asked for (default: all), None on the others."""
        wanted = set(range(1, len(self.layers) + 1)) if layers is None else set(layers)
        return [None] + [
            layer.mixer.matrices(hidden_states[index - 1], mask) if index in wanted else None
            for index, layer in enumerate(self.layers, start=1)
        ]


def build_ssm(shape: SSMShape, num_labels: int, *, seed: int | None = None,
              vocab_size: int = VOCAB_SIZE) -> SSMForSequenceClassification:  # fmt: skip
    """A freshly initialised SSM student (BERT's initializer), drawn from ``seed`` when given."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    return SSMForSequenceClassification(SSMConfig(shape, num_labels, vocab_size), generator)


def load_ssm(directory: str | Path) -> SSMForSequenceClassification:
    """A student `SSMForSequenceClassification.save_pretrained` wrote, every weight checked: a missing or extra
    key, or a config of another model, is a `KdgridError` naming it."""
    directory = Path(directory)
    try:
        config = json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise KdgridError(f"{directory}: not a saved SSM student ({error})") from None
    if not isinstance(config, dict) or config.get("model_type") != MODEL_TYPE:
        raise KdgridError(f"{directory}: {CONFIG_FILE} is not an SSM student's (model_type {MODEL_TYPE!r})")
    shape = student_shape(str(config["student"]))
    assert isinstance(shape, SSMShape)
    model = SSMForSequenceClassification(
        SSMConfig(shape, int(config["num_labels"]), int(config["vocab_size"]))
    )
    state = load_file(str(directory / WEIGHTS_FILE))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise KdgridError(f"{directory}: the saved SSM student's keys do not match {shape.name}: missing "
                          f"{sorted(missing)[:8]}, unexpected {sorted(unexpected)[:8]}")  # fmt: skip
    return model


# The teacher's (transformers BertForSequenceClassification) modules each shared part is copied from, by the
# student's module name; ``{i}`` is a block's 0-based index.
TRANSFER_MAP: dict[str, str] = {  # MOHAWK's stage 3: everything but the mixers
    "embeddings.word_embeddings": "bert.embeddings.word_embeddings",
    "embeddings.position_embeddings": "bert.embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "bert.embeddings.token_type_embeddings",
    "embeddings.LayerNorm": "bert.embeddings.LayerNorm",
    "layers.{i}.mixer_norm": "bert.encoder.layer.{i}.attention.output.LayerNorm",
    "layers.{i}.intermediate": "bert.encoder.layer.{i}.intermediate.dense",
    "layers.{i}.output": "bert.encoder.layer.{i}.output.dense",
    "layers.{i}.output_norm": "bert.encoder.layer.{i}.output.LayerNorm",
    "pooler": "bert.pooler.dense",
    "classifier": "classifier",
}


def transfer_from_bert(student: SSMForSequenceClassification, teacher: nn.Module,
                       parts: tuple[str, ...] | None = None) -> list[str]:  # fmt: skip
    """Copy the teacher's embeddings, feed-forwards, LayerNorms, pooler and classifier into ``student`` (MOHAWK's
    stage-3 weight transfer, `TRANSFER_MAP`), in place; the mixers (trained by stages 1 and 2, or fresh) are left
    as they are. ``parts`` restricts the copy to the student modules named (by their map
    key); returns the student parameter names copied.

    Raises:
        ValueError: a teacher of another depth, width, feed-forward size or label count (named).
    """
    shape = student.config.shape
    t_config = teacher.config
    theirs = (
        t_config.num_hidden_layers,
        t_config.hidden_size,
        t_config.intermediate_size,
        t_config.num_labels,
    )
    mine = (shape.layers, shape.width, shape.ffn, student.config.num_labels)
    if theirs != mine:
        raise ValueError(
            f"weight transfer needs a teacher of the student's layers, width, ffn and labels {mine}; "
            f"the teacher has {theirs}"
        )
    modules_t = dict(teacher.named_modules())
    modules_s = dict(student.named_modules())
    copied: list[str] = []
    with torch.no_grad():
        for pattern, source in TRANSFER_MAP.items():
            if parts is not None and pattern not in parts:
                continue
            indices = range(shape.layers) if "{i}" in pattern else [None]
            for index in indices:
                name = pattern.format(i=index)
                target, origin = modules_s[name], modules_t[source.format(i=index)]
                for param_name, param in target.named_parameters(recurse=False):
                    param.copy_(getattr(origin, param_name))
                    copied.append(f"{name}.{param_name}")
    return copied
