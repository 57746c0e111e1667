"""Small line charts as inline SVG (per-epoch curves on a trial page): no image files, no script, no library.

A chart is a list of series, each a label and (x, y) points; x is the epoch (1-based), y in the series' own units.
Series are drawn on one shared y axis scaled to their range, linear or (``log_y``) base-10 logarithmic, with
`Y_TICKS` labelled ticks (a log axis: one per power of ten where the range spans several, else `Y_TICKS` ticks
evenly spaced in log); a single point is a dot. Labels are escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kdgrid.report.html import esc

WIDTH, HEIGHT = 420, 220
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 12, 12, 28
# Colour-blind-safe palette (Okabe-Ito), cycled over series.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

Y_TICKS = 5

Series = tuple[str, Sequence[tuple[float, float]]]


def _y_ticks(low: float, high: float, log_y: bool) -> list[float]:
    """The y values labelled on the axis, in the data's units, from ``low`` to ``high`` (logs when ``log_y``)."""
    if log_y:
        decades = [float(d) for d in range(math.ceil(low), math.floor(high) + 1)]
        if len(decades) >= 2:
            return [10**d for d in decades]
        return [10 ** (low + (high - low) * i / (Y_TICKS - 1)) for i in range(Y_TICKS)]
    return [low + (high - low) * i / (Y_TICKS - 1) for i in range(Y_TICKS)]


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in points if math.isfinite(float(x)) and math.isfinite(float(y))]


def line_chart(series: list[Series], *, title: str, y_label: str = "", log_y: bool = False) -> str:
    """An ``<svg>`` chart of ``series`` with axes, `Y_TICKS` y ticks and a legend below; an empty string when no
    series has a finite point. ``log_y``: a logarithmic y axis, where every value is positive (else linear, and
    the title says so)."""
    drawn = [(label, _finite(points)) for label, points in series]
    drawn = [(label, points) for label, points in drawn if points]
    if not drawn:
        return ""
    if log_y and any(y <= 0 for _, points in drawn for _, y in points):
        log_y, title = False, f"{title} (linear: a value is not positive)"
    if log_y:
        drawn = [(label, [(x, math.log10(y)) for x, y in points]) for label, points in drawn]
    xs = [x for _, points in drawn for x, _ in points]
    ys = [y for _, points in drawn for _, y in points]
    x_low, x_high = min(xs), max(xs)
    y_low, y_high = min(ys), max(ys)
    if x_high == x_low:
        x_low, x_high = x_low - 1, x_high + 1
    if y_high == y_low:
        pad = abs(y_low) * 0.05 or 1.0
        y_low, y_high = y_low - pad, y_high + pad
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def sx(x: float) -> float:
        return MARGIN_LEFT + (x - x_low) / (x_high - x_low) * plot_w

    def sy(y: float) -> float:
        return MARGIN_TOP + (1 - (y - y_low) / (y_high - y_low)) * plot_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{esc(title)}"><title>{esc(title)}</title>',
        f'<rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>',
    ]
    for value in _y_ticks(y_low, y_high, log_y):
        at = sy(math.log10(value) if log_y else value)
        parts.append(
            f'<line x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT + plot_w}" y1="{at:.1f}" y2="{at:.1f}" stroke="#eee"/>'
            f'<text x="{MARGIN_LEFT - 4}" y="{at + 4:.1f}" text-anchor="end" class="tick">{value:.3g}</text>'
        )
    for value in sorted({x_low, x_high, *xs}):
        if float(value).is_integer() or value in (x_low, x_high):
            parts.append(
                f'<text x="{sx(value):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 14}" text-anchor="middle" '
                f'class="tick">{value:g}</text>'
            )
    parts.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2:.0f}" y="{HEIGHT - 2}" text-anchor="middle" class="tick">epoch</text>'
    )
    if y_label:
        parts.append(f'<text x="4" y="{MARGIN_TOP + 10}" class="tick">{esc(y_label)}</text>')
    for index, (label, points) in enumerate(drawn):
        colour = COLOURS[index % len(COLOURS)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        if len(points) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
        for x, y in points:
            shown = 10**y if log_y else y
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"><title>{esc(label)} '
                f"epoch {x:g}: {shown:.6g}</title></circle>"
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><span class="swatch" style="background:{COLOURS[i % len(COLOURS)]}"></span>'
        f"{esc(label)}</span>"
        for i, (label, _) in enumerate(drawn)
    )
    return f'<figure class="chart">{"".join(parts)}<figcaption>{legend}</figcaption></figure>'
