"""``/metrics``: Prometheus text format from the app's own registry, read with prometheus_client's parser.

The store's gauges (queue, last outcomes, schedule lag) are checked on SQLite and PostgreSQL; the
request histogram is labelled by route template only; promtool accepts the output.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid
from typing import Any

import pytest
from api_support import API, Client, ClientFactory, both_backends, created
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from scenariokit_server.metrics import HTTP_BUCKETS, UNMATCHED_ROUTE, RequestDurations

TOKEN = "metrics-token-0123456789abcdef"
STORE_SERIES = (
    "scenariokit_queue_depth",
    "scenariokit_queue_oldest_seconds",
    "scenariokit_schedule_lag_seconds",
    "scenariokit_scenario_last_status",
    "scenariokit_scenario_last_duration_seconds",
)


async def scrape(client: Client, headers: dict[str, str] | None = None) -> str:
    response = await client.get("/metrics", headers=headers or {})
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return await response.text()


def samples(text: str) -> list[Sample]:
    """Every sample of the exposition, parsed by prometheus_client's own parser."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of the one sample ``name`` with exactly ``labels``, or None when there is none."""
    found = [s.value for s in samples(text) if s.name == name and s.labels == labels]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


async def queued_run(client: Client, name: str = "checkout") -> tuple[dict[str, Any], dict[str, Any]]:
    env = await created(client, f"{API}/environments", {"name": f"env-{uuid.uuid4().hex[:6]}", "data": {}})
    scenario = await created(client, f"{API}/scenarios", {"name": name, "steps": [{"execCode": "pass"}]})
    run = await created(client, f"{API}/run", {"scenarioId": scenario["id"], "environmentId": env["id"]})
    return scenario, run


async def test_every_series_of_the_contract_is_exposed_and_parses(client: Client) -> None:
    text = await scrape(client)
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["scenariokit_runs"].type == "counter"
    assert families["scenariokit_run_duration_seconds"].type == "histogram"
    assert families["scenariokit_http_request_duration_seconds"].type == "histogram"
    for name in (*STORE_SERIES, "scenariokit_workers", "scenariokit_store_up", "scenariokit_draining"):
        assert families[name].type == "gauge", name
    # every outcome is there from the start, at 0, so the first failure shows in increase()
    assert value(text, "scenariokit_runs_total", status="pass", error_kind="none") == 0
    for kind in ("assertion", "error", "timeout", "cancelled", "worker_lost"):
        assert value(text, "scenariokit_runs_total", status="fail", error_kind=kind) == 0
    assert value(text, "scenariokit_store_up") == 1
    assert value(text, "scenariokit_queue_depth") == 0
    assert value(text, "scenariokit_queue_oldest_seconds") == 0
    assert value(text, "scenariokit_schedule_lag_seconds") == 0
    # this app runs no scheduler: its workers are all zero, in every state
    assert {s.labels["state"]: s.value for s in samples(text) if s.name == "scenariokit_workers"} == {
        "idle": 0, "busy": 0, "session": 0,
    }  # fmt: skip


@both_backends
async def test_the_queue_and_each_scenarios_last_outcome_come_from_the_store(client: Client) -> None:
    scenario, run = await queued_run(client, "checkout")
    await queued_run(client, "login")
    await asyncio.sleep(0.05)  # the oldest run has waited some time
    text = await scrape(client)
    assert value(text, "scenariokit_queue_depth") == 2
    oldest = value(text, "scenariokit_queue_oldest_seconds")
    assert oldest is not None and oldest > 0
    assert (
        value(text, "scenariokit_scenario_last_status", scenario="checkout", scenario_id=scenario["id"])
        is None
    )

    # A queued run cancelled finishes at once (nothing executes it): a real finish, through the service.
    response = await client.post(f"{API}/run/{run['id']}/cancel")
    assert response.status == 200, await response.text()
    text = await scrape(client)
    assert value(text, "scenariokit_queue_depth") == 1
    assert (
        value(text, "scenariokit_scenario_last_status", scenario="checkout", scenario_id=scenario["id"]) == 0
    )
    duration = value(
        text, "scenariokit_scenario_last_duration_seconds", scenario="checkout", scenario_id=scenario["id"]
    )
    assert duration is not None and duration >= 0
    assert value(text, "scenariokit_runs_total", status="fail", error_kind="cancelled") == 1
    assert value(text, "scenariokit_run_duration_seconds_count") == 1

    # A rename shows under the new name; the scenario's id keeps the series apart from a namesake.
    await client.patch(f"{API}/scenarios/{scenario['id']}", json={"name": "checkout v2"})
    namesake, _ = await queued_run(client, "checkout v2")
    text = await scrape(client)
    statuses = {
        (s.labels["scenario"], s.labels["scenario_id"]): s.value
        for s in samples(text)
        if s.name == "scenariokit_scenario_last_status"
    }
    assert statuses == {("checkout v2", scenario["id"]): 0}  # the namesake has no finished run yet
    assert namesake["id"] != scenario["id"]


@both_backends
async def test_an_overdue_schedule_fire_shows_as_lag(client: Client) -> None:
    scenario, _ = await queued_run(client)
    env = await created(client, f"{API}/environments", {"name": "lag", "data": {}})
    await created(
        client,
        f"{API}/schedules",
        {"scenarioId": scenario["id"], "environmentIds": [env["id"]], "intervalSeconds": 1},
    )
    await asyncio.sleep(1.5)  # this app runs no schedule clock: the first fire comes due and stays due
    lag = value(await scrape(client), "scenariokit_schedule_lag_seconds")
    assert lag is not None and lag > 0


