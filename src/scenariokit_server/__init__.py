"""scenariokit's aiohttp service: the REST API under ``/api/v1``, ``/health`` and the docs at ``/docs``."""

from scenariokit_server.app import create_app, run_server
from scenariokit_server.settings import Settings, SettingsError, UnsafeBindError

__all__ = ["Settings", "SettingsError", "UnsafeBindError", "create_app", "run_server"]
