"""What a trial's learned methods ended with, for its page: a learnable strategy's weights over the teacher's
layers (the row's ``extra.mapping``: LAD's gate, ALP-KD's mean attention) as a student-layer x teacher-layer table,
and a learned temperature (``extra.learned_temperature``: CTKD's) with where it started."""

from __future__ import annotations

from typing import Any

from kdgrid.report.html import definition_list, esc, number, table


def _weight_rows(weights: Any) -> list[list[float]] | None:
    """``weights`` as rows of numbers, or None when it is not a list of lists of numbers."""
    if not isinstance(weights, list) or not all(isinstance(row, list) for row in weights):
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for row in weights for v in row):
        return None
    return weights


def mapping_section(mapping: Any) -> str:
    """The learned mapping's weights (one row per student layer S1.., a column per teacher layer T1..), its
    other recorded facts below; empty when the trial has none."""
    if not isinstance(mapping, dict) or not mapping:
        return ""
    rows = _weight_rows(mapping.get("weights"))
    parts = [f"<h2>Learned layer mapping ({esc(mapping.get('method', 'learnable strategy'))})</h2>"]
    if rows:
        width = max(len(row) for row in rows)
        parts.append(
            "<p>Weight of each teacher layer (columns) in each student layer's target (rows); each row sums "
            "to 1. A row left empty was never trained.</p>"
            + table(
                ["student layer", *[f"T{t}" for t in range(1, width + 1)]],
                [[f"S{i}", *[number(v, 3) for v in row]] for i, row in enumerate(rows, start=1)],
                cls="mapping",
            )
        )
    others = [(str(k), esc(v)) for k, v in mapping.items() if k not in ("weights", "method")]
    if others:
        parts.append(definition_list(others))
    return "".join(parts)


def temperature_section(learned: Any) -> str:
    """The learned temperature at the end, its start and range; empty when the trial learned none."""
    if not isinstance(learned, dict) or "temperature" not in learned:
        return ""
    items = [
        ("ended at", number(learned.get("temperature"), 4)),
        ("started at", number(learned.get("start"), 4)),
    ]
    items += [(str(k), esc(v)) for k, v in learned.items() if k not in ("temperature", "start", "method")]
    return f"<h2>Learned temperature ({esc(learned.get('method', ''))})</h2>" + definition_list(items)
