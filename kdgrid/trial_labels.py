"""How a trial is named for people, one home for every place that shows one (the report's pages, the MLflow
export's run names and params): by its settings, never by its hash.

- ``polarity · bert-tiny · hidden_mse · Last-1 · seed 0``: task, student, knowledge, strategy where knowledge is
  matched layer to layer, init where it is not the trial's default (`DEFAULT_INIT`), seed.
- The two baselines by name, as the tables label them: `SOFT_ONLY` (no knowledge term, the teacher's soft labels
  weighted) and `HARD_ONLY` (no knowledge and soft weight 0, or the ``hard_label`` knowledge alone: fine-tuning
  without a teacher).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from kdgrid.trial import Trial

SOFT_ONLY = "soft labels only"
HARD_ONLY = "hard labels only"
# A title names the init only where it is not the trial's default.
DEFAULT_INIT = next(f.default for f in fields(Trial) if f.name == "init")


def _missing(value: Any) -> bool:
    """None, NaN, or pandas' NA (recognised by its type's name: this module imports no pandas)."""
    if value is None or type(value).__name__ == "NAType":
        return True
    return isinstance(value, float) and math.isnan(value)


def knowledge_names(value: Any) -> list[str]:
    """A row's ``knowledge`` column (a list, an array or a ``+``-joined text) as a list of names."""
    if _missing(value):
        return []
    if isinstance(value, str):
        return [part for part in value.split("+") if part]
    return [str(part) for part in value]


def knowledge_text(knowledge: Any, soft_weight: Any) -> str:
    """The knowledge a trial distils, or the baseline it is: ``hidden_mse + pkd``, ``soft labels only``,
    ``hard labels only``."""
    names = knowledge_names(knowledge)
    if names and names != ["hard_label"] and names != ["soft_label"]:
        return " + ".join(names)
    try:
        hard_only = names == ["hard_label"] or float(soft_weight) == 0.0
    except (TypeError, ValueError):
        hard_only = names == ["hard_label"]
    return HARD_ONLY if hard_only else SOFT_ONLY


def trial_title(record: Mapping[str, Any]) -> str:
    """A trial named by what distinguishes it: task, student, knowledge (or the baseline), strategy where
    knowledge is matched layer to layer, init where not `DEFAULT_INIT`, and the seed."""
    parts = [str(record.get(key)) for key in ("task", "student") if not _missing(record.get(key))]
    knowledge = knowledge_text(record.get("knowledge"), record.get("soft_weight"))
    parts.append(knowledge)
    strategy = record.get("strategy")
    if knowledge not in (SOFT_ONLY, HARD_ONLY) and not _missing(strategy) and str(strategy):
        parts.append(str(strategy))
    init = record.get("init")
    if not _missing(init) and str(init) not in ("", DEFAULT_INIT):
        parts.append(f"init {init}")
    seed = record.get("seed")
    if not _missing(seed):
        parts.append(f"seed {int(seed)}")
    return " · ".join(parts) or str(record.get("trial_id", "trial"))
