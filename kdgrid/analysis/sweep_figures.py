"""Figures of any sweep's table (`kdgrid figures --sweep NAME --out DIR`): a forest plot per block of each cell's
difference from its reference with the 95% interval of that difference, sorted, as researchers read them.

Conventions: the difference is the cell's mean minus its reference's (the metric's units), its interval the
percentile interval over the same paired example resamples as the table's (`kdgrid.analysis.sweep_tables`);
green/red: better/worse than the reference beyond noise (the table's Holm-adjusted test), grey: not; a hollow
marker and ``†`` in the label: a degenerate run among the cell's seeds. Files are PNG (200 dpi) and PDF, written
to the folder asked for (never into the store).
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are files

import matplotlib.pyplot as plt

from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.analysis.sweep_tables import Difference, SweepTable

BETTER, WORSE, SAME = "#1a9850", "#d73027", "#7f7f7f"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "block"


def forest_plots(table: SweepTable, out_dir: Path) -> list[Path]:
    """One forest plot per block that has tested cells, as PNG and PDF in ``out_dir``; returns the files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metric = ", ".join(
        sorted({str(c.config.get("metric")) for b in table.view.blocks for c in b.cells.values() if c.config})
    )
    blocks: dict[str, list[Difference]] = {}
    for difference in table.differences:
        blocks.setdefault(difference.block, []).append(difference)
    written = []
    for index, (block, differences) in enumerate(blocks.items()):
        ordered = sorted(differences, key=lambda d: d.difference)
        figure, axes = plt.subplots(figsize=(6.5, 0.9 + 0.32 * len(ordered)))
        for y, d in enumerate(ordered):
            colour = SAME if not d.significant else (BETTER if d.direction > 0 else WORSE)
            axes.errorbar(
                d.difference,
                y,
                xerr=[[d.difference - d.low], [d.high - d.difference]],
                fmt="o",
                color=colour,
                markerfacecolor="white" if d.degenerate else colour,
                capsize=3,
            )
        axes.axvline(0.0, color="black", linewidth=0.8)
        axes.set_yticks(range(len(ordered)))
        axes.set_yticklabels([d.label + (f" {DEGENERATE_MARK}" if d.degenerate else "") for d in ordered])
        axes.set_xlabel(f"{metric}: difference from the reference\n({table.reference.label})")
        axes.set_title(f"{table.view.name}: {block}", loc="left", fontsize=10)
        axes.grid(axis="x", alpha=0.3)
        figure.tight_layout()
        stem = out_dir / f"{_slug(table.view.name)}_forest_{index + 1}_{_slug(block)}"
        for suffix in (".png", ".pdf"):
            figure.savefig(stem.with_suffix(suffix), dpi=200)
            written.append(stem.with_suffix(suffix))
        plt.close(figure)
    return written
