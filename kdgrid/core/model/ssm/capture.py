"""An SSM student's features, as `kdgrid.core.model.capture.FeatureCapture` gives a BERT's: logits, hidden states
(layer 0 = the embeddings), and in place of attention scores the blocks' mixing matrices.

A knowledge that reads attention scores reads, for an SSM student, its mixing matrix M per head ``[B, H, L, L]``
(`kdgrid.core.model.ssm.mixer`) with the padding bias on padded key columns, as capture adds it to a BERT's
scores: a loss that takes a softmax over keys takes it over M's rows. M is materialised (``L^2`` per head) only
for the layers a loss reads, on first use. Q, K and V do not exist (the trial rules refuse knowledge on them).
`capture_student` picks the capture a student model needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import torch

from kdgrid.core.model.capture import ALL_NEEDS, PAD_BIAS, FeatureCapture, Features
from kdgrid.core.model.ssm.model import SSMForSequenceClassification

SSM_NEEDS = frozenset({"scores", "hidden", "logits", "sentence", "embeddings"})


class MixingScores(Sequence[torch.Tensor | None]):
    """Per block (index 0 is None) its mixing matrices of the pass's own hidden states, with the padding bias on
    padded key columns, each computed on first use for the layers kept."""

    def __init__(self, model: SSMForSequenceClassification, hidden: Sequence[torch.Tensor], mask: torch.Tensor,
                 layers: frozenset[int] | None) -> None:  # fmt: skip
        self._model, self._hidden, self._mask, self._layers = model, hidden, mask, layers
        self._scores: list[torch.Tensor | None] = [None] * (len(hidden))

    def __len__(self) -> int:
        return len(self._hidden)

    @overload
    def __getitem__(self, layer: int) -> torch.Tensor | None: ...

    @overload
    def __getitem__(self, layer: slice) -> list[torch.Tensor | None]: ...

    def __getitem__(self, layer: int | slice) -> torch.Tensor | list[torch.Tensor | None] | None:
        if isinstance(layer, slice):
            return [self[i] for i in range(len(self))[layer]]
        if layer < 1 or layer >= len(self._hidden) or (self._layers is not None and layer not in self._layers):
            return None
        if self._scores[layer] is None:
            matrices = self._model.layers[layer - 1].mixer.matrices(self._hidden[layer - 1], self._mask)
            bias = (1.0 - self._mask[:, None, None, :].to(matrices.dtype)) * PAD_BIAS
            self._scores[layer] = matrices.float() + bias
        return self._scores[layer]


class SSMCapture:
    """`FeatureCapture`'s interface for an `SSMForSequenceClassification` (module docstring)."""

    def __init__(self, model: SSMForSequenceClassification, needs: Iterable[str] = (),
                 layers: Iterable[int] | None = None) -> None:  # fmt: skip
        self.model = model
        self.heads = model.config.shape.heads
        self.set_needs(needs, layers)

    def set_needs(self, needs: Iterable[str], layers: Iterable[int] | None = None) -> None:
        self.needs = frozenset(needs)
        self.layers = None if layers is None else frozenset(layers)
        unknown = self.needs - ALL_NEEDS
        if unknown:
            raise ValueError(f"unknown feature(s) {sorted(unknown)}; known: {sorted(ALL_NEEDS)}")

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Nothing is kept between passes here: a pass that is not this capture's keeps nothing anyway."""
        yield

    def remove(self) -> None:
        """No hooks to remove."""

    def _keeps(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    def __call__(self, batch: Mapping[str, torch.Tensor]) -> Features:
        """Run the model on a batch (``input_ids``, ``attention_mask``, optional ``token_type_ids``)."""
        want_hidden = bool(self.needs & {"hidden", "sentence", "embeddings", "scores"})
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        mask = batch["attention_mask"]
        output = self.model(**inputs, output_hidden_states=want_hidden)
        features = Features(logits=output.logits, mask=mask, heads=self.heads)
        if want_hidden:
            assert output.hidden_states is not None
            if self.needs & {"hidden", "sentence", "embeddings"}:
                features.hidden = [h if self._keeps(i) else None for i, h in enumerate(output.hidden_states)]
            if "scores" in self.needs:
                features.scores = MixingScores(self.model, output.hidden_states, mask, self.layers)
        return features


def capture_student(model: Any, needs: Iterable[str], layers: Iterable[int] | None) -> FeatureCapture | SSMCapture:
    """The capture of a student model: `SSMCapture` for an SSM student, `FeatureCapture` for a BERT."""
    if isinstance(model, SSMForSequenceClassification):
        return SSMCapture(model, needs, layers)
    return FeatureCapture(model, needs, layers)
