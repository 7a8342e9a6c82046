"""What a create sends to the database: one INSERT per table, its values as parameters, nothing deleted.

A create is a quarter of the dashboard load (docs/deployment.md, "Performance under load"). Its rows
go through INSERT statements built once per table, so SQLAlchemy neither builds nor keys a new
statement per row, and a new scenario's steps and links are inserted without first deleting children
it cannot have. Checked on SQLite and PostgreSQL by the statements the engine sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from scenariokit.storage.sqlalchemy import SqlStore


@contextmanager
def sent(store: SqlStore) -> Iterator[list[tuple[str, Any]]]:
    """The statements (SQL text, parameters) every engine of ``store`` sends while the block runs."""
    seen: list[tuple[str, Any]] = []
    engines = {store.engine, store.read_engine, store.write_engine} - {None}

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        seen.append((" ".join(statement.split()), parameters))

    for engine in engines:
        event.listen(engine.sync_engine, "before_cursor_execute", record)  # type: ignore[union-attr]
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine.sync_engine, "before_cursor_execute", record)  # type: ignore[union-attr]


async def test_creating_a_scenario_inserts_each_table_once_and_deletes_nothing(
    services: Any, store: SqlStore
) -> None:
    credential = await services.credentials.create({"name": "login", "secret": "s3cret"})
    body = {
        "name": "two steps",
        "steps": [{"execCode": "a = 1"}, {"execCode": "b = 2"}],
        "credentials": [{"credentialId": str(credential.id), "alias": "login"}],
    }
    with sent(store) as statements:
        created = await services.scenarios.create(body)
    writes = [sql.split(" (")[0] for sql, _ in statements if sql.startswith(("INSERT", "UPDATE", "DELETE"))]
    assert writes == [
        "INSERT INTO scenarios",
        "INSERT INTO steps",
        "INSERT INTO scenario_credentials",
        "INSERT INTO revision_fields",  # revision 1: its fields, its step bodies, its row
        "INSERT INTO revision_steps",
        "INSERT INTO scenario_revisions",
        "INSERT INTO audit_log",
    ]
    read = await services.scenarios.get(created.id)
    assert [step.exec_code for step in read.steps] == ["a = 1", "b = 2"]
    assert [link.alias for link in read.credentials] == ["login"]
