"""Capture, don't fork: what a BERT computes, read through forward hooks (docs/design.md says why).

Forward hooks on each self-attention's ``query`` / ``key`` / ``value`` Linear modules give Q, K, V
``[B, L, d]`` (before the head split); ``output_hidden_states`` gives the hidden states ``[B, L, d]`` of the
embeddings (layer 0) and of each transformer layer (1..L). Attention scores are recomputed from Q and K:

    scores[b, h, i, j] = <q_{b,h,i}, k_{b,h,j}> / sqrt(d / H) + PAD_BIAS * (1 - mask[b, j])

i.e. pre-softmax, dropout-free, with a padding bias on the key columns, always in float32 (Q and K cast up, autocast
off: under bf16 autocast the projections are bf16, the scores built from them are not); ``softmax(scores, -1)`` equals what an
eager BERT returns with ``output_attentions=True``. Only what ``needs`` asks for is kept (a subset of
``{"scores", "hidden", "query", "key", "value", "logits", "sentence", "embeddings"}``, and for a teacher-forced
student, MOHAWK's, ``layer_input``: the hidden state entering each layer, and ``attention_output``: the
self-attention sub-layer's output, its output projection before dropout, residual and LayerNorm, from a hook on
``attention.output.dense``), and only on the ``layers``
asked for, so a soft-label-only group pays for nothing but the logits, and a teacher held while the students
train keeps the layers they are matched to, not all of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

import torch
from torch import nn

ALL_NEEDS = frozenset(
    {"scores", "hidden", "query", "key", "value", "logits", "sentence", "embeddings", "layer_input", "attention_output"}
)
LAYER_NEEDS = frozenset({"scores", "hidden", "query", "key", "value", "layer_input", "attention_output"})
ATTENTION_OUTPUT = "attention_output"

# BERT's classic additive padding bias: exp(-10000) underflows to 0 in fp32/bf16 like HF's finfo.min mask, but the
# scores stay finite, so a loss that squares masked entries before masking them cannot overflow to inf / NaN.
PAD_BIAS = -10000.0

_QKV = ("query", "key", "value")


class LayerScores(Sequence[torch.Tensor | None]):
    """Attention scores per layer (index 0 is ``None``), each computed from its Q, K and the mask on first use and
    then kept: a knowledge matched on one layer pair pays for one layer's ``[B, H, L, L]`` scores, not all."""

    def __init__(
        self, qk: list[tuple[torch.Tensor, torch.Tensor] | None], mask: torch.Tensor, heads: int
    ) -> None:
        self._qk = qk
        self._mask = mask
        self._heads = heads
        self._scores: list[torch.Tensor | None] = [None] * len(qk)

    def __len__(self) -> int:
        return len(self._qk)

    @overload
    def __getitem__(self, layer: int) -> torch.Tensor | None: ...

    @overload
    def __getitem__(self, layer: slice) -> list[torch.Tensor | None]: ...

    def __getitem__(self, layer: int | slice) -> torch.Tensor | list[torch.Tensor | None] | None:
        if isinstance(layer, slice):
            return [self[i] for i in range(len(self))[layer]]
        pair = self._qk[layer]
        if self._scores[layer] is None and pair is not None:
            self._scores[layer] = attention_scores(pair[0], pair[1], self._mask, self._heads)
        return self._scores[layer]


