"""Opening a store by URL, through the ``scenariokit_storage_backend`` hook."""

from __future__ import annotations

import os
from pathlib import Path

import pluggy

from scenariokit.adapters.sqlalchemy.store import sqlite_path
from scenariokit.domain.errors import ScenarioKitError
from scenariokit.ports import Store
from scenariokit.secrets import load_or_create_key

DEFAULT_DATABASE_URL = "sqlite:///scenariokit.db"


def resolve_secret_key(url: str, secret_key: str | None = None) -> str:
    """The server key: given, else ``SCENARIOKIT_SECRET_KEY``, else a key file beside the database.

    A PostgreSQL deployment with no key configured keeps ``./scenariokit.key``; every process sharing
    that database must then be given the same key.
    """
    key = secret_key or os.environ.get("SCENARIOKIT_SECRET_KEY")
    if key:
        return key
    path = sqlite_path(url)
    if path is None:
        if url.split(":", 1)[0].startswith("sqlite"):
            from cryptography.fernet import Fernet

            return Fernet.generate_key().decode()  # in-memory database: the key lives as long as it
        return load_or_create_key(Path("scenariokit.key"))
    return load_or_create_key(path.with_suffix(".key"))


async def open_store(
    url: str | None = None,
    *,
    secret_key: str | None = None,
    migrate: bool = True,
    plugin_manager: pluggy.PluginManager | None = None,
) -> Store:
    """Open the store at ``url`` (default: ``SCENARIOKIT_DATABASE_URL`` or ``./scenariokit.db``).

    With ``migrate`` (the default) pending migrations are applied, so a new SQLite file is ready at once.
    """
    from scenariokit.plugins import get_plugin_manager

    url = url or os.environ.get("SCENARIOKIT_DATABASE_URL") or DEFAULT_DATABASE_URL
    manager = plugin_manager or get_plugin_manager()
    store = manager.hook.scenariokit_storage_backend(url=url, secret_key=resolve_secret_key(url, secret_key))
    if store is None:
        raise ScenarioKitError(f"no storage backend serves {url.split(':', 1)[0]!r} URLs")
    if migrate:
        upgrade = getattr(store, "upgrade", None)
        if upgrade is not None:
            await upgrade()
    return store
