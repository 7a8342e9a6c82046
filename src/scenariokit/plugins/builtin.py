"""scenariokit's own defaults, registered as a plugin through the public hooks (``trylast``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scenariokit.plugins import hookimpl

if TYPE_CHECKING:  # every worker loads the plugins: the store's interfaces are not theirs to import
    from scenariokit.storage.ports import Store

SQL_SCHEMES = ("sqlite", "sqlite+aiosqlite", "postgres", "postgresql", "postgresql+asyncpg")
TOKEN_KEYS = ("token", "accessToken", "access_token", "authToken", "jwt", "id_token")


@hookimpl(trylast=True)
def scenariokit_storage_backend(url: str, secret_key: str) -> Store | None:
    """SQLite and PostgreSQL through SQLAlchemy."""
    scheme = url.split(":", 1)[0]
    if scheme not in SQL_SCHEMES:
        return None
    from scenariokit.storage.sqlalchemy import SqlStore

    return SqlStore(url, secret_key=secret_key)


@hookimpl(trylast=True)
def scenariokit_extract_session_token(storage_state: dict[str, Any]) -> str | None:
    """The first of the well-known token keys found in localStorage, then in cookies."""
    for key in TOKEN_KEYS:
        for origin in storage_state.get("origins", []):
            for item in origin.get("localStorage", []):
                if item.get("name") == key and item.get("value"):
                    return str(item["value"])
    for key in TOKEN_KEYS:
        for cookie in storage_state.get("cookies", []):
            if cookie.get("name") == key and cookie.get("value"):
                return str(cookie["value"])
    return None
