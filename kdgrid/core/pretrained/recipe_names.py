"""The pre-training recipes a sweep can name (trial option ``init_recipe``): bundled YAML files in
``kdgrid/core/pretrained/recipes/`` by their name, or any recipe YAML by its path.

A recipe file holds the fields of a `kdgrid.core.pretrained.recipe.PretrainRecipe` except ``student`` and ``objective``:
a trial completes it with its student shape and its init scheme (`kdgrid.core.pretrained.needed.recipe_for_trial`).

Light on import (no torch, no recipe): the option's value check (`kdgrid.core.options`) uses it.
"""

from __future__ import annotations

from pathlib import Path

RECIPES_DIR = Path(__file__).parent / "recipes"
RECIPE_SUFFIX = ".yaml"
# The option naming a trial's recipe (declared in `kdgrid.core.options`).
INIT_RECIPE = "init_recipe"


def bundled_recipe_names() -> list[str]:
    """The names of the recipes shipped with kdgrid, sorted (``offline``, ``paper``, ...)."""
    return sorted(path.stem for path in RECIPES_DIR.glob(f"*{RECIPE_SUFFIX}"))


def allowed_recipes() -> str:
    """The allowed values of ``init_recipe``, as a message names them."""
    return ", ".join(bundled_recipe_names()) + f", or the path of a recipe file (*{RECIPE_SUFFIX})"


def recipe_path(name: str) -> Path | None:
    """The file ``name`` stands for: a bundled recipe by name, else an existing ``*.yaml`` file (relative paths
    are relative to the working directory); ``None`` when it is neither."""
    if name in bundled_recipe_names():
        return RECIPES_DIR / f"{name}{RECIPE_SUFFIX}"
    path = Path(name).expanduser()
    if path.suffix in (RECIPE_SUFFIX, ".yml") and path.is_file():
        return path
    return None


def init_recipe_problem(value: object) -> str | None:
    """Why ``value`` cannot be an ``init_recipe`` (None when it can): it must name a recipe that exists."""
    if isinstance(value, str) and value and recipe_path(value) is not None:
        return None
    return f"option {INIT_RECIPE}={value!r} names no recipe; allowed: {allowed_recipes()}"
