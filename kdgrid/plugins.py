"""Plugins: a researcher's own modules (knowledge functions, matching strategies fixed or learnable, per-example
weights, schedules, trial options) known to every process kdgrid starts.

A plugin is a module that registers what it adds when it is imported (`kdgrid.core.knowledge.register`,
`kdgrid.core.matching.register_strategy`, `kdgrid.core.example_weights.register_example_weight`,
`kdgrid.core.schedules.register_schedule`, `kdgrid.core.options.register_option`; docs/extending.md). Three places
name plugins:

- the Python entry points of the group `ENTRY_POINT_GROUP` (``kdgrid.plugins``) of installed packages: each
  entry point's value is the module (``[project.entry-points."kdgrid.plugins"] mine = "my_package.kd"``);
- the environment variable `PLUGINS_VARIABLE` (``KDGRID_PLUGINS``): module names separated by commas, for a
  project that is not packaged (its folder on ``PYTHONPATH``);
- the ``plugins:`` list at the top of a sweep file (`kdgrid.grid.spec`).

`load_plugins` imports each named module once per process; calling it again is cheap and imports only names that
are new. The CLI calls it first, and so does every process that runs jobs (local worker processes, Ray actors,
SLURM array tasks, the processes of ``kdgrid pretrain``). The plugins named by the variable or a sweep file reach
those processes through `plugin_environment` (``KDGRID_PLUGINS`` holding all of them), which every executor hands
its jobs (`kdgrid.launch.environment.job_variables`); entry points are found by each process itself.

What a row records: `plugin_versions` (one entry per loaded plugin, in the row's package versions,
`kdgrid.store.provenance`). A trial's id never depends on its plugins, nor on where they were named.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata

from kdgrid.errors import KdgridError

ENTRY_POINT_GROUP = "kdgrid.plugins"
PLUGINS_VARIABLE = "KDGRID_PLUGINS"
# The prefix of a plugin's entry in a row's package versions: ``plugin:<module>`` -> its version.
PROVENANCE_PREFIX = "plugin:"
UNKNOWN_VERSION = "unknown"


class PluginError(KdgridError):
    """A plugin cannot be imported; the message names the plugin and where it was named."""


@dataclass(frozen=True)
class Plugin:
    """A loaded plugin: its module, where it was named (``entry point mine (my-dist)``, ``KDGRID_PLUGINS``,
    ``sweep file <path>``) and its version (None: unknown)."""

    module: str
    source: str
    version: str | None
    from_entry_point: bool = False


_loaded: dict[str, Plugin] = {}  # module -> plugin, in loading order
_entry_points_loaded = False


def loaded_plugins() -> list[Plugin]:
    """The plugins this process has loaded, in loading order."""
    return list(_loaded.values())


def module_names(text: str) -> list[str]:
    """The module names of a ``KDGRID_PLUGINS`` value: comma-separated, blanks ignored."""
    return [name.strip() for name in text.split(",") if name.strip()]


def load_plugins(modules: Iterable[str] = (), *, source: str = PLUGINS_VARIABLE) -> list[Plugin]:
    """Import the plugins of the installed entry points (the first time), of ``KDGRID_PLUGINS`` as it is now,
    and ``modules`` (named by ``source``, e.g. ``sweep file x.yaml``). A module already loaded is skipped.
    Returns every plugin this process has loaded.

    Raises:
        PluginError: a plugin that cannot be imported (the message names it and its source).
    """
    global _entry_points_loaded
    if not _entry_points_loaded:
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry_point.dist
            where = f"entry point {entry_point.name!r}" + (f" of {dist.name} {dist.version}" if dist else "")
            _load(entry_point.value.partition(":")[0].strip(), where, dist.version if dist else None, True)
        _entry_points_loaded = True
    for name in module_names(os.environ.get(PLUGINS_VARIABLE, "")):
        _load(name, f"the environment variable {PLUGINS_VARIABLE}", None, False)
    for name in modules:
        _load(name, source, None, False)
    return loaded_plugins()


def load_plugins_or_exit() -> None:
    """`load_plugins` at the start of a process that runs jobs: a plugin that cannot be imported ends it with the
    one message on stderr and exit status 2 (as the CLI does)."""
    try:
        load_plugins()
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        sys.exit(2)


def _load(module: str, source: str, version: str | None, from_entry_point: bool) -> None:
    if module in _loaded:
        return
    try:
        imported = importlib.import_module(module)
    except (Exception, SystemExit) as error:
        # any error of the plugin's own code is the plugin's failure to load; a `sys.exit()` at import too, which
        # would otherwise end every kdgrid command (even `--help`) silently with the plugin's status
        raise PluginError(
            f"plugin {module!r} (named by {source}) cannot be imported: {type(error).__name__}: {error}"
        ) from error
    _loaded[module] = Plugin(module, source, version or _module_version(module, imported), from_entry_point)


def _module_version(module: str, imported: object) -> str | None:
    """The version of the distribution that installed ``module`` (by its top-level package), else the module's
    ``__version__``, else None."""
    for dist in _distributions_of().get(module.partition(".")[0], []):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    version = getattr(imported, "__version__", None)
    return version if isinstance(version, str) else None


@functools.cache
def _distributions_of() -> Mapping[str, list[str]]:
    """Top-level module -> the distributions providing it (read once: it scans every installed package)."""
    return metadata.packages_distributions()


def plugin_environment() -> dict[str, str]:
    """``{"KDGRID_PLUGINS": ...}`` naming every plugin loaded here from the variable or a sweep file (with what the
    variable already names), for the processes that run this process's jobs; empty when there is none."""
    names = module_names(os.environ.get(PLUGINS_VARIABLE, ""))
    names += [p.module for p in _loaded.values() if not p.from_entry_point and p.module not in names]
    return {PLUGINS_VARIABLE: ",".join(names)} if names else {}


def plugin_versions() -> dict[str, str]:
    """``plugin:<module>`` -> version (`UNKNOWN_VERSION` where none is known) for each loaded plugin."""
    return {f"{PROVENANCE_PREFIX}{p.module}": p.version or UNKNOWN_VERSION for p in _loaded.values()}
