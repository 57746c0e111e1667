"""Checks of command-line arguments that several commands share, so each refusal is worded once."""

from __future__ import annotations

from pathlib import Path

from kdgrid.errors import ConfigError


def check_store_argument(store: Path) -> None:
    """``--store`` must name a directory, or nothing yet (a store that does not exist is empty).

    Raises:
        ConfigError: it names a file (or anything else that is not a directory).
    """
    if store.exists() and not store.is_dir():
        raise ConfigError(f"--store {store} is not a directory: a store is a directory of Parquet files")
