"""Alembic environment: scenariokit always hands in a live connection (see ``upgrade_connection``)."""

from alembic import context

from scenariokit.storage.sqlalchemy.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through 'scenariokit db upgrade' or SqlStore.upgrade()")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
