"""``--compare paper``: the published value and the difference beside each reproduced one, and how well each block
agrees (mean absolute difference, Spearman's rank correlation over the cells where both numbers exist); where our
cells ran two or more seeds (`kdgrid.analysis.cell_stats`), whether each published value lies where one more run of ours
would (a t prediction interval over the seeds) and the share per block that does; one seed cannot say.

Both sides are laid out by the same `TableSpec`, so cells meet by their place in the table (block, row, column),
not by configuration fields the paper does not print (its temperature in Table 5, say). A published number with no
reproduced one beside it still shows, next to a ``-``.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from kdgrid.analysis.paper_numbers import paper_numbers
from kdgrid.analysis.tables import (
    AVERAGE,
    Agreement,
    Block,
    Cell,
    Column,
    TableView,
    build_view,
    get_spec,
    ordered,
)
from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_TABLES


def agreement(pairs: list[tuple[float, float]]) -> Agreement:
    """Mean |ours - paper| and Spearman's rho over (ours, paper) pairs; rho is NaN with fewer than 3 pairs or a
    constant side (it is undefined there)."""
    if not pairs:
        return Agreement(0, math.nan, math.nan)
    ours = [a for a, _ in pairs]
    paper = [b for _, b in pairs]
    mad = sum(abs(a - b) for a, b in pairs) / len(pairs)
    rho = math.nan
    if len(pairs) >= 3 and len(set(ours)) > 1 and len(set(paper)) > 1:
        # Local: importing scipy.stats takes ~1.6 s, paid only where a block has numbers to rank.
        from scipy.stats import spearmanr

        rho = float(spearmanr(ours, paper).statistic)
    return Agreement(len(pairs), mad, rho)


def _scored(column: Column) -> bool:
    """Columns whose cells are scores of their own (not facts, not an average of the others)."""
    return not column.fact and column.label != AVERAGE


def attach_paper(ours: TableView, paper: TableView) -> TableView:
    """A copy of ``ours`` with every published number of ``paper`` placed beside ours (blocks, rows and columns
    only the paper has are added, showing ``-`` for ours), and each block's `Agreement` over its score cells.
    Our bold marks are kept (best of ours); the published values are not bolded."""
    blocks: dict[str, Block] = {}
    for block in ours.blocks:
        cells = {key: dataclasses.replace(c) for key, c in block.cells.items()}
        blocks[block.title] = Block(block.title, list(block.rows), list(block.columns), cells)
    for theirs in paper.blocks:
        mine = blocks.setdefault(theirs.title, Block(theirs.title, [], list(theirs.columns), {}))
        mine.rows = ordered([*theirs.rows, *mine.rows], theirs.rows)
        mine.columns = ordered(
            [*mine.columns, *theirs.columns], mine.columns, key=lambda c: (c.group, c.label)
        )
        for key, published in theirs.cells.items():
            cell = mine.cells.setdefault(key, Cell())
            cell.paper = published.value
            if not math.isnan(cell.paper) and _scored(key[1]) and _has_run_interval(cell):
                cell.paper_inside = cell.paper_low <= cell.paper <= cell.paper_high
    order = [b.title for b in ours.blocks] + [b.title for b in paper.blocks if b.title not in ours.titles()]
    view = TableView(
        ours.name,
        ours.title + " — compared with the paper",
        [blocks[t] for t in order],
        notes=list(ours.notes),
        side_by_side=ours.side_by_side,
        compared=True,
    )
    for block in view.blocks:
        pairs = [
            (cell.value, cell.paper)
            for (_, column), cell in block.cells.items()
            if _scored(column) and not math.isnan(cell.value) and not math.isnan(cell.paper)
        ]
        block.agreement = agreement(pairs)
        judged = [c.paper_inside for c in block.cells.values() if c.paper_inside is not None]
        block.agreement.with_interval, block.agreement.inside = len(judged), sum(judged)
    overall = agreement(
        [
            (c.value, c.paper)
            for b in view.blocks
            for (_, col), c in b.cells.items()
            if _scored(col) and not math.isnan(c.value) and not math.isnan(c.paper)
        ]
    )
    if overall.n:
        rho = "-" if math.isnan(overall.spearman) else f"{overall.spearman:.3f}"
        view.notes.append(
            f"whole table: {overall.n} cells with both numbers, mean |difference| {overall.mean_abs_diff:.4f}, "
            f"Spearman rank correlation {rho}"
        )
    else:
        view.notes.append("no cell has both a reproduced and a published number")
    judged = [c.paper_inside for b in view.blocks for c in b.cells.values() if c.paper_inside is not None]
    if judged:
        view.notes.append(
            f"the published value lies inside our 95% interval in {sum(judged)} of {len(judged)} cells "
            f"({sum(judged) / len(judged):.0%}); ∈/∉ use where one more run of the cell would fall (a t "
            "prediction interval over its seeds: the published number is one run, with its own training noise)"
        )
    one_seed = sum(
        c.has_interval and not _has_run_interval(c) and not math.isnan(c.paper) and _scored(col)
        for b in view.blocks
        for (_, col), c in b.cells.items()
    )
    if one_seed:
        view.notes.append(
            f"{one_seed} cell(s) ran one seed: their interval is over dev examples only, and one seed cannot say "
            "whether the published number is within training noise of ours (no ∈/∉); run two or more seeds"
        )
    return view


def _has_run_interval(cell: Cell) -> bool:
    """Whether the cell has the interval a published run is judged against (two or more seeds)."""
    return not (math.isnan(cell.paper_low) or math.isnan(cell.paper_high))


def paper_view(name: str, paper: pd.DataFrame | None = None) -> TableView:
    """Table ``name`` laid out from the published numbers (`kdgrid.analysis.paper_numbers`, or ``paper`` if given)."""
    spec = get_spec(name)
    if paper is None:
        paper = paper_numbers(spec.name)
    return build_view(spec, paper)


def compare_with_paper(ours: TableView, paper: pd.DataFrame | None = None) -> TableView:
    """``ours`` with the published numbers of the same table beside it (see `attach_paper`)."""
    if ours.name not in PAPER_TABLES:
        raise ConfigError(f"table {ours.name!r} is not in the paper: --compare paper works for tables 1-8")
    return attach_paper(ours, paper_view(ours.name, paper))
