"""The server's settings: they live in the library (:mod:`scenariokit.settings`), shared with the CLI."""

from scenariokit.settings import (
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    Settings,
    SettingsError,
    UnsafeBindError,
    default_artifacts_dir,
)

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "Settings",
    "SettingsError",
    "UnsafeBindError",
    "default_artifacts_dir",
]
