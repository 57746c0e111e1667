"""Named choices of a trial that are plain tuples rather than registries, and the one message for a value that
is not among them. Torch-free: sweep expansion, the trial rules and pre-training recipes read them."""

from __future__ import annotations

from kdgrid.suggest import did_you_mean

INIT_SCHEMES = ("random", "pretrain", "general_distillation", "preload")  # see `kdgrid.core.job.init`
PROJECTIONS = ("linear", "mlp", "ensemble", "none")  # see `kdgrid.core.model.projection`
# The members of a projection ``ensemble`` when ``projector_members`` is unset: Chen et al. (NeurIPS 2022) use three.
DEFAULT_ENSEMBLE_MEMBERS = 3


def unknown_choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    """The message for a named choice (init, projection) that is not one of ``allowed``."""
    return f"unknown {field} {value!r}; allowed: {', '.join(allowed)}{did_you_mean(value, allowed)}"
