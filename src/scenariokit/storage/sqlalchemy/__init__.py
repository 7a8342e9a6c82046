"""SQLAlchemy 2 async adapter: SQLite (aiosqlite, the embedded default) and PostgreSQL (asyncpg)."""

from scenariokit.storage.sqlalchemy.store import SqlStore, normalize_url, sqlite_path, unique_schema

__all__ = ["SqlStore", "normalize_url", "sqlite_path", "unique_schema"]
