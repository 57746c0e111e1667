"""Learnable projections from the student's width to the teacher's, one per (knowledge, matched layer pair).

Feature losses that compare vectors directly (hidden_mse, cos, pkd, gram, embedding_mse, contrastive,
reaug_relation; ``needs_projection`` in `kdgrid.core.knowledge.KNOWLEDGE`) need the student in the teacher's
width. A `Projection` maps ``[..., d_S] -> [..., d_T]``; it is trained with the student (put its parameters in
the student's optimizer) and saved in the student's checkpoints, and discarded after training;
`kdgrid.core.objective.Objective` owns one per projected loss term.

``kind="linear"`` (default, TinyBERT's W_h, what the paper used) is one affine map. ``kind="mlp"`` is
Linear -> GELU -> Linear; studies of hidden-state alignment warn that an expressive projector can
absorb the mimicry itself ("projector overfitting": the loss falls, the student learns nothing), so use it as a
comparison, not a default.
"""

from __future__ import annotations

from torch import Tensor, nn

from kdgrid.errors import ConfigError

PROJECTION_KINDS: tuple[str, ...] = ("linear", "mlp")

# BERT's initializer_range: projections start like the layers they sit beside (as TextBrewer's do).
_INIT_STD = 0.02


class Projection(nn.Module):
    """Map student vectors ``[..., student_width]`` to ``[..., teacher_width]``.

    Args:
        student_width: d_S, the input width.
        teacher_width: d_T, the output width.
        kind: ``"linear"`` (y = x W + b) or ``"mlp"`` (Linear(d_S, h) -> GELU -> Linear(h, d_T)).
        hidden_width: h of the MLP; default the teacher width. Ignored for ``linear``.

    Weights start from N(0, 0.02^2), biases from zero.
    """

    def __init__(
        self, student_width: int, teacher_width: int, kind: str = "linear", hidden_width: int | None = None
    ) -> None:
        super().__init__()
        if kind not in PROJECTION_KINDS:
            raise ConfigError(f"unknown projection kind {kind!r}; valid kinds: {', '.join(PROJECTION_KINDS)}")
        for what, width in (("student_width", student_width), ("teacher_width", teacher_width)):
            if not isinstance(width, int) or width < 1:
                raise ConfigError(f"projection {what} must be a positive integer, got {width!r}")
        self.student_width = student_width
        self.teacher_width = teacher_width
        self.kind = kind
        if kind == "linear":
            self.net: nn.Module = nn.Linear(student_width, teacher_width)
        else:
            inner = teacher_width if hidden_width is None else hidden_width
            self.net = nn.Sequential(
                nn.Linear(student_width, inner), nn.GELU(), nn.Linear(inner, teacher_width)
            )
        for module in self.net.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=_INIT_STD)
                nn.init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.student_width:
            raise ConfigError(
                f"projection expects student vectors of width {self.student_width} "
                f"(to {self.teacher_width}), got shape {list(x.shape)}"
            )
        return self.net(x)

    def extra_repr(self) -> str:
        return f"{self.student_width} -> {self.teacher_width}, kind={self.kind}"
