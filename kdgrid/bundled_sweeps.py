"""The sweep files shipped with kdgrid (the paper's studies and the demo), found through the package.

The files live in the repository's top-level ``sweeps/`` folder, where users read and copy them; ``kdgrid/sweeps``
is a symbolic link to that folder, so the package's data is the same files: in a checkout they are found through
the link, in an installed wheel (``pyproject.toml`` lists ``sweeps/*.yaml`` as kdgrid's package data) they are
real files beside the package. No code looks for a checkout.

A sweep may therefore be named by a path (``sweeps/table5_single_match.yaml``) or, when no such file exists, by
the bare name of a bundled one (``table5_single_match`` or ``demo.yaml``); a name that is neither is refused with
the bundled names close to it (`require_sweep`).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from kdgrid.errors import ConfigError
from kdgrid.suggest import did_you_mean

SWEEP_SUFFIX = ".yaml"
# Where the bundled sweep files are: a folder inside the installed package (a plain directory in every
# installation kdgrid supports; a zipped install is not one of them).
BUNDLED_SWEEPS_DIR = Path(str(files("kdgrid") / "sweeps"))


def bundled_sweep_files(pattern: str = f"*{SWEEP_SUFFIX}") -> list[Path]:
    """The bundled sweep files whose names match the glob ``pattern``, sorted by name; files starting with
    ``_`` (defaults that other sweeps include) are not sweeps and are left out."""
    if not BUNDLED_SWEEPS_DIR.is_dir():
        return []
    return sorted(path for path in BUNDLED_SWEEPS_DIR.glob(pattern) if not path.name.startswith("_"))


def bundled_sweep(name: str) -> Path | None:
    """The bundled sweep file called ``name`` (``demo`` or ``demo.yaml``), or None if there is none."""
    if not name or "/" in name or "\\" in name or name.startswith("_"):
        return None
    file_name = name if name.endswith(SWEEP_SUFFIX) else name + SWEEP_SUFFIX
    path = BUNDLED_SWEEPS_DIR / file_name
    return path if path.is_file() else None


def find_sweep(path_or_name: Path | str) -> Path:
    """``path_or_name`` itself when it exists (or names a path that is not a bundled sweep), else the bundled
    sweep of that bare name. A path that exists always wins, so a user's own ``demo.yaml`` is never shadowed."""
    path = Path(path_or_name)
    if path.exists():
        return path
    return bundled_sweep(str(path_or_name)) or path


def bundled_sweep_names() -> list[str]:
    """The names of the bundled sweeps (file names without ``.yaml``), sorted."""
    return [path.stem for path in bundled_sweep_files()]


def require_sweep(path_or_name: Path | str) -> Path:
    """`find_sweep`, refusing a path or name that is neither a file nor a bundled sweep, with the bundled
    sweeps whose names are close (``table5`` -> ``table5_single_match``).

    Raises:
        ConfigError: no such file and no bundled sweep of that name.
    """
    path = find_sweep(path_or_name)
    if path.exists():
        return path
    text = str(path_or_name)
    stem = Path(text).name.removesuffix(SWEEP_SUFFIX)
    raise ConfigError(
        f"{text}: cannot read the file (there is none, and no sweep of that name ships with kdgrid; `kdgrid sweeps` "
        f"lists them){did_you_mean(stem, bundled_sweep_names())}"
    )
