"""Plugin modules and installed-package metadata written into a test's folder (`kdgrid.plugins`).

`write_plugin` writes a module that registers a knowledge function, a matching strategy and a trial option, and
appends its process id to the file named by `IMPORT_LOG_VARIABLE` each time it is imported, so a test sees which
processes loaded it. `write_dist_info` writes the metadata of an installed distribution whose entry point names
a plugin: ``importlib.metadata`` finds ``*.dist-info`` folders on ``sys.path``.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kdgrid import plugins
from kdgrid.core import example_weights, knowledge, matching, method_registry, optimizers, options, schedules

IMPORT_LOG_VARIABLE = "KDGRID_TEST_PLUGIN_IMPORTS"
PLUGIN_VERSION = "1.2.3"


# The registries a plugin adds to, restored after each test that loads one in the test's own process.
_REGISTRIES = (
    knowledge.KNOWLEDGE,
    knowledge._ALIASES,
    knowledge._FUNCTIONS,
    matching.STRATEGIES,
    matching.STRATEGY_ALIASES,
    matching._KEYS,
    options.OPTIONS,
    schedules.SCHEDULES,
    schedules.TEMPERATURE_LEARNERS,
    example_weights.EXAMPLE_WEIGHTS,
    method_registry.METHODS,
    optimizers.OPTIMIZERS,
)


@contextmanager
def isolated_plugins(prefix: str = "kdplug") -> Iterator[None]:
    """A process that has loaded no plugin yet (`kdgrid.plugins`' record emptied, ``KDGRID_PLUGINS`` unset),
    and afterwards every registry, that record, the variable and ``sys.modules`` (modules named ``prefix...``)
    as they were: the test process imports a plugin as a fresh worker would, and the next test does not see it."""
    saved = [dict(registry) for registry in _REGISTRIES]
    loaded, entry_points_loaded = dict(plugins._loaded), plugins._entry_points_loaded
    variable = os.environ.pop(plugins.PLUGINS_VARIABLE, None)
    plugins._loaded.clear()
    plugins._entry_points_loaded = False
    try:
        yield
    finally:
        for registry, before in zip(_REGISTRIES, saved, strict=True):
            registry.clear()
            registry.update(before)
        plugins._loaded.clear()
        plugins._loaded.update(loaded)
        plugins._entry_points_loaded = entry_points_loaded
        os.environ.pop(plugins.PLUGINS_VARIABLE, None)
        if variable is not None:
            os.environ[plugins.PLUGINS_VARIABLE] = variable
        for name in [name for name in sys.modules if name.startswith(prefix)]:
            del sys.modules[name]


def knowledge_name(module: str) -> str:
    return f"{module}_hidden_l1"


def strategy_name(module: str) -> str:
    return f"{module.capitalize()}Last"


def option_name(module: str) -> str:
    return f"{module}_scale"


def write_plugin(folder: Path, module: str) -> Path:
    """``folder/<module>.py``: registers `knowledge_name`, `strategy_name` and `option_name` (all derived from
    ``module``, so two plugins of one test do not clash), with ``__version__`` = `PLUGIN_VERSION`."""
    path = folder / f"{module}.py"
    path.write_text(
        textwrap.dedent(
            f'''\
            """A researcher's own knowledge function, strategy and option (a test plugin)."""
            import os

            import torch

            from kdgrid.core.knowledge import register
            from kdgrid.core.matching import register_strategy
            from kdgrid.core.options import register_option

            __version__ = "{PLUGIN_VERSION}"

            _log = os.environ.get("{IMPORT_LOG_VARIABLE}")
            if _log:
                with open(_log, "a") as handle:
                    handle.write(f"{{os.getpid()}}\\n")


            @register(
                "{knowledge_name(module)}",
                needs=("hidden",),
                needs_projection=True,
                category="feature",
                region="hidden",
                call_style="pair",
                source="a test plugin",
            )
            def hidden_l1(hidden_s: torch.Tensor, hidden_t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
                return (hidden_s - hidden_t).abs().mean()


            @register_strategy(
                "{strategy_name(module)}",
                distinct_teacher_layers=True,
                description="the student's last layer <- the teacher's last",
            )
            def last_only(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
                return [(student_layers, teacher_layers)]


            register_option("{option_name(module)}", "number", 1.0, "a test plugin's scale", minimum=0)
            '''
        )
    )
    return path


def write_broken_plugin(folder: Path, module: str) -> Path:
    path = folder / f"{module}.py"
    path.write_text('raise RuntimeError("this plugin is broken on purpose")\n')
    return path


def write_dist_info(folder: Path, distribution: str, version: str, entry_points: dict[str, str]) -> Path:
    """``folder/<distribution>-<version>.dist-info`` declaring ``entry_points`` (name -> module) in the group
    ``kdgrid.plugins``."""
    info = folder / f"{distribution}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    lines = "".join(f"{name} = {module}\n" for name, module in entry_points.items())
    (info / "entry_points.txt").write_text(f"[kdgrid.plugins]\n{lines}")
    return info