@dataclass
class Features:
    """One forward pass's captured features.

    Attributes:
        logits: ``[B, C]`` classifier outputs (always present).
        mask: ``[B, L]`` attention mask, 1 = real token.
        hidden: per layer 0..L: ``[B, L, d]`` (layer 0 = embeddings output); empty unless needed, ``None`` on a
            layer not captured.
        query, key, value: per transformer layer 1..L (index 0 is ``None``): ``[B, L, d]``; empty unless needed,
            ``None`` on a layer not captured.
        scores: per transformer layer 1..L (index 0 is ``None``): ``[B, H, L, L]`` pre-softmax, each computed on
            first use (`LayerScores`); empty unless needed, ``None`` on a layer not captured.
        heads: the model's attention head count (to split Q/K/V).
        distill_logits: ``[B, C]`` a dual-head student's distillation head (`kdgrid.core.methods.dual_head.heads`), read by the
            soft-label loss in place of ``logits``; None otherwise.
        layer_input: per transformer layer 1..L (index 0 is ``None``): ``[B, L, d]``, the hidden state entering
            it (hidden state l - 1); empty unless needed.
        attention_output: per transformer layer 1..L (index 0 is ``None``): ``[B, L, d]``, the self-attention
            sub-layer's output before its residual and LayerNorm; empty unless needed.
    """

    logits: torch.Tensor
    mask: torch.Tensor
    heads: int
    hidden: list[torch.Tensor | None] = field(default_factory=list)
    query: list[torch.Tensor | None] = field(default_factory=list)
    key: list[torch.Tensor | None] = field(default_factory=list)
    value: list[torch.Tensor | None] = field(default_factory=list)
    scores: Sequence[torch.Tensor | None] = field(default_factory=list)
    distill_logits: torch.Tensor | None = None
    layer_input: list[torch.Tensor | None] = field(default_factory=list)
    attention_output: list[torch.Tensor | None] = field(default_factory=list)

    @property
    def sentence(self) -> torch.Tensor:
        """``[B, d]``: the [CLS] vector of the last layer."""
        return self.layer_feature("hidden", len(self.hidden) - 1)[:, 0]

    @property
    def embeddings(self) -> torch.Tensor:
        """``[B, L, d]``: the embedding layer's output (hidden state 0)."""
        return self.layer_feature("hidden", 0)

    def layer_feature(self, need: str, layer: int) -> torch.Tensor:
        """The feature ``need`` of ``layer`` (0 = embeddings; attention features exist for layers 1..L)."""
        if need not in LAYER_NEEDS:
            raise ValueError(f"{need!r} is not a per-layer feature")
        if need != "hidden" and layer < 1:
            raise ValueError(f"{need} exists for transformer layers 1..L, not layer {layer}")
        captured = getattr(self, need)
        tensor = captured[layer] if 0 <= layer < len(captured) else None
        if tensor is None:
            raise ValueError(f"{need} of layer {layer} was not captured (captured: {_captured(captured)})")
        return tensor


def _captured(per_layer: Sequence[torch.Tensor | None]) -> str:
    layers = [str(i) for i in range(len(per_layer)) if per_layer[i] is not None]
    return ", ".join(layers) or "none"


