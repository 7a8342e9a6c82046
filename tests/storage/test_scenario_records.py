"""A page of scenarios read as records answers exactly the JSON of the page read as domain values.

REST and MCP list scenarios through ``ScenarioService.list_records`` (one statement, no domain values)
and ``presenters.scenario_record_json``; everything else reads ``Scenario`` values and presents them
with the converter. These tests hold the two reads together on SQLite and PostgreSQL: same items in
the same order, key for key and value for value (floats to the last bit, times to the millisecond),
same total, page and limit — also for rows written under older rules and for every order and search.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import attrs
import orjson
import pytest
import sqlalchemy as sa

from scenariokit.domain.model import CredentialLink, Scenario, Step
from scenariokit.formats.presenters import page_json, scenario_json, scenario_record_json
from scenariokit.formats.queries import ScenarioQuery
from scenariokit.formats.records import LinkRecord, ScenarioRecord, StepRecord
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t


async def _both_pages(services: Any, query: ScenarioQuery) -> tuple[bytes, bytes]:
    conv = services.converter
    domain = await services.scenarios.list(query)
    records = await services.scenarios.list_records(query)
    as_domain = orjson.dumps(page_json(domain, lambda item: scenario_json(conv, item)))
    as_records = orjson.dumps(page_json(records, lambda item: scenario_record_json(conv, item)))
    return as_domain, as_records


async def _seed(services: Any) -> None:
    environment = await services.environments.create({"name": "staging", "data": {"url": "http://x"}})
    credential = await services.credentials.create({"name": "login", "username": "u", "secret": "s3cret"})
    await services.scenarios.create(
        {
            "name": 'Ünïcode ✓ "quoted" \\ 50%_off',
            "description": "line one\nline two",
            "environmentId": str(environment.id),
            "timeoutSeconds": 0.1 + 0.2,  # 0.30000000000000004: a double no 15-digit text holds
            "retries": {"count": 2, "backoff": "exponential", "backoffSeconds": 1.5},
            "browser": {
                "device": "iPhone 13",
                "geolocation": {"latitude": 0.1 + 0.2, "longitude": -13},
                "extraHTTPHeaders": {"X-Note": 'say "hi" \\ 50%'},
                "httpCredentials": {"credential": "zeta"},
                "video": "on",
            },
            "credentials": [
                {"credentialId": str(credential.id), "alias": "zeta"},
            ],
            "steps": [
                {"execCode": "await page.goto('/')", "title": "open", "timeoutSeconds": 120},
                {"execCode": "x = 1", "timeoutSeconds": 1e-3},
                {"execCode": "y = 2", "order": 1},
            ],
        }
    )
    for index in range(12):
        await services.scenarios.create(
            {"name": f"plain {index:02d}", "steps": [{"execCode": "pass"}] * (index % 3)}
        )
    await services.scenarios.create({"name": "PLAIN upper", "timeoutSeconds": 3600})


QUERIES = [
    ScenarioQuery(),
    ScenarioQuery(order_by="name", order_dir="asc", limit=20),
    ScenarioQuery(order_by="name", order_dir="desc", limit=5, page=2),
    ScenarioQuery(order_by="createdAt", order_dir="asc", limit=3, page=3),
    ScenarioQuery(order_by="updatedAt", order_dir="desc", limit=200),
    ScenarioQuery(q="plain", order_by="name", limit=4, page=2),
    ScenarioQuery(q="50%_", order_by="name"),  # LIKE's wildcards are searched for as text
    ScenarioQuery(q="nothing like it"),
    ScenarioQuery(limit=7, page=9),  # past the last page: no items, the total still counted
    ScenarioQuery(q="plain", limit=7, page=9),
]


@pytest.mark.parametrize("query", QUERIES, ids=lambda query: repr(query))
async def test_a_page_of_records_is_the_page_of_scenarios_byte_for_byte(
    services: Any, query: ScenarioQuery
) -> None:
    await _seed(services)
    as_domain, as_records = await _both_pages(services, query)
    assert as_records == as_domain
    assert b'"timeoutSeconds":0.30000000000000004' in as_records or query.q or query.page > 1


async def test_an_empty_store_lists_no_records(services: Any) -> None:
    as_domain, as_records = await _both_pages(services, ScenarioQuery())
    assert as_records == as_domain == b'{"items":[],"total":0,"page":1,"limit":20}'


async def test_rows_written_under_older_rules_read_as_records_as_they_read_as_scenarios(
    services: Any, store: SqlStore
) -> None:
    """No retries (NULL and JSON null), a retries document with an unknown key and a missing one."""
    when = datetime(2024, 5, 1, 12, 0, 0, 123999, tzinfo=UTC)
    documents: list[Any] = [
        None,
        sa.null(),
        {"count": 1, "shape": "unknown to this version"},
        {"backoffSeconds": 2, "backoff": "linear"},
    ]
    async with store.engine.begin() as conn:
        for index, retries in enumerate(documents):
            ident = uuid.uuid4()
            await conn.execute(
                sa.insert(t.scenarios).values(
                    id=ident,
                    name=f"old {index}",
                    timeout_seconds=7,
                    created_at=when,
                    updated_at=when,
                    retries=retries,
                )
            )
            await conn.execute(
                sa.insert(t.steps).values(
                    id=uuid.uuid4(), scenario_id=ident, position=0, exec_code="pass", timeout_seconds=5
                )
            )
    as_domain, as_records = await _both_pages(services, ScenarioQuery(order_by="name"))
    assert as_records == as_domain
    assert b'"createdAt":"2024-05-01T12:00:00.123Z"' in as_records  # cut, not rounded
    assert b'"backoffSeconds":2.0' in as_records


async def test_sqlite_times_kept_without_a_fraction_read_as_they_do_as_scenarios(
    services: Any, store: SqlStore
) -> None:
    if store.dialect != "sqlite":
        pytest.skip("SQLite keeps times as text; PostgreSQL as timestamps")
    scenario = await services.scenarios.create({"name": "whole seconds"})
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "UPDATE scenarios SET created_at = '2024-05-01 12:00:00', updated_at = '2024-05-01T13:00:00.5'"
        )
    as_domain, as_records = await _both_pages(services, ScenarioQuery())
    assert as_records == as_domain
    assert str(scenario.id).encode() in as_records
    assert b'"createdAt":"2024-05-01T12:00:00.000Z","updatedAt":"2024-05-01T13:00:00.500Z"' in as_records


@pytest.mark.parametrize(
    ("record", "value"),
    [(ScenarioRecord, Scenario), (StepRecord, Step), (LinkRecord, CredentialLink)],
)
def test_a_record_has_the_fields_of_its_domain_class_in_their_order(record: type, value: type) -> None:
    """A field added to the domain class must be added to its record (and the page statement)."""
    assert record._fields == tuple(field.name for field in attrs.fields(value))