async def test_requests_are_labelled_by_route_template_never_by_path(client: Client) -> None:
    scenario, run = await queued_run(client)
    missing = uuid.uuid4()
    assert (await client.get(f"{API}/scenarios/{scenario['id']}")).status == 200
    assert (await client.get(f"{API}/scenarios/{missing}")).status == 404
    assert (await client.get(f"{API}/run/{run['id']}")).status == 200
    assert (await client.get(f"{API}/scenarios/not-a-uuid")).status == 400
    assert (await client.get(f"/no/such/{missing}/page")).status == 404
    assert (await client.request("TRACE", f"{API}/scenarios")).status == 405
    text = await scrape(client)
    seen = {
        (s.labels["route"], s.labels["method"], s.labels["status"])
        for s in samples(text)
        if s.name == "scenariokit_http_request_duration_seconds_count"
    }
    assert ("/api/v1/scenarios/{id}", "GET", "200") in seen
    assert ("/api/v1/scenarios/{id}", "GET", "404") in seen
    assert ("/api/v1/scenarios/{id}", "GET", "400") in seen
    assert ("/api/v1/run/{id}", "GET", "200") in seen
    assert ("/api/v1/scenarios", "POST", "201") in seen
    assert (UNMATCHED_ROUTE, "GET", "404") in seen
    assert (UNMATCHED_ROUTE, "OTHER", "405") in seen  # methods beyond the usual share one label
    for ident in (scenario["id"], run["id"], str(missing), "not-a-uuid", "/no/such"):
        assert ident not in text


class Resource:
    """A route's resource, as far as the request histogram reads it."""

    def __init__(self, canonical: str) -> None:
        self.canonical = canonical


def test_the_request_histogram_writes_what_prometheus_clients_histogram_writes() -> None:
    page, health = Resource("/api/v1/scenarios"), Resource("/health")
    requests = [
        (page, "GET", 200, 0.003),
        (page, "GET", 200, 0.005),  # on a bound: counted in its bucket (le means <=)
        (page, "GET", 200, 0.0051),
        (page, "GET", 200, 60.0),
        (page, "GET", 200, 61.0),  # past every bound: +Inf only
        (health, "POST", 201, 0.0),
        (None, "GET", 404, 0.01),
    ]
    theirs = CollectorRegistry(auto_describe=False)
    histogram = Histogram(
        RequestDurations.NAME,
        RequestDurations.HELP,
        RequestDurations.LABELS,
        buckets=HTTP_BUCKETS,
        registry=theirs,
    )
    ours = CollectorRegistry(auto_describe=False)
    durations = RequestDurations(HTTP_BUCKETS)
    ours.register(durations)
    for resource, method, status, seconds in requests:
        route = resource.canonical if resource is not None else UNMATCHED_ROUTE
        histogram.labels(route, method, str(status)).observe(seconds)
        durations.observe(resource, method, status, seconds)  # type: ignore[arg-type]

    def without_times(registry: CollectorRegistry) -> list[Sample]:
        return [
            s._replace(value=0.0) if s.name.endswith("_created") else s
            for s in samples(generate_latest(registry).decode())
        ]

    assert without_times(ours) == without_times(theirs)
    count = {
        s.labels["route"]: s.value
        for s in samples(generate_latest(ours).decode())
        if s.name.endswith("_count")
    }
    assert count == {"/api/v1/scenarios": 5.0, "/health": 1.0, UNMATCHED_ROUTE: 1.0}


async def test_with_tokens_metrics_need_one(make_client: ClientFactory) -> None:
    client = await make_client(api_tokens=(TOKEN,))
    response = await client.get("/metrics")
    assert response.status == 401
    assert response.content_type == "application/problem+json"
    text = await scrape(client, {"Authorization": f"Bearer {TOKEN}"})
    assert value(text, "scenariokit_store_up") == 1


async def test_each_app_has_its_own_registry(make_client: ClientFactory, client: Client) -> None:
    other = await make_client()
    await queued_run(client)
    await client.get(f"{API}/scenarios")
    first, second = await scrape(client), await scrape(other)
    route = {"route": "/api/v1/scenarios", "method": "GET", "status": "200"}
    assert value(first, "scenariokit_http_request_duration_seconds_count", **route) == 1
    assert value(second, "scenariokit_http_request_duration_seconds_count", **route) is None


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) is absent")
async def test_promtool_accepts_the_exposition(client: Client) -> None:
    _, run = await queued_run(client, 'a "quoted" name\\ with a backslash')
    await client.post(f"{API}/run/{run['id']}/cancel")
    await client.get("/no/such/page")
    text = await scrape(client)
    checked = await asyncio.to_thread(
        subprocess.run, ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    # promtool exits 0 when nothing is wrong; lint remarks (none expected) would be on stderr
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "" and checked.stderr.strip() == "", checked.stdout + checked.stderr


async def test_a_rebound_host_cannot_read_the_metrics(client: Client) -> None:
    """Scenario names are data: a page whose DNS rebinds to this server must not read them (421)."""
    await queued_run(client, "secret project")
    response = await client.get("/metrics", headers={"Host": "attacker.example"})
    assert response.status == 421
    assert "secret project" not in await response.text()
