"""Who may do what: the scopes of API tokens and the named tokens of ``SCENARIOKIT_API_TOKENS``.

Scopes are ordered, each holding the ones below it: ``read`` < ``run`` < ``write`` < ``admin``
(docs/deployment.md, "Tokens and scopes"). An entry of ``SCENARIOKIT_API_TOKENS`` is either a bare
token (scope ``admin``, no name: what every token was before scopes) or ``name:scope:token``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

import attrs

#: The shortest token accepted: a short token is one a guessing client could find.
MIN_TOKEN_LENGTH = 16
#: What a token's name may hold: it is shown in the audit log and in logs.
TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


class Scope(enum.IntEnum):
    """What a token may do; a higher scope holds every lower one."""

    READ = 1
    RUN = 2
    WRITE = 3
    ADMIN = 4

    @property
    def label(self) -> str:
        """The scope as written in settings and messages (``read`` …)."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Scope:
        """The scope named ``text``; ValueError naming the known ones otherwise."""
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown scope; use one of {', '.join(s.label for s in cls)}") from None


class TokenEntryError(ValueError):
    """An entry of ``SCENARIOKIT_API_TOKENS`` that cannot be used; the message never holds the token."""


@attrs.frozen
class ApiToken:
    """One accepted bearer token: its name (None for a bare token), its scope and its secret value."""

    name: str | None
    scope: Scope
    secret: str = attrs.field(repr=False)

    def allows(self, needed: Scope) -> bool:
        """Whether this token's scope holds ``needed``."""
        return self.scope >= needed


def parse_token_entry(entry: str, position: int) -> ApiToken:
    """One ``SCENARIOKIT_API_TOKENS`` entry (``token`` or ``name:scope:token``); ``position`` counts from 1.

    The error names the entry by its position and what is wrong with it, never its token.
    """
    where = f"SCENARIOKIT_API_TOKENS entry {position}"
    if ":" not in entry:
        name, scope, secret = None, Scope.ADMIN, entry
    else:
        parts = entry.split(":", 2)
        if len(parts) != 3:
            raise TokenEntryError(f"{where}: write it as name:scope:token (or a bare token)")
        raw_name, raw_scope, secret = parts
        if not TOKEN_NAME.fullmatch(raw_name):
            raise TokenEntryError(
                f"{where}: the name must be 1 to 64 letters, digits or . _ @ - "
                "(starting with a letter or digit)"
            )
        try:
            scope = Scope.parse(raw_scope)
        except ValueError as exc:
            raise TokenEntryError(f"{where}: {exc}") from None
        name = raw_name
    if len(secret) < MIN_TOKEN_LENGTH:
        raise TokenEntryError(
            f"{where}: the token is shorter than {MIN_TOKEN_LENGTH} characters; use a long random token, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return ApiToken(name=name, scope=scope, secret=secret)


def parse_token_entries(entries: Iterable[str]) -> tuple[ApiToken, ...]:
    """Every entry parsed; a repeated name or token is refused, naming both positions."""
    tokens: list[ApiToken] = []
    names: dict[str, int] = {}
    secrets: dict[str, int] = {}
    for position, entry in enumerate(entries, start=1):
        token = parse_token_entry(entry, position)
        if token.name is not None:
            if token.name in names:
                raise TokenEntryError(
                    f"SCENARIOKIT_API_TOKENS entry {position}: the name {token.name!r} is already "
                    f"given to entry {names[token.name]}"
                )
            names[token.name] = position
        if token.secret in secrets:
            raise TokenEntryError(
                f"SCENARIOKIT_API_TOKENS entry {position}: the token repeats the token of entry "
                f"{secrets[token.secret]}"
            )
        secrets[token.secret] = position
        tokens.append(token)
    return tuple(tokens)
