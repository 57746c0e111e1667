"""How the report names a trial and prints its numbers: one home for every page.

- A trial is named by its settings, not by its hash: ``polarity · bert-tiny · hidden_mse · Last-1 · seed 0``; the
  two baselines by name (``soft labels only``: no knowledge term, the teacher's soft labels weighted;
  ``hard labels only``: no knowledge and soft weight 0, i.e. fine-tuning without a teacher), exactly as the
  tables label them (`analysis.tables.SOFT_ONLY`, `HARD_ONLY`).
- Scores: `SCORE_DIGITS` decimals everywhere (``0.7100``, never ``0.71`` beside ``0.717``); weights and other
  real numbers: `SIGNIFICANT_DIGITS` significant digits (``0.01234``, never ``0.012345678901234567``).
- A done trial is **degenerate** when its row records reasons (`kdgrid.core.degenerate`: constant predictions,
  at or below the majority class, MCC <= 0): its number is not evidence of anything, and every page that lists it
  says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from analysis.render import DEGENERATE_MARK
from analysis.tables import HARD_ONLY, SOFT_ONLY
from kdgrid.report.gather import parse_json
from kdgrid.report.html import esc, is_null
from kdgrid.trial import Trial

SCORE_DIGITS = 4
SIGNIFICANT_DIGITS = 4
# A title names the init only where it is not the trial's default.
DEFAULT_INIT = next(f.default for f in fields(Trial) if f.name == "init")
DEGENERATE_WORD = "degenerate"


def score_text(value: Any) -> str:
    """A score with `SCORE_DIGITS` decimals; ``-`` when missing or not a number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(number) else f"{number:.{SCORE_DIGITS}f}"


def real_text(value: Any) -> str:
    """A real number (a weight, a temperature, a learning rate) with `SIGNIFICANT_DIGITS` significant digits;
    integers as integers; text as it is."""
    if isinstance(value, bool) or is_null(value):
        return "-" if is_null(value) else str(value)
    if isinstance(value, int):
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):
        return str(number)
    return f"{number:.{SIGNIFICANT_DIGITS}g}"


def knowledge_names(value: Any) -> list[str]:
    """A row's ``knowledge`` column (a list, an array or a ``+``-joined text) as a list of names."""
    if is_null(value):
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
    knowledge is matched layer to layer, init when not random, and the seed."""
    parts = [str(record.get(key)) for key in ("task", "student") if not is_null(record.get(key))]
    knowledge = knowledge_text(record.get("knowledge"), record.get("soft_weight"))
    parts.append(knowledge)
    strategy = record.get("strategy")
    if knowledge not in (SOFT_ONLY, HARD_ONLY) and not is_null(strategy) and str(strategy):
        parts.append(str(strategy))
    init = record.get("init")
    if not is_null(init) and str(init) not in ("", DEFAULT_INIT):
        parts.append(f"init {init}")
    seed = record.get("seed")
    if not is_null(seed):
        parts.append(f"seed {int(seed)}")
    return " · ".join(parts) or str(record.get("trial_id", "trial"))


def degenerate_reasons(record: Mapping[str, Any]) -> list[str]:
    """Why a done trial's number is not evidence (its row's ``degenerate_json``); empty for any other trial."""
    if record.get("state") != "done":
        return []
    reasons = parse_json(record.get("degenerate_json"), [])
    return [str(reason) for reason in reasons] if isinstance(reasons, list) else []


def degenerate_badge(reasons: list[str]) -> str:
    """The mark pages put beside a degenerate trial (its reasons in the tooltip); empty when there are none."""
    if not reasons:
        return ""
    return f' <span class="degenerate" title="{esc("; ".join(reasons))}">{DEGENERATE_MARK} {DEGENERATE_WORD}</span>'


def settings_rows(values: Mapping[str, Any]) -> list[list[str]]:
    """(name, value) rows of a mapping of settings or weights, values formatted by `real_text`, sorted by name."""
    return [[esc(name), esc(real_text(value))] for name, value in sorted(values.items())]
