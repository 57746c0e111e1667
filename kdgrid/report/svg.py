"""Small line charts as inline SVG (per-epoch and per-step curves on a trial page): no image files, no script,
no library.

A chart is a list of series, each a label and (x, y) points; x is the epoch (1-based) or the optimizer step
(``x_label``), y in the series' own units (``y_label``, the axis title written along the y axis). Series are drawn
on one shared y axis scaled to their range, linear or (``log_y``) base-10 logarithmic, with `Y_TICKS` labelled
ticks (a log axis: one per power of ten where the range spans several, and the range's ends when they are far
from one, else `Y_TICKS` ticks evenly spaced in log); tick labels keep `TICK_DIGITS` significant digits. Each
series has its own colour and dash pattern, so lines drawn on top of each other stay distinguishable (and the
legend shows both); points are marked where there are at most `MAX_MARKED_POINTS`. A single point is a dot.
Labels are escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kdgrid.report.html import esc

WIDTH, HEIGHT = 420, 220
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 66, 12, 12, 30
# Colour-blind-safe palette (Okabe-Ito), cycled over series.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

DASHES = ("", "6 3", "2 2", "8 3 2 3", "1 3", "10 4")  # cycled with the colours: dashes differ where colours repeat
Y_TICKS = 5
X_TICKS = 6  # at most this many labelled x ticks (an epoch axis of up to 6 epochs: every epoch)
TICK_DIGITS = 4
MAX_MARKED_POINTS = 30

Series = tuple[str, Sequence[tuple[float, float]]]


def _y_ticks(low: float, high: float, log_y: bool) -> list[float]:
    """The y values labelled on the axis, in the data's units, from ``low`` to ``high`` (logs when ``log_y``)."""
    if log_y:
        decades = [float(d) for d in range(math.ceil(low), math.floor(high) + 1)]
        if len(decades) >= 2:
            # the ends too, where they are far from a labelled decade (a top tick of 0.1 under lines at 0.5 misleads)
            ends = [e for e in (low, high) if min(abs(e - d) for d in decades) > 0.25]
            return sorted(10**d for d in [*decades, *ends])
        return [10 ** (low + (high - low) * i / (Y_TICKS - 1)) for i in range(Y_TICKS)]
    return [low + (high - low) * i / (Y_TICKS - 1) for i in range(Y_TICKS)]


def _x_ticks(low: float, high: float, xs: Sequence[float]) -> list[float]:
    """The x values labelled: every integer x when there are at most `X_TICKS`, else round steps."""
    whole = sorted({x for x in xs if float(x).is_integer()})
    if len(whole) <= X_TICKS and whole:
        return sorted({low, high, *whole})
    span = high - low
    raw = span / (X_TICKS - 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = [first + i * step for i in range(int((high - first) / step) + 1)]
    return ticks or [low, high]


def tick_text(value: float) -> str:
    """A tick label: `TICK_DIGITS` significant digits, no trailing zeros (0.5125, not 0.512)."""
    return f"{value:.{TICK_DIGITS}g}"


def _dash(index: int) -> str:
    """Series ``index``'s dash pattern: the first `len(COLOURS)` differ by colour and dash, later ones by both."""
    return DASHES[(index + index // len(COLOURS)) % len(DASHES)]


def _swatch(index: int) -> str:
    """The legend's sample of series ``index``'s line: its colour, dashed as the line is (a CSS background)."""
    colour, dash = COLOURS[index % len(COLOURS)], _dash(index)
    if not dash:
        return colour
    on, off = (float(v) for v in dash.split()[:2])
    return f"repeating-linear-gradient(90deg, {colour} 0 {on:g}px, transparent {on:g}px {on + off:g}px)"


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in points if math.isfinite(float(x)) and math.isfinite(float(y))]


def line_chart(
    series: list[Series], *, title: str, y_label: str = "", log_y: bool = False, x_label: str = "epoch"
) -> str:
    """An ``<svg>`` chart of ``series`` with axes, their titles (``x_label``, ``y_label``), `Y_TICKS` y ticks and
    a legend below; an empty string when no series has a finite point. ``log_y``: a logarithmic y axis, where
    every value is positive (else linear, and the title says so)."""
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
            f'<text x="{MARGIN_LEFT - 4}" y="{at + 4:.1f}" text-anchor="end" class="tick">{tick_text(value)}</text>'
        )
    for value in _x_ticks(x_low, x_high, xs):
        parts.append(
            f'<text x="{sx(value):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 14}" text-anchor="middle" '
            f'class="tick">{value:g}</text>'
        )
    parts.append(
        f'<text x="{MARGIN_LEFT + plot_w / 2:.0f}" y="{HEIGHT - 2}" text-anchor="middle" class="axis-title">'
        f"{esc(x_label)}</text>"
    )
    if y_label:
        middle = MARGIN_TOP + plot_h / 2
        parts.append(
            f'<text x="12" y="{middle:.0f}" text-anchor="middle" transform="rotate(-90 12 {middle:.0f})" '
            f'class="axis-title">{esc(y_label)}{" (log)" if log_y else ""}</text>'
        )
    marked = sum(len(points) for _, points in drawn) <= MAX_MARKED_POINTS * len(drawn)
    for index, (label, points) in enumerate(drawn):
        colour, dash = COLOURS[index % len(COLOURS)], _dash(index)
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        if len(points) > 1:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dashes} points="{coords}">'
                f"<title>{esc(label)}</title></polyline>"
            )
        if marked or len(points) == 1:
            for x, y in points:
                shown = 10**y if log_y else y
                parts.append(
                    f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{colour}"><title>{esc(label)} '
                    f"{esc(x_label)} {x:g}: {shown:.6g}</title></circle>"
                )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><span class="swatch line" style="background:{_swatch(i)}"></span>{esc(label)}</span>'
        for i, (label, _) in enumerate(drawn)
    )
    return f'<figure class="chart">{"".join(parts)}<figcaption>{legend}</figcaption></figure>'
