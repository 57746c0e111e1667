"""What the overview says first: the cells of the report's tables that differ from their reference by the tables'
own tests (better or worse), and the cells whose runs are degenerate.

A finding is read off the laid-out tables (`kdgrid.analysis.tables.TableView` with the cells' uncertainty attached by
`kdgrid.analysis.cell_stats`), so the overview states exactly what the Tables page marks, by the same test and the same
correction; nothing is recomputed here. Better and worse findings are sorted by their adjusted p-value, then by
value (the largest gain, the deepest loss first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kdgrid.analysis.tables import TableView


@dataclass(frozen=True)
class Finding:
    """One cell worth reading first: where it is, its value, its interval, its adjusted p against its
    condition's reference, and the reasons its runs are degenerate (if any)."""

    table: str  # the table's anchor name ("5", "demo")
    table_title: str
    block: str
    row: str
    column: str
    value: float
    ci_low: float
    ci_high: float
    p_value: float
    direction: int  # +1 better than the reference, -1 worse, 0 not tested
    degenerate: tuple[str, ...]
    n_seeds: int = 1  # with one seed, a mark compares runs (seed variance left out), not methods

    @property
    def where(self) -> str:
        """``Table 5 · MRPC · bert-tiny · hidden_mse / Last-1`` (the column omitted when it is a single score)."""
        cell = self.row if self.column in ("", "score") else f"{self.row} / {self.column}"
        return " · ".join(part for part in (self.table_title, self.block, cell) if part)


@dataclass(frozen=True)
class Findings:
    """The overview's lead: cells better and worse than their reference by the tables' tests, and degenerate cells;
    ``tested``: how many cells were tested against a reference."""

    better: list[Finding]
    worse: list[Finding]
    degenerate: list[Finding]
    tested: int


def table_findings(views: list[TableView]) -> Findings:
    """The significant and the degenerate cells of ``views``; a cell of the same trials (same dev set and metric)
    with the same verdict in several tables is one finding, in the first table that shows it."""
    better: list[Finding] = []
    worse: list[Finding] = []
    degenerate: list[Finding] = []
    tested = 0
    seen: set[tuple[object, ...]] = set()
    for view in views:
        for block in view.blocks:
            for (row, column), cell in block.cells.items():
                if cell.missing or column.fact:
                    continue
                # the same runs in two tables (two sweeps sharing a store's trials) are one finding
                key = (cell.trial_ids, cell.config.get("dev_set"), cell.config.get("metric"), cell.direction,
                       cell.significant, bool(cell.degenerate))  # fmt: skip
                if cell.trial_ids and key in seen:
                    continue
                seen.add(key)
                finding = Finding(
                    table=view.name,
                    table_title=view.title,
                    block=block.title,
                    row=row,
                    column=column.label,
                    value=cell.value,
                    ci_low=cell.ci_low,
                    ci_high=cell.ci_high,
                    p_value=cell.p_vs_reference,
                    direction=cell.direction,
                    degenerate=tuple(cell.degenerate),
                    n_seeds=cell.n_seeds,
                )
                if not math.isnan(cell.p_vs_reference):
                    tested += 1
                if cell.degenerate:
                    degenerate.append(finding)
                elif cell.significant and cell.direction > 0:
                    better.append(finding)
                elif cell.significant and cell.direction < 0:
                    worse.append(finding)

    def order(finding: Finding) -> tuple[float, float]:
        return (finding.p_value, -finding.direction * finding.value)

    return Findings(sorted(better, key=order), sorted(worse, key=order), degenerate, tested)
