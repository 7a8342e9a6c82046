"""A server asked to stop drains: `/health` answers 503 `draining`; `SCENARIOKIT_DRAIN_SECONDS` is checked.

The drain of real runs (a run finishing, a run handed back to another server) is proven with real
processes in tests/integration/test_drain.py.
"""

from __future__ import annotations

import pytest
from api_support import Client
from prometheus_client.parser import text_string_to_metric_families

from scenariokit_server import Settings
from scenariokit_server.app import drain
from scenariokit_server.settings import SettingsError


async def test_health_answers_503_draining_once_the_server_drains(client: Client) -> None:
    assert (await client.get("/health")).status == 200
    await drain(client.app, 0)  # this app runs no scheduler: nothing to wait for
    response = await client.get("/health")
    assert response.status == 503
    body = await response.json()
    assert body["status"] == "draining" and body["database"] == "ok"
    text = await (await client.get("/metrics")).text()
    (draining,) = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "scenariokit_draining"
    ]
    assert draining == 1
    # the API still answers while the server drains
    assert (await client.get("/api/v1/scenarios")).status == 200


def test_the_drain_defaults_to_30_seconds_and_0_hands_runs_back_at_once() -> None:
    assert Settings().drain_seconds == 30.0
    assert Settings.from_env({"SCENARIOKIT_DRAIN_SECONDS": "0"}).drain_seconds == 0.0
    assert Settings.from_env({"SCENARIOKIT_DRAIN_SECONDS": "2.5"}).drain_seconds == 2.5


@pytest.mark.parametrize("raw", ["-1", "soon", "nan", "inf"])
def test_a_drain_that_is_not_a_number_of_seconds_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError, match="SCENARIOKIT_DRAIN_SECONDS") as refused:
        Settings.from_env({"SCENARIOKIT_DRAIN_SECONDS": raw})
    assert "0 or more" in str(refused.value)
    with pytest.raises(SettingsError, match="drain_seconds"):
        Settings(drain_seconds=-1)
