"""Who is calling the services: the door a write came through and the name of the token that made it.

Each door says so once, around the call it makes (:func:`calling_as`): the REST middleware for a
request, the MCP middleware for a tool call, the schedule clock for a fire. The services read it with
:func:`current_caller` where they record a write (the audit log, a scenario revision's ``tokenName``);
a call that no door wrapped is the library's (``door="library"``, no token).
"""

from __future__ import annotations

import contextvars
from typing import Literal

import attrs

from scenariokit.domain.access import Scope

#: The ways in: REST, MCP, a schedule's fire, the command line, the library (``Kit`` and direct calls).
Door = Literal["rest", "mcp", "schedule", "cli", "library"]


@attrs.frozen
class Caller:
    """The door of the current call and the token it carried (``token_name`` None: none, or a bare one)."""

    door: Door = "library"
    token_name: str | None = None
    #: the scope the token holds; None where no token was asked for (the API without tokens, the library)
    scope: Scope | None = None

    def allows(self, needed: Scope) -> bool:
        """Whether this caller may do what ``needed`` guards (a caller without a token scope may)."""
        return self.scope is None or self.scope >= needed


#: a call no door wrapped (a frozen value, safe as the default)
LIBRARY = Caller()
_CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("scenariokit_caller", default=LIBRARY)


def current_caller() -> Caller:
    """The caller of the service call under way (the library's when no door said otherwise)."""
    return _CALLER.get()


def current_token_name() -> str | None:
    """The name of the token the current call came with, or None."""
    return _CALLER.get().token_name


class calling_as:  # used as a function: ``with calling_as(caller):``
    """Make ``caller`` the current caller for the code inside the block (this task and tasks it starts).

    A class rather than a generator: every request enters it, and this costs a third as much.
    """

    __slots__ = ("_caller", "_reset")

    def __init__(self, caller: Caller) -> None:
        self._caller = caller

    def __enter__(self) -> Caller:
        self._reset = _CALLER.set(self._caller)
        return self._caller

    def __exit__(self, *exc_info: object) -> None:
        _CALLER.reset(self._reset)
