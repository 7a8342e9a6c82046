"""Storage: the ports the services talk to, the SQLAlchemy adapter, migrations and secrets at rest.

:mod:`~scenariokit.storage.ports` states what a store is; :mod:`~scenariokit.storage.sqlalchemy`
implements it for SQLite and PostgreSQL; :mod:`~scenariokit.storage.opening` picks a store for a URL.
Nothing here is imported by ``import scenariokit``: SQLAlchemy loads when a store is opened.
"""
