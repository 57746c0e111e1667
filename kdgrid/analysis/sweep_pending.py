"""Pending trials in a sweep's own table: the cells a sweep lists trials for that have no done row yet.

A sweep's membership (`kdgrid.store.membership`) records trial ids only, and a trial id is a hash of the trial's
whole configuration, so where a pending trial belongs is read from the sweep's trials themselves: the expanded
sweep file (`kdgrid.grid.expand.load_sweep`), whose trials carry their ids. Only trials whose id the file
produces are placed (an id found proves the configuration); the others are counted as not placed.

Each pending trial goes to the cell of its row and column values in every main block of its task (and block
axes): a cell with done runs keeps its numbers and carries the pending ids too (it averages fewer seeds than it
will); a cell without any done run is added, with no number, and shown as `PENDING_MARK`. A pending trial whose
value of a field the table does not lay out differs from the done runs' (it would need a new axis), or whose
task no block shows, is not placed. The statistics never see pending cells: they are placed after them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kdgrid.analysis.sweep_tables import NONE_LABEL, SweepTable, field_label, trial_fields
from kdgrid.analysis.tables import PENDING_MARK, Block, Cell, Column
from kdgrid.trial import Trial, assistant_id

_NOT_FIELDS = frozenset({"dev_set", "metric", "role"})  # a cell's config entries that are no trial field


@dataclass(frozen=True)
class PendingPlacement:
    """What `place_pending` did: pending trials placed, cells that carry any (``new_cells`` of them with no done
    run yet) and the ids of the trials it could not place, in the order given."""

    placed: int
    cells: int
    new_cells: int
    unplaced: tuple[str, ...]

    def note(self) -> str:
        """One line for under the table."""
        total = self.placed + len(self.unplaced)
        text = (
            f"pending: {total} trial(s) of this sweep have no row yet; {self.placed} of them sit in "
            f"{self.cells} cell(s) marked {PENDING_MARK} ({self.new_cells} with no done run yet, the others "
            "average fewer seeds than they will)"
        )
        if self.unplaced:
            text += (
                f"; {len(self.unplaced)} could not be placed (not in the sweep file read, or a value this table "
                "does not lay out)"
            )
        return text


def pending_fields(
    trials: Mapping[str, Trial], pending: Mapping[str, str], with_study: bool
) -> dict[str, dict[str, str]]:
    """Pending trial id -> its fields as a sweep table labels them (`trial_fields`, and ``study`` where the table
    has several), for the pending ids ``trials`` (trial id -> trial, from the expanded sweep file) holds.
    ``pending``: trial id -> its study (the membership's)."""
    fields: dict[str, dict[str, str]] = {}
    for trial_id, study in pending.items():
        trial = trials.get(trial_id)
        if trial is None:
            continue
        fields[trial_id] = trial_fields(trial.canonical_json())
        if with_study:
            fields[trial_id]["study"] = field_label("study", study)
    return fields


def _same(a: str, b: str) -> bool:
    # a teacher assistant's student differs with the seed; the table counts every such teacher as one value
    return a == b or bool(assistant_id(a) and assistant_id(b))


def place_pending(
    table: SweepTable, pending: Mapping[str, Mapping[str, str] | None]
) -> PendingPlacement:
    """Mark the pending trials in ``table``'s main blocks, in place (see the module docstring).

    Args:
        pending: pending trial id -> its fields (`pending_fields`), or None where its configuration is unknown.
    """
    layout = table.layout
    main = table.view.blocks[: table.main_blocks]
    placed, unplaced = 0, []
    marked: dict[int, Cell] = {}
    new_cells = 0
    for trial_id, fields in pending.items():
        spots = [] if fields is None else _spots(main, layout.rows, layout.cols, layout.blocks, fields)
        if not spots:
            unplaced.append(trial_id)
            continue
        placed += 1
        for block, row, column, config in spots:
            cell = block.cells.get((row, column))
            if cell is None:
                cell = Cell(config=config)
                block.cells[(row, column)] = cell
                new_cells += 1
                if row not in block.rows:
                    block.rows.append(row)
                if column not in block.columns:
                    block.columns.append(column)
            if trial_id not in cell.pending:
                cell.pending = (*cell.pending, trial_id)
            marked[id(cell)] = cell
    return PendingPlacement(placed, len(marked), new_cells, tuple(unplaced))


def _spots(
    blocks: list[Block],
    rows: tuple[str, ...],
    cols: tuple[str, ...],
    block_axes: tuple[str, ...],
    fields: Mapping[str, str],
) -> list[tuple[Block, str, Column, dict[str, str]]]:
    """(block, row label, column, the cell's config) of a pending trial in each main block it belongs to."""
    row = " · ".join(fields.get(a, "") or NONE_LABEL for a in rows) if rows else ""
    spots = []
    for block in blocks:
        done = [c for c in block.cells.values() if not c.missing]
        if not done:
            continue
        config = done[0].config
        if any(fields.get(a, "") != str(config.get(a, "")) for a in (*block_axes, "task")):
            continue
        fixed = set(config) - _NOT_FIELDS - set(rows) - set(cols) - set(block_axes) - {"task"}
        if any(not _same(fields.get(name, ""), str(config.get(name, ""))) for name in fixed) or any(
            value and name not in config for name, value in fields.items()
        ):
            return []  # it differs where this table lays out no axis: no cell of it is the trial's
        label = " · ".join(fields.get(a, "") or NONE_LABEL for a in cols) if cols else str(config["metric"])
        column = next((c for c in block.columns if c.label == label), Column(label))
        spots.append((block, row, column, {**config, **{a: fields.get(a, "") for a in (*rows, *cols)}}))
    return spots
