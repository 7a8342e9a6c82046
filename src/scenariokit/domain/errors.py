"""Domain errors. They know nothing of HTTP: the server maps them to statuses in one table."""

from __future__ import annotations

from collections.abc import Mapping


class ScenarioKitError(Exception):
    """Base of every error scenariokit raises on purpose."""


class ValidationError(ScenarioKitError):
    """Input that does not fit the model; ``errors`` maps a field path to what is wrong with it."""

    def __init__(self, message: str, errors: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors: dict[str, str] = dict(errors or {})

    def __str__(self) -> str:
        if not self.errors:
            return self.message
        fields = "; ".join(f"{path}: {why}" for path, why in self.errors.items())
        return f"{self.message} ({fields})"


class InvalidQuery(ValidationError):
    """A list query (page, limit, orderBy, orderDir, filters) that cannot be run."""


class NotFound(ScenarioKitError):
    """A record that does not exist."""

    def __init__(self, kind: str, ident: object) -> None:
        super().__init__(f"{kind} {ident} not found")
        self.kind = kind
        self.ident = ident


class Forbidden(ScenarioKitError):
    """A write the caller's token may not make (its scope does not hold what the write needs)."""


class Conflict(ScenarioKitError):
    """A write that breaks a uniqueness rule or the state of a record."""


class BrowserUnavailable(ScenarioKitError):
    """No browser could be found or connected to."""


class TooLarge(ScenarioKitError):
    """Input over a size bound (a body, a YAML document, an alias expansion)."""


class SecretKeyError(ScenarioKitError):
    """The keys are missing, malformed, or cannot decrypt what the store holds: the store will not open."""


class SecretUnreadable(ScenarioKitError):
    """A stored secret that none of the configured keys decrypts."""


class AuthoringUnavailable(ScenarioKitError):
    """This process holds no live browsers for authoring (no scheduler here, or none can start)."""


class AuthoringEnded(NotFound):
    """An authoring session that existed and has ended (closed, idle too long, its worker died)."""

    def __init__(self, ident: object, reason: str) -> None:
        ScenarioKitError.__init__(self, f"authoring session {ident} has ended: {reason}")
        self.kind = "authoring session"
        self.ident = ident
        self.reason = reason
