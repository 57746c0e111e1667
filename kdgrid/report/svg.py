"""Small line charts as inline SVG (per-epoch curves on a trial page): no image files, no script, no library.

A chart is a list of series, each a label and (x, y) points; x is the epoch (1-based), y in the series' own units.
Series are drawn on one shared y axis scaled to their range; a single point is a dot. Labels are escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kdgrid.report.html import esc

WIDTH, HEIGHT = 420, 220
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 12, 12, 28
# Colour-blind-safe palette (Okabe-Ito), cycled over series.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

Series = tuple[str, Sequence[tuple[float, float]]]


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in points if math.isfinite(float(x)) and math.isfinite(float(y))]


def line_chart(series: list[Series], *, title: str, y_label: str = "") -> str:
    """An ``<svg>`` chart of ``series`` with axes, ticks at the lowest and highest values and a legend below;
    an empty string when no series has a finite point."""
    drawn = [(label, _finite(points)) for label, points in series]
    drawn = [(label, points) for label, points in drawn if points]
    if not drawn:
        return ""
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
    for value in (y_low, y_high):
        parts.append(
            f'<text x="{MARGIN_LEFT - 4}" y="{sy(value) + 4:.1f}" text-anchor="end" class="tick">{value:.4g}</text>'
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
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"><title>{esc(label)} '
                f"epoch {x:g}: {y:.6g}</title></circle>"
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><span class="swatch" style="background:{COLOURS[i % len(COLOURS)]}"></span>'
        f"{esc(label)}</span>"
        for i, (label, _) in enumerate(drawn)
    )
    return f'<figure class="chart">{"".join(parts)}<figcaption>{legend}</figcaption></figure>'
