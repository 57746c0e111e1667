"""Flex-KD's part in a student's training (`kdgrid.core.step_hooks.StepHooks`): at the student's set-up, the
importance scores of every teacher layer its ``flex_kd`` terms read (`importance.job_scores`: cached by content,
one pass per job at most) and the d_S dimensions kept of each, recorded in the row (``extra.flex_kd``); at each
step, each ``flex_kd`` term reads only its teacher layer's kept dimensions; an epoch checkpoint keeps the
selection, and a resume whose selection differs is refused."""

from __future__ import annotations

from typing import Any

import torch

from kdgrid.core.methods.flex_kd.importance import SCORE_VERSION, job_scores, select_dimensions
from kdgrid.core.methods.flex_kd.spec import EXAMPLES, EXTRA_KEY, KNOWLEDGE
from kdgrid.core.step_hooks import StepHooks
from kdgrid.core.teacher.targets import teacher_side
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial


class FlexKdHooks(StepHooks):
    """One student's selection: ``selected[teacher layer]`` the kept dimensions, ascending."""

    def __init__(self, trial: Trial) -> None:
        self.examples: int | None = trial.option(EXAMPLES)
        self.selected: dict[int, list[int]] = {}
        self._index: dict[tuple[int, torch.device], torch.Tensor] = {}

    def set_up(self, run: Any, job: Any) -> None:
        terms = [term for term in run.objective.terms if term.knowledge == KNOWLEDGE and term.pair is not None]
        layers = sorted({term.pair[1] for term in terms})
        scores, cached = job_scores(job, layers, self.examples)
        width = run.plan.shape.width
        self.selected = {layer: select_dimensions(scores[layer], width) for layer in layers}
        run.result.extra[EXTRA_KEY] = {
            "selected": {str(layer): dims for layer, dims in self.selected.items()},
            "examples": self.examples if self.examples is not None else len(job.tokenized["train"]),
            "cached": cached,
            "score_version": SCORE_VERSION,
        }

    def teacher_features(self, objective: Any, term: Any, features: dict[str, Any]) -> dict[str, Any]:
        if term.knowledge != KNOWLEDGE:
            return features
        layer = term.pair[1]
        if layer not in self.selected:
            raise ConfigError(
                f"term {term.name}: Flex-KD's teacher dimensions are chosen at a student's set-up in a job, and "
                "none were chosen for this one"
            )
        hidden = features["hidden"]
        index = self._index.get((layer, hidden.device))
        if index is None:
            index = torch.tensor(self.selected[layer], dtype=torch.long, device=hidden.device)
            self._index[(layer, hidden.device)] = index
        # Shared per batch by the job's students that keep the same dimensions of the same layer.
        kept = teacher_side(
            ("flex_kd", layer, tuple(self.selected[layer])), (hidden,), lambda: hidden.index_select(-1, index)
        )
        return {**features, "hidden": kept}

    def checkpoint_state(self) -> dict[str, Any] | None:
        return {"selected": {str(layer): dims for layer, dims in self.selected.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        saved = {int(layer): list(dims) for layer, dims in state["selected"].items()}
        if saved != self.selected:
            raise ConfigError(
                "Flex-KD: the epoch checkpoint was trained against other teacher dimensions than the importance "
                f"scores select now ({saved} vs {self.selected}): the teacher or its training data changed; "
                "forget the trial's checkpoint to train it again"
            )


def step_hooks(trial: Trial) -> FlexKdHooks:
    """The hooks of a trial with knowledge ``flex_kd``."""
    return FlexKdHooks(trial)
