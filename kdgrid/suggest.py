""" "Did you mean ...?": the closest known names to a name that is not known, for refusal messages.

Close means `difflib`'s ratio of matching characters (0.6 and up), compared case-insensitively; a name that
starts a known one (``table5`` for ``table5_single_match``) counts as close too, since a prefix is how a name is
usually shortened.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_SUGGESTIONS = 3
CUTOFF = 0.6


def close_names(name: str, known: Iterable[str], *, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to ``limit`` names of ``known`` close to ``name``, the closest first: those it starts (a shortened
    name), then `difflib`'s close matches; [] when none is close."""
    by_key = {str(k).lower(): str(k) for k in known}
    key = str(name).strip().lower()
    if not key:
        return []
    starts = sorted(k for k in by_key if k.startswith(key) and k != key)
    similar = difflib.get_close_matches(key, list(by_key), n=limit, cutoff=CUTOFF)
    ordered = list(dict.fromkeys([*starts, *similar]))
    return [by_key[k] for k in ordered[:limit]]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the names close to ``name`` (`close_names`), or ``""``: the end of a
    refusal message (appended, so the message's own wording is unchanged)."""
    names = close_names(name, known)
    if not names:
        return ""
    return f"; did you mean {' or '.join(repr(n) for n in names)}?"


def choice_problem(name: str, value: object, allowed: Iterable[str]) -> str | None:
    """Why ``value`` of the option ``name`` is not one of ``allowed`` (None when it is): ``"option {name}={value!r}
    is invalid; allowed: a, b; did you mean 'a'?"`` (the hint for a misspelt string)."""
    choices = list(allowed)
    if isinstance(value, str) and value in choices:
        return None
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    return f"option {name}={value!r} is invalid; allowed: {', '.join(choices)}{hint}"
