"""Checking and canonicalising one setting's value, using the registries of the other areas.

Canonical forms make equal configurations equal trials (and equal ids): knowledge names are registry names,
sorted (a pair's order does not matter); strategies are canonical names (``last-1`` -> ``Last-1``); free-form
student shapes are written in full (``w144-l8`` -> ``w144-l8-h4-f576``); known task names are lower-case.

"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from kdgrid.core.choices import INIT_SCHEMES, PROJECTIONS, unknown_choice
from kdgrid.core.data import TASKS, get_task
from kdgrid.core.knowledge import canonical_knowledge
from kdgrid.core.matching import canonical_strategy
from kdgrid.core.model.shapes import STUDENTS, student_shape
from kdgrid.errors import KdgridError
from kdgrid.grid.spec import frozen

FLOAT_FIELDS = ("soft_weight", "temperature", "alpha", "lr", "warmup_ratio", "weight_decay")
INT_FIELDS = ("batch_size", "max_length", "epochs", "seed")
OPTIONAL_INT_FIELDS = ("relation_heads", "max_train_samples")
OPTIONAL_STR_FIELDS = ("init_from",)


class InvalidValue(ValueError):
    """A value that is not allowed for its field; the message names the allowed values."""


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _refused_as_invalid(canonical: Callable[[str], str]) -> Callable[[str], str]:
    """``canonical`` (a registry's name lookup), memoised, its refusal raised as `InvalidValue` (one message)."""

    @functools.cache
    def name(written: str) -> str:
        try:
            return canonical(written)
        except KdgridError as error:
            raise InvalidValue(str(error)) from None

    return name


_knowledge_name = _refused_as_invalid(canonical_knowledge)
_strategy_name = _refused_as_invalid(canonical_strategy)


@functools.cache
def _student_name(name: str) -> str:
    try:
        shape = student_shape(name)
    except KdgridError as error:
        raise InvalidValue(str(error)) from None
    key = name.strip().lower()
    return key if key in STUDENTS else shape.name


@functools.cache
def _task_name(name: str) -> str:
    try:
        get_task(name)
    except KdgridError as error:
        raise InvalidValue(str(error)) from None
    key = name.strip().lower()
    return key if key in TASKS else name


def _knowledge(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise InvalidValue(f"knowledge must be a name or a list of names, got {value!r}")
    canonical = [_knowledge_name(n) for n in names]
    repeated = sorted({n for n in canonical if canonical.count(n) > 1})
    if repeated:
        raise InvalidValue(f"knowledge {list(names)} names {', '.join(repeated)} twice")
    return tuple(sorted(canonical))


def normalize(field: str, value: Any) -> Any:
    """The canonical value of ``field``; raises `InvalidValue` naming what is allowed."""
    if field == "knowledge":
        return _knowledge(value)
    if field == "strategy":
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidValue(f"strategy must be a name, got {value!r}")
        return _strategy_name(value)
    if field in ("task", "teacher", "student", "init", "projection"):
        if not isinstance(value, str) or not value.strip():
            raise InvalidValue(f"{field} must be a non-empty string, got {value!r}")
        if field == "task":
            return _task_name(value)
        if field == "student":
            return _student_name(value)
        if field == "init" and value not in INIT_SCHEMES:
            raise InvalidValue(unknown_choice("init", value, INIT_SCHEMES))
        if field == "projection" and value not in PROJECTIONS:
            raise InvalidValue(unknown_choice("projection", value, PROJECTIONS))
        return value
    if field in OPTIONAL_STR_FIELDS:
        if value is not None and not isinstance(value, str):
            raise InvalidValue(f"{field} must be a string or null, got {value!r}")
        return value
    if field == "beta":
        if value == "auto":
            return value
        if not _number(value) or value < 0:
            raise InvalidValue(f"beta must be a number >= 0 or 'auto', got {value!r}")
        return float(value)
    if field in FLOAT_FIELDS:
        if not _number(value):
            raise InvalidValue(f"{field} must be a number, got {value!r}")
        return float(value)
    if field in INT_FIELDS or field in OPTIONAL_INT_FIELDS:
        if value is None and field in OPTIONAL_INT_FIELDS:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidValue(f"{field} must be an integer, got {value!r}")
        if field != "seed" and value < 1:
            raise InvalidValue(f"{field} must be >= 1, got {value}")
        return value
    if field == "options":
        if value is None:
            return ()
        if not isinstance(value, Mapping):
            raise InvalidValue(f"options must be a mapping of option name -> value, got {value!r}")
        return tuple(sorted((str(k), frozen(v)) for k, v in value.items()))
    raise InvalidValue(f"unknown field {field!r}")


def drop_unused_fields(config: dict[str, Any]) -> dict[str, Any]:
    """The last step of canonicalising a trial's fields (sweep files and trial files alike), in place: a trial
    without knowledge has no matching strategy (so a baseline crossed with the strategy axis is one trial)."""
    if not config.get("knowledge"):
        config["strategy"] = None
    return config


def rule_candidates(field: str, value: Any) -> list[Any]:
    """The canonical values a ``when`` / ``exclude`` entry accepts: a list means "any of" (for ``knowledge``, a
    list of lists; a plain list of names is one knowledge combination)."""
    if field == "knowledge":
        if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
            return [normalize(field, v) for v in value]
        return [normalize(field, value)]
    if isinstance(value, list) and field != "options":
        return [normalize(field, v) for v in value]
    return [normalize(field, value)]
