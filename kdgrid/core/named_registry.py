"""One way to register a named extension (an example weight, a schedule, a temperature learner): a decorator
that adds the decorated function or class to its table under a name, refusing a name registered twice. Without
torch.

`registration_problem` is the one refusal of a name that is not registered."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, MutableMapping
from typing import TypeVar

from kdgrid.suggest import did_you_mean

Entry = TypeVar("Entry")


def registrar(
    table: MutableMapping[str, Entry], kind: str, reserved: Collection[str] = ()
) -> Callable[[str], Callable[[Entry], Entry]]:
    """``register(name)``: a decorator adding what it decorates to ``table`` as ``name``.

    Raises ``ValueError`` (naming the ``kind``) for a name already in ``table`` or one of ``reserved`` (a name
    that means "none" in the option that picks the entry)."""

    def register(name: str) -> Callable[[Entry], Entry]:
        def decorate(entry: Entry) -> Entry:
            if name in table or name in reserved:
                raise ValueError(f"{kind} {name!r} is registered twice")
            table[name] = entry
            return entry

        return decorate

    return register


def registration_problem(value: object, table: Iterable[str], kind: str, also: Iterable[str] = ()) -> str | None:
    """Why ``value`` is not a name in ``table`` nor one of ``also`` (None when it is): the message names the
    allowed ones and the closest."""
    allowed = [*also, *table]
    if isinstance(value, str) and value in allowed:
        return None
    return f"{kind} {value!r} is not registered; allowed: {', '.join(allowed)}{did_you_mean(str(value), allowed)}"