def attention_scores(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """Pre-softmax attention scores ``[B, H, L, L]``, float32, from Q, K ``[B, L, d]`` and mask ``[B, L]``.

    Scaled by ``1 / sqrt(d / H)`` like BERT; ``PAD_BIAS`` is added on padded key columns. Q and K are cast to
    float32 and the product runs with autocast off, whatever the forward pass ran in: a loss target is never
    rounded to bf16 / fp16 (in bf16 the bias alone would become -9984 and every score lose all but 8 bits).
    """
    batch, length, width = query.shape
    head_size = width // heads
    with torch.autocast(device_type=query.device.type, enabled=False):
        q = query.float().view(batch, length, heads, head_size).transpose(1, 2)
        k = key.float().view(batch, length, heads, head_size).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * head_size**-0.5
        bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * PAD_BIAS
        return scores + bias


def self_attention_modules(model: nn.Module) -> list[nn.Module]:
    """Each layer's self-attention (the module holding ``query``/``key``/``value``), in layer order."""
    bert = model.bert if hasattr(model, "bert") else model
    return [layer.attention.self for layer in bert.encoder.layer]


class FeatureCapture:
    """Hooks on a BERT that collect the features a set of knowledge types needs.

    Usage::

        capture = FeatureCapture(model, needs={"hidden", "scores"}, layers={0, 3})
        features = capture(batch)          # runs the model, returns Features
        capture.remove()                   # detach the hooks

    ``layers`` (default: all) are the layers whose per-layer features are kept (0 = the embeddings; ``sentence``
    reads the last layer, ``embeddings`` layer 0: include them when those are needed). ``needs`` and ``layers``
    may be changed later with `set_needs`. The hooks are inert while ``needs`` asks for no Q/K/V.
    """

    def __init__(
        self, model: nn.Module, needs: Iterable[str] = (), layers: Iterable[int] | None = None
    ) -> None:
        self.model = model
        self.heads = int(model.config.num_attention_heads)
        self._store: dict[tuple[str, int], torch.Tensor] = {}
        self._handles = []
        self._record: set[str] = set()
        self._suspended = False  # `suspended`: the hooks keep nothing
        for index, attention in enumerate(self_attention_modules(model), start=1):
            for name in _QKV:
                self._handles.append(getattr(attention, name).register_forward_hook(self._hook(name, index)))
        self._layers = len(self._handles) // len(_QKV)
        bert = model.bert if hasattr(model, "bert") else model
        for index, layer in enumerate(bert.encoder.layer, start=1):
            dense = layer.attention.output.dense
            self._handles.append(dense.register_forward_hook(self._hook(ATTENTION_OUTPUT, index)))
        self.set_needs(needs, layers)

    def set_needs(self, needs: Iterable[str], layers: Iterable[int] | None = None) -> None:
        self.needs = frozenset(needs)
        self.layers = None if layers is None else frozenset(layers)
        unknown = self.needs - ALL_NEEDS
        if unknown:
            raise ValueError(f"unknown feature(s) {sorted(unknown)}; known: {sorted(ALL_NEEDS)}")
        record = {n for n in (*_QKV, ATTENTION_OUTPUT) if n in self.needs}
        if "scores" in self.needs:
            record |= {"query", "key"}
        self._record = record

    def _hook(self, name: str, layer: int):
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            if name in self._record and not self._suspended and self._keeps(layer):
                self._store[(name, layer)] = output

        return hook

    def _keeps(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Inside, a forward pass of the model that is not this capture's (LKD's held-out batch,
        `kdgrid.core.training.student`) keeps nothing: the hooks record no Q/K/V, and the store is empty after, so no
        tensor of that pass (nor its graph) outlives it here."""
        previous, self._suspended = self._suspended, True
        self._store.clear()
        try:
            yield
        finally:
            self._suspended = previous
            self._store.clear()

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def __call__(self, batch: Mapping[str, torch.Tensor]) -> Features:
        """Run the model on a batch (``input_ids``, ``attention_mask``, optional ``token_type_ids``)."""
        want_hidden = bool(self.needs & {"hidden", "sentence", "embeddings", "layer_input"})
        self._store.clear()
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        try:
            output = self.model(**inputs, output_hidden_states=want_hidden, return_dict=True)
            mask = batch["attention_mask"]
            layers = self._layers
            features = Features(logits=output.logits, mask=mask, heads=self.heads)
            if want_hidden and self.needs & {"hidden", "sentence", "embeddings"}:
                features.hidden = [h if self._keeps(i) else None for i, h in enumerate(output.hidden_states)]
            if "layer_input" in self.needs:
                states = output.hidden_states
                features.layer_input = [None] + [
                    states[i - 1] if self._keeps(i) else None for i in range(1, layers + 1)
                ]
            for name in (*_QKV, ATTENTION_OUTPUT):
                if name in self.needs:
                    setattr(
                        features, name, [None] + [self._store.get((name, i)) for i in range(1, layers + 1)]
                    )
            if "scores" in self.needs:
                qk = [
                    (self._store[("query", i)], self._store[("key", i)]) if self._keeps(i) else None
                    for i in range(1, layers + 1)
                ]
                features.scores = LayerScores([None, *qk], mask, self.heads)
        finally:
            self._store.clear()
        return features
