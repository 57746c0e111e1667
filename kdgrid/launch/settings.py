"""Typed executor settings: one frozen dataclass per executor, each field with its type, default and help.

Keys carry the executor's prefix (``local_workers``, ``ray_gpus_per_job``, ``slurm_partition``) so that one flat
mapping of ``--set KEY=VALUE`` flags can reach any executor; the prefix may be left out inside an executor's own
settings (a SLURM profile says ``partition:``). An unknown key is refused at once, naming it and the allowed ones.

Values may arrive as text from the command line (``"8"``, ``"0.25"``, ``"false"``); `ExecutorSettings.build`
turns them into the field's type by one rule per type and refuses anything else with a `ConfigError` naming the
prefixed key:

- ``int``: a whole number (or its digits as text) >= the field's ``minimum`` (default 0) and <= its ``maximum``
  (default `MAX_WHOLE_NUMBER`, so that no number overflows a C integer where it reaches the operating system);
- ``float``: a finite number (or text) >= 0, or > 0 where the field says ``positive``;
- ``bool``: true / false (also ``"true"``, ``"false"``, ``"yes"``, ``"no"``, ``"1"``, ``"0"``);
- ``str`` (a number is taken as its text); ``list[str]``: a list of strings; ``dict[str, Any]``: a mapping;
- ``X | None``: None, or an ``X``. A field may instead name its own ``parse`` function (the SLURM time limit).

Checks that involve more than one value's type (a start method this platform has) live in the dataclass's
``__post_init__``.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from kdgrid.errors import ConfigError
from kdgrid.number_range import NumberRange
from kdgrid.suggest import did_you_mean

S = TypeVar("S", bound="ExecutorSettings")
TRUE_WORDS = ("true", "yes", "1")
FALSE_WORDS = ("false", "no", "0")
# The largest whole number a setting takes unless its field says less: a signed 32-bit C int.
MAX_WHOLE_NUMBER = 2**31 - 1


def setting(
    default: Any,
    help: str,
    *,
    minimum: int = 0,
    maximum: int = MAX_WHOLE_NUMBER,
    positive: bool = False,
    parse: Callable[[Any, str], Any] | None = None,
) -> Any:
    """A settings field: its default, its help line and the bounds its type's rule checks (``minimum`` for a
    whole number, ``positive`` for a number); ``parse(value, key)`` replaces the type's rule."""
    metadata = {"help": help, "minimum": minimum, "maximum": maximum, "positive": positive, "parse": parse}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class ExecutorSettings:
    """The base of every executor's settings; a subclass sets `PREFIX` and declares its fields with `setting`."""

    PREFIX: ClassVar[str] = ""

    @classmethod
    def names(cls) -> list[str]:
        """The settings' names without the prefix, in declaration order."""
        return [field.name for field in dataclasses.fields(cls)]

    @classmethod
    def help(cls) -> dict[str, str]:
        """Prefixed key -> help line (what ``--set`` accepts for this executor)."""
        return {f"{cls.PREFIX}{field.name}": field.metadata["help"] for field in dataclasses.fields(cls)}

    @classmethod
    def normalize(cls, given: Mapping[str, Any], *, source: str) -> dict[str, Any]:
        """``given`` with the prefix stripped from each key (it may be left out); refuses an unknown key, naming
        ``source`` (a profile file, "flags"), the key and the allowed ones."""
        allowed = cls.names()
        normalized: dict[str, Any] = {}
        unknown: list[str] = []
        for key, value in given.items():
            name = key[len(cls.PREFIX) :] if key.startswith(cls.PREFIX) else key
            if name in allowed:
                normalized[name] = value
            else:
                unknown.append(key)
        if unknown:
            names = ", ".join(f"{cls.PREFIX}{name}" for name in allowed)
            known = [f"{cls.PREFIX}{name}" for name in allowed] + list(allowed)
            hints = "".join(did_you_mean(key, known) for key in sorted(unknown))
            raise ConfigError(
                f"{source}: unknown setting(s) {', '.join(sorted(unknown))}; allowed: {names}{hints}"
            )
        return normalized

    @classmethod
    def build(cls: type[S], values: Mapping[str, Any]) -> S:
        """The settings of ``values`` (unprefixed names, from `normalize`; missing ones take their default),
        each turned into its field's type."""
        hints = typing.get_type_hints(cls)
        typed = {}
        for field in dataclasses.fields(cls):
            if field.name in values:
                typed[field.name] = _coerce(values[field.name], hints[field.name], field, cls.PREFIX)
        return cls(**typed)

    @classmethod
    def from_flags(cls: type[S], flags: Mapping[str, Any], *, source: str = "executor settings") -> S:
        """Defaults updated by ``flags`` (prefixed or not), validated and typed."""
        return cls.build(cls.normalize(flags, source=source))


def _coerce(value: Any, hint: Any, field: dataclasses.Field[Any], prefix: str) -> Any:
    key = f"{prefix}{field.name}"
    parse = field.metadata["parse"]
    if parse is not None:
        return parse(value, key)
    optional = _is_optional(hint)
    if optional and value is None:
        return None
    kind = _without_none(hint) if optional else hint
    origin = typing.get_origin(kind) or kind
    if kind is bool:
        return _boolean(value, key)
    if kind is int:
        return _whole_number(value, key, field.metadata["minimum"], field.metadata["maximum"])
    if kind is float:
        return _number(value, key, positive=field.metadata["positive"])
    if kind is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # YAML reads `qos: 1` as a number
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected text, got {value!r}")
        return value
    if origin is list:
        if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
            raise ConfigError(f"{key}: expected a list of shell lines, got {value!r}")
        return list(value)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping {{option: value}}, got {value!r}")
        return dict(value)
    raise TypeError(f"{key}: no rule for settings of type {hint!r}")  # a field declared with an unknown type


def _is_optional(hint: Any) -> bool:
    return isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint)


def _without_none(hint: Any) -> Any:
    (kind,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return kind


def _boolean(value: Any, key: str) -> bool:
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _whole_number(value: Any, key: str, minimum: int, maximum: int) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not NumberRange(low=minimum, high=maximum, integer=True).contains(value):
        raise ConfigError(f"{key}: expected a whole number >= {minimum} and <= {maximum}, got {value!r}")
    return value


def _number(value: Any, key: str, *, positive: bool) -> float:
    """A finite number (text too), > 0 if ``positive`` else >= 0."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not NumberRange(low=0, low_open=positive).contains(number):
        raise ConfigError(f"{key}: expected a number {'>' if positive else '>='} 0, got {value!r}")
    return number
