"""How the report names a trial and prints its numbers: one home for every page.

- A trial is named by its settings, not by its hash (`kdgrid.trial_labels`).
- Scores: `SCORE_DIGITS` decimals everywhere (``0.7100``, never ``0.71`` beside ``0.717``); weights and other
  real numbers: `SIGNIFICANT_DIGITS` significant digits (``0.01234``, never ``0.012345678901234567``).
- A done trial is **degenerate** when its row records reasons (`kdgrid.core.training.degenerate`: constant predictions,
  at or below the majority class, MCC <= 0): its number is not evidence of anything, and every page that lists it
  says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.report.gather import parse_json
from kdgrid.report.html import esc, is_null
from kdgrid.trial_labels import knowledge_text, trial_title

__all__ = ["knowledge_text", "trial_title"]  # re-exported: the pages name trials through this module

SCORE_DIGITS = 4
SIGNIFICANT_DIGITS = 4
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
