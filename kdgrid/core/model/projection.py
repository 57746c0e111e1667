"""Learnable projections from the student's width to the teacher's, one per (knowledge, matched layer pair).

Feature losses that compare vectors directly (hidden_mse, cos, pkd, gram, embedding_mse, contrastive,
reaug_relation; ``needs_projection`` in `kdgrid.core.knowledge.KNOWLEDGE`) need the student in the teacher's
width. A `Projection` maps ``[..., d_S] -> [..., d_T]``; it is trained with the student (put its parameters in
the student's optimizer) and saved in the student's checkpoints, and discarded after training;
`kdgrid.core.training.objective.Objective` owns one per projected loss term.

``kind="linear"`` (default, TinyBERT's W_h, what the paper used) is one affine map. ``kind="mlp"`` is
Linear -> GELU -> Linear; studies of hidden-state alignment warn that an expressive projector can
absorb the mimicry itself ("projector overfitting": the loss falls, the student learns nothing), so use it as a
comparison, not a default (`kdgrid.core.methods.projectors.overfit` flags it in a trial's curve).

``kind="ensemble"`` is the projector ensemble of Chen, Wang, Liu, Xu, de Hoog & Huang, "Improved Feature
Distillation via Projector Ensemble" (NeurIPS 2022): M projectors, initialised independently, applied to the same
student vector, their outputs averaged, ``y = (1/M) sum_m P_m(x)``; the loss compares the average with the teacher.
Their members are 1x1 convolution + BatchNorm + ReLU on post-ReLU CNN features; BERT's hidden states are signed,
so a ReLU output could not reach them, and an average of affine maps is one affine map (no ensemble at all): each
member here is kdgrid's ``mlp`` (Linear -> GELU -> Linear), which keeps both the members' non-linearity and a
signed output. M is the trial option ``projector_members`` (default 3, the paper's default ensemble size). The
option ``projector_member: relu_linear`` gives the authors' member instead (their code, chenyd7/PEFD: ``Linear``
then ``ReLU``, averaged); with ``knowledge: [cos]`` the loss is theirs too, one minus the cosine (per token).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from kdgrid.core.choices import DEFAULT_ENSEMBLE_MEMBERS
from kdgrid.errors import ConfigError

PROJECTION_KINDS: tuple[str, ...] = ("linear", "mlp", "ensemble")

# BERT's initializer_range: projections start like the layers they sit beside (as TextBrewer's do).
_INIT_STD = 0.02


class Projection(nn.Module):
    """Map student vectors ``[..., student_width]`` to ``[..., teacher_width]``.

    Args:
        student_width: d_S, the input width.
        teacher_width: d_T, the output width.
        kind: ``"linear"`` (y = x W + b), ``"mlp"`` (Linear(d_S, h) -> GELU -> Linear(h, d_T)) or
            ``"ensemble"`` (the mean of ``members`` MLPs, each drawn independently).
        hidden_width: h of the MLP (of each member of an ensemble); default the teacher width. Ignored for
            ``linear``.
        members: M, the ensemble's size (at least 2; default `DEFAULT_ENSEMBLE_MEMBERS`). Only for ``ensemble``.
        member: an ensemble member, ``mlp`` (default) or ``relu_linear`` (the authors': Linear then ReLU).

    Weights start from N(0, 0.02^2), biases from zero (members one after another from the same generator).
    """

    def __init__(
        self,
        student_width: int,
        teacher_width: int,
        kind: str = "linear",
        hidden_width: int | None = None,
        members: int | None = None,
        member: str = "mlp",
    ) -> None:
        super().__init__()
        if kind not in PROJECTION_KINDS:
            raise ConfigError(f"unknown projection kind {kind!r}; valid kinds: {', '.join(PROJECTION_KINDS)}")
        for what, width in (("student_width", student_width), ("teacher_width", teacher_width)):
            if not isinstance(width, int) or width < 1:
                raise ConfigError(f"projection {what} must be a positive integer, got {width!r}")
        self.student_width = student_width
        self.teacher_width = teacher_width
        if members is not None and kind != "ensemble":
            raise ConfigError(f"projection members={members!r} is only for kind 'ensemble', not {kind!r}")
        count = DEFAULT_ENSEMBLE_MEMBERS if members is None else members
        if kind == "ensemble" and (isinstance(count, bool) or not isinstance(count, int) or count < 2):
            raise ConfigError(f"projection members must be an integer >= 2, got {count!r}")
        self.kind = kind
        self.members = count if kind == "ensemble" else 1
        inner = teacher_width if hidden_width is None else hidden_width
        if kind == "linear":
            self.net: nn.Module = nn.Linear(student_width, teacher_width)
        elif kind == "mlp":
            self.net = _mlp(student_width, inner, teacher_width)
        elif member == "relu_linear":  # the authors' member: Linear then ReLU
            self.net = nn.ModuleList(
                nn.Sequential(nn.Linear(student_width, teacher_width), nn.ReLU()) for _ in range(count)
            )
        else:
            self.net = nn.ModuleList(_mlp(student_width, inner, teacher_width) for _ in range(count))
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
        if isinstance(self.net, nn.ModuleList):
            return torch.stack([member(x) for member in self.net]).mean(dim=0)
        return self.net(x)

    def extra_repr(self) -> str:
        members = f", members={self.members}" if self.kind == "ensemble" else ""
        return f"{self.student_width} -> {self.teacher_width}, kind={self.kind}{members}"


def _mlp(student_width: int, inner: int, teacher_width: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(student_width, inner), nn.GELU(), nn.Linear(inner, teacher_width))
