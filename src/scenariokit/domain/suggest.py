"""Suggesting the name someone meant: ``did you mean getEnvUrl?`` (docs/step-code.md, "Common mistakes")."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: how many near names a message offers at most
MAX_SUGGESTIONS = 3


def nearest(name: str, known: Iterable[str], *, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The known names closest to ``name``, best first; a name differing only in case is the answer."""
    names = sorted({k for k in known if isinstance(k, str)})
    folded = [k for k in names if k.lower() == name.lower() and k != name]
    if folded:
        return folded[:limit]
    close = difflib.get_close_matches(name, names, n=limit, cutoff=0.6)
    lowered = {k.lower(): k for k in names}
    close += [lowered[k] for k in difflib.get_close_matches(name.lower(), list(lowered), n=limit, cutoff=0.6)]
    found: list[str] = []
    for candidate in close:
        if candidate not in found and candidate != name:
            found.append(candidate)
    return found[:limit]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean a?"`` (or ``"a, b or c"``) for the names near ``name``; ``""`` when none is."""
    found = nearest(name, known)
    if not found:
        return ""
    if len(found) == 1:
        return f"; did you mean {found[0]}?"
    return f"; did you mean {', '.join(found[:-1])} or {found[-1]}?"
