"""Settings of the service, the worker and the CLI: defaults, ``SCENARIOKIT_*`` variables, checks."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from scenariokit.domain.access import ApiToken, TokenEntryError, parse_token_entries
from scenariokit.logs import LOG_FORMATS, LogFormat, parse_log_format
from scenariokit.runner.confinement.sandbox import (
    DEFAULT_MEMORY_MB,
    SANDBOX_MODES,
    SANDBOX_SETTINGS,
    SandboxConfig,
    SandboxMode,
    parse_flag,
    parse_memory_mb,
    read_variables,
)
from scenariokit.runner.parent.capacity import default_workers
from scenariokit.runner.worker.browser import check_browser_args, parse_browser_args
from scenariokit.services import RunSettings
from scenariokit.storage.opening import DEFAULT_DATABASE_URL
from scenariokit.storage.sqlalchemy import sqlite_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 13000
DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024
TRACE_MODES = ("off", "on-failure", "always")
TraceMode = Literal["off", "on-failure", "always"]


class SettingsError(ValueError):
    """A setting (usually an environment variable) with a value the server cannot use."""


class UnsafeBindError(SettingsError):
    """Binding a non-loopback address without API tokens and without ``insecure``."""


def _positive(_: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise SettingsError(f"{attribute.name} must be greater than 0, got {value!r}")


def _not_negative(_: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value >= 0:  # NaN too
        raise SettingsError(f"{attribute.name} must be 0 or more, got {value!r}")


def _port(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if not 0 <= value <= 65535:
        raise SettingsError(f"port must be from 0 to 65535, got {value!r}")


def _trace(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in TRACE_MODES:
        raise SettingsError(f"trace must be one of {', '.join(TRACE_MODES)}, got {value!r}")


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _browser_args(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    try:
        check_browser_args(value)
    except ValueError as exc:
        raise SettingsError(f"browser_args: {exc}") from None


def _memory_mb(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    try:
        parse_memory_mb(str(value))
    except ValueError as exc:
        raise SettingsError(f"run_memory_mb {exc}, got {value!r}") from None


def _token_entries(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    try:
        parse_token_entries(value)
    except TokenEntryError as exc:  # the message names the entry's position, never its token
        raise SettingsError(str(exc)) from None


def displayed_url(database_url: str) -> str:
    """A database URL fit to print or log: its password, if any, replaced by ``***``."""
    try:
        return make_url(database_url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<a database URL that does not parse>"


def default_artifacts_dir(database_url: str) -> Path:
    """Run files go in ``artifacts/`` beside a SQLite database file, else in ``./artifacts``."""
    path = sqlite_path(database_url)
    return path.parent / "artifacts" if path is not None else Path("artifacts")


@attrs.frozen(kw_only=True)
class Settings:
    """How the server listens, where it stores data, who may call it, and how runs execute."""

    host: str = DEFAULT_HOST
    port: int = attrs.field(default=DEFAULT_PORT, validator=_port)
    database_url: str = attrs.field(default=DEFAULT_DATABASE_URL, repr=displayed_url)
    insecure: bool = False
    #: ``SCENARIOKIT_API_TOKENS`` entries as given (``token`` or ``name:scope:token``); see :attr:`tokens`
    api_tokens: tuple[str, ...] = attrs.field(
        default=(), converter=_strings, validator=_token_entries, repr=False
    )
    cors_origins: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    allowed_hosts: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    max_body_bytes: int = attrs.field(default=DEFAULT_MAX_BODY_BYTES, validator=_positive)
    secret_key: str | None = attrs.field(default=None, repr=False)
    artifacts_dir: Path = attrs.field(
        default=attrs.Factory(lambda self: default_artifacts_dir(self.database_url), takes_self=True),
        converter=Path,
    )
    trace: TraceMode = attrs.field(default="off", validator=_trace)
    #: runs at once: measured default for this machine's cores and memory (runner/parent/capacity.py)
    workers: int = attrs.field(factory=default_workers, validator=_positive)
    lease_seconds: float = attrs.field(default=15.0, validator=_positive)
    session_keepalive_seconds: float = attrs.field(default=600.0, validator=_positive)
    run_scheduler: bool = True
    #: how workers are confined (docs/security.md): ``auto``, ``bubblewrap`` or ``off``
    sandbox: SandboxMode = attrs.field(default="auto", validator=attrs.validators.in_(SANDBOX_MODES))
    #: how much memory step code may allocate in one run
    run_memory_mb: int = attrs.field(default=DEFAULT_MEMORY_MB, validator=_memory_mb)
    #: Chromium switches every launch adds (``SCENARIOKIT_BROWSER_ARGS``; docs/deployment.md)
    browser_args: tuple[str, ...] = attrs.field(default=(), converter=_strings, validator=_browser_args)
    #: whether workers start the Playwright driver from a snapshot the pool builds (docs/deployment.md)
    driver_snapshot: bool = True
    #: whether each run's driver is forked from a driver zygote where Node.js can run one (docs/deployment.md)
    driver_zygote: bool = True
    #: live authoring sessions at once (docs/authoring.md)
    authoring_max: int = attrs.field(default=2, validator=_positive)
    #: seconds an unused authoring session stays open
    authoring_idle_seconds: float = attrs.field(default=600.0, validator=_positive)
    #: how the service and the worker log: ``text`` or ``json``, one object a line (docs/deployment.md)
    log_format: LogFormat = attrs.field(default="text", validator=attrs.validators.in_(LOG_FORMATS))
    #: on SIGTERM, how long runs under way may finish before they go back to the queue (docs/deployment.md)
    drain_seconds: float = attrs.field(default=30.0, validator=_not_negative)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] = os.environ, *, only: Iterable[str] | None = None, **overrides: Any
    ) -> Settings:
        """Settings from ``SCENARIOKIT_*`` variables; keyword ``overrides`` (not None) win over them.

        ``only`` names the settings to read (as :data:`LOCAL_RUN_SETTINGS` does for local runs); the
        others keep their defaults, whatever their variables hold. A variable with a value that cannot
        be used raises :class:`SettingsError` naming it.
        """
        names = _VARIABLES if only is None else {name: _VARIABLES[name] for name in only}
        values = read_variables(names, environ, SettingsError)
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls(**values)

    @property
    def tokens(self) -> tuple[ApiToken, ...]:
        """The API tokens with their names and scopes (docs/deployment.md, "Tokens and scopes")."""
        return parse_token_entries(self.api_tokens)

    def run_settings(self) -> RunSettings:
        """The part of these settings the run service uses."""
        return RunSettings(
            artifacts_dir=self.artifacts_dir,
            trace=self.trace,
            lease_seconds=self.lease_seconds,
            session_keepalive_seconds=self.session_keepalive_seconds,
            authoring_max=self.authoring_max,
            authoring_idle_seconds=self.authoring_idle_seconds,
        )

    def sandbox_config(self) -> SandboxConfig:
        """How the scheduler's pool confines its workers (the scheduler adds the store's paths to hide)."""
        return SandboxConfig.from_settings(**{name: getattr(self, name) for name in SANDBOX_SETTINGS})

    @property
    def url(self) -> str:
        """The base URL the server answers on."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def _port_number(raw: str) -> int:
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise ValueError("must be a port number from 0 to 65535")
    return int(raw)


