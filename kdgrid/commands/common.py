"""Pieces shared by the command modules."""

from __future__ import annotations

from kdgrid.errors import NotYetAvailableError


def not_yet(command: str, issue: str) -> NotYetAvailableError:
    """The error of a command whose implementation has not landed: it says so, and exits non-zero."""
    return NotYetAvailableError(f"`kdgrid {command}` is not implemented yet (it lands with the {issue}).")
