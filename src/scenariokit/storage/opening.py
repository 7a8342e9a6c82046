"""Opening a store by URL, through the ``scenariokit_storage_backend`` hook."""

from __future__ import annotations

import os

import pluggy

from scenariokit.domain.errors import ScenarioKitError
from scenariokit.storage.ports import Store
from scenariokit.storage.secrets import SecretKeyError, load_or_create_key, new_key
from scenariokit.storage.sqlalchemy.store import sqlite_path

DEFAULT_DATABASE_URL = "sqlite:///scenariokit.db"


def resolve_secret_key(url: str, secret_key: str | None = None) -> str:
    """The server key(s): given, else ``SCENARIOKIT_SECRET_KEY``, else the key file beside a SQLite file.

    The key file is created (mode 0600, its path logged) on first use. An in-memory SQLite database gets
    a key that lives as long as it does. Any other store needs a key: every process sharing it must
    use the same one, which a file made where one process happened to start cannot ensure.
    """
    key = secret_key or os.environ.get("SCENARIOKIT_SECRET_KEY")
    if key and key.strip():
        return key
    path = sqlite_path(url)
    if path is not None:
        return load_or_create_key(path.with_suffix(".key"))
    if url.split(":", 1)[0].startswith("sqlite"):
        return new_key()
    raise SecretKeyError(
        f"a {url.split(':', 1)[0]} store needs SCENARIOKIT_SECRET_KEY: the same key for every process "
        "that shares the database (make one with `scenariokit db new-key`); see docs/deployment.md, "
        '"Keys and rotation"'
    )


async def open_store(
    url: str | None = None,
    *,
    secret_key: str | None = None,
    migrate: bool = True,
    plugin_manager: pluggy.PluginManager | None = None,
) -> Store:
    """Open the store at ``url`` (default: ``SCENARIOKIT_DATABASE_URL`` or ``./scenariokit.db``).

    With ``migrate`` (the default) pending migrations are applied, so a new SQLite file is ready at once,
    and the keys are checked against the store: keys that cannot decrypt it raise
    :class:`~scenariokit.storage.secrets.SecretKeyError` here.
    """
    from scenariokit.plugins import get_plugin_manager

    url = url or os.environ.get("SCENARIOKIT_DATABASE_URL") or DEFAULT_DATABASE_URL
    manager = plugin_manager or get_plugin_manager()
    store = manager.hook.scenariokit_storage_backend(url=url, secret_key=resolve_secret_key(url, secret_key))
    if store is None:
        raise ScenarioKitError(f"no storage backend serves {url.split(':', 1)[0]!r} URLs")
    if not migrate:
        return store  # not even a connection yet: the keys are checked at the first unit of work
    try:
        upgrade = getattr(store, "upgrade", None)
        if upgrade is not None:
            await upgrade()
        check_keys = getattr(store, "check_keys", None)
        if check_keys is not None:
            await check_keys()  # keys that cannot read the store stop it here, not at a later read
    except BaseException:
        await store.close()
        raise
    return store