def _positive_whole(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError("must be a whole number of at least 1")
    return int(raw)


def _positive_number(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a number greater than 0")
    return value


def _seconds_or_zero(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a number of seconds, 0 or more")
    return value


def _names(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _trace_mode(raw: str) -> TraceMode:
    if raw not in TRACE_MODES:
        raise ValueError(f"must be one of {', '.join(TRACE_MODES)}")
    return cast(TraceMode, raw)


def environment_variable(name: str) -> str:
    """The ``SCENARIOKIT_*`` variable of a setting, e.g. ``SCENARIOKIT_WORKERS`` for ``workers``."""
    return _VARIABLES[name][0]


#: What a local run reads (``scenariokit run``, the pytest plugin): no server, no shared database. Its
#: pool reads the sandbox's settings and the browser's switches itself (``SandboxConfig.from_env``,
#: ``browser_args``); they are read here too so that a bad one is a usage error naming its variable
#: before any browser starts.
LOCAL_RUN_SETTINGS = ("workers", "artifacts_dir", "trace", *SANDBOX_SETTINGS, "browser_args")

_VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "host": ("SCENARIOKIT_HOST", str),
    "port": ("SCENARIOKIT_PORT", _port_number),
    "database_url": ("SCENARIOKIT_DATABASE_URL", str),
    "api_tokens": ("SCENARIOKIT_API_TOKENS", _names),
    "cors_origins": ("SCENARIOKIT_CORS_ORIGINS", _names),
    "allowed_hosts": ("SCENARIOKIT_ALLOWED_HOSTS", _names),
    "max_body_bytes": ("SCENARIOKIT_MAX_BODY_BYTES", _positive_whole),
    "secret_key": ("SCENARIOKIT_SECRET_KEY", str),
    "artifacts_dir": ("SCENARIOKIT_ARTIFACTS_DIR", Path),
    "trace": ("SCENARIOKIT_TRACE", _trace_mode),
    "workers": ("SCENARIOKIT_WORKERS", _positive_whole),
    "lease_seconds": ("SCENARIOKIT_LEASE_SECONDS", _positive_number),
    "session_keepalive_seconds": ("SCENARIOKIT_SESSION_KEEPALIVE", _positive_number),
    "run_scheduler": ("SCENARIOKIT_RUN_SCHEDULER", parse_flag),
    **SANDBOX_SETTINGS,
    "browser_args": ("SCENARIOKIT_BROWSER_ARGS", parse_browser_args),
    "authoring_max": ("SCENARIOKIT_AUTHORING_MAX", _positive_whole),
    "authoring_idle_seconds": ("SCENARIOKIT_AUTHORING_IDLE_SECONDS", _positive_number),
    "log_format": ("SCENARIOKIT_LOG_FORMAT", parse_log_format),
    "drain_seconds": ("SCENARIOKIT_DRAIN_SECONDS", _seconds_or_zero),
}
