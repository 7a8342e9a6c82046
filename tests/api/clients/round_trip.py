"""The round trip of usage.mts, through the Python client openapi-python-client generates.

Run by tests/api/test_generated_clients.py in the generator's own environment (it holds what the
generated package imports: httpx and attrs), with the generated ``scenariokit_client`` on
``sys.path``: ``python round_trip.py BASE_URL``. One function per resource, called in order from
``main``; a new resource (revisions, audit) is one more function here and one more in usage.mts.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from scenariokit_client import Client
from scenariokit_client.api.audit import list_audit
from scenariokit_client.api.credentials import create_credential, list_credentials
from scenariokit_client.api.devices import list_devices
from scenariokit_client.api.environments import create_environment, list_environments, patch_environment
from scenariokit_client.api.runs import cancel_run, create_run, get_run, list_runs, list_scenario_runs
from scenariokit_client.api.scenarios import create_scenario, create_step, list_scenarios, patch_scenario
from scenariokit_client.api.schedules import create_schedule, list_schedules
from scenariokit_client.api.sessions import list_sessions
from scenariokit_client.api.snippets import create_snippet, list_snippets, patch_snippet
from scenariokit_client.models import (
    BrowserSettings,
    Credential,
    CredentialInput,
    Environment,
    EnvironmentInput,
    EnvironmentInputData,
    LinkInput,
    ListEnvironmentsOrderBy,
    ListEnvironmentsOrderDir,
    ListRunsOrderBy,
    ListScenarioRunsOrderBy,
    ListScenarioRunsStatus,
    ListScenariosOrderBy,
    ListSnippetsOrderBy,
    PartialEnvironmentInput,
    PartialScenarioInput,
    PartialSnippetInput,
    Problem,
    RunBatch,
    RunBatchInput,
    RunDetail,
    RunError,
    RunErrorKind,
    RunInput,
    Scenario,
    ScenarioInput,
    ScheduleInput,
    SnippetInput,
    StepInput,
    Viewport,
)

T = TypeVar("T")


def must(answer: T | Problem | None, what: str) -> T:
    """The answer of a call that succeeded: a problem document or no parse fails the round trip."""
    if answer is None or isinstance(answer, Problem):
        raise AssertionError(f"{what}: {answer!r}")
    return answer


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"check failed: {what}")


def environments(client: Client) -> list[Environment]:
    made = [
        must(
            create_environment.sync(
                client=client,
                body=EnvironmentInput(
                    name=name,
                    data=EnvironmentInputData.from_dict({"url": "http://127.0.0.1:9"}),
                    browser=BrowserSettings(device="Pixel 7", viewport=Viewport(width=390, height=844)),
                ),
            ),
            "create environment",
        )
        for name in ("staging", "production")
    ]
    check(made[0].browser.device == "Pixel 7" and made[0].browser.viewport.width == 390, "browser settings")
    changed = must(
        patch_environment.sync(
            made[0].id, client=client, body=PartialEnvironmentInput(description="the one runs use")
        ),
        "patch environment",
    )
    check(changed.description == "the one runs use", "PATCH changed the description")
    page = must(
        list_environments.sync(
            client=client,
            page=1,
            limit=1,
            order_by=ListEnvironmentsOrderBy.NAME,
            order_dir=ListEnvironmentsOrderDir.ASC,
        ),
        "list environments",
    )
    check(page.total == 2 and len(page.items) == 1, "one page of one of two environments")
    check(page.items[0].name == "production", "sorted by name")
    return made


def credentials(client: Client) -> Credential:
    credential = must(
        create_credential.sync(
            client=client, body=CredentialInput(name="admin", username="ada", secret="s3cret")
        ),
        "create credential",
    )
    check(credential.has_secret, "the secret is stored, and not shown")
    page = must(list_credentials.sync(client=client, q="adm"), "list credentials")
    check(any(item.id == credential.id for item in page.items), "found by q")
    return credential


def devices(client: Client) -> None:
    found = must(list_devices.sync(client=client), "list devices")
    check("Pixel 7" in found.items and found.total == len(found.items), "Playwright's device names")


def snippets(client: Client) -> None:
    snippet = must(
        create_snippet.sync(client=client, body=SnippetInput(alias="login", title="Log in", code="return 1")),
        "create snippet",
    )
    changed = must(
        patch_snippet.sync(snippet.id, client=client, body=PartialSnippetInput(title="Log in as admin")),
        "patch snippet",
    )
    check(changed.title == "Log in as admin", "PATCH changed the title")
    page = must(list_snippets.sync(client=client, order_by=ListSnippetsOrderBy.ALIAS), "list snippets")
    check(page.total == 1, "one snippet")


def scenarios(client: Client, environment: Environment, credential: Credential) -> Scenario:
    body = ScenarioInput(
        name="checkout",
        environment_id=environment.id,
        steps=[StepInput(title="open", exec_code="await page.goto(helpers.getEnvUrl())")],
        credentials=[LinkInput(credential_id=credential.id, alias="admin")],
    )
    scenario = must(create_scenario.sync(client=client, body=body), "create scenario")
    step = must(
        create_step.sync(
            scenario.id,
            client=client,
            body=StepInput(title="look", exec_code="log('looked')", timeout_seconds=5),
        ),
        "add step",
    )
    check(step.order == 2, "a new step goes last")
    changed = must(
        patch_scenario.sync(
            scenario.id,
            client=client,
            body=PartialScenarioInput(description="buys one thing", timeout_seconds=60),
        ),
        "patch scenario",
    )
    check(len(changed.steps) == 2 and changed.timeout_seconds == 60, "PATCH kept the steps")
    page = must(
        list_scenarios.sync(client=client, page=1, limit=10, order_by=ListScenariosOrderBy.NAME, q="check"),
        "list scenarios",
    )
    check(page.items[0].id == scenario.id, "found by q")
    return changed


def runs(client: Client, scenario: Scenario, environments: list[Environment]) -> None:
    single = must(
        create_run.sync(
            client=client, body=RunInput(scenario_id=scenario.id, environment_id=environments[0].id)
        ),
        "queue run",
    )
    # the answer is a run or a batch; the generated client parses it into the class it is
    check(isinstance(single, RunDetail), "one environment queues one run")
    assert isinstance(single, RunDetail)
    check(single.batch_id is None and single.environment is not None, "a single run with its environment")
    batch = must(
        create_run.sync(
            client=client,
            body=RunBatchInput(scenario_id=scenario.id, environment_ids=[e.id for e in environments]),
        ),
        "queue batch",
    )
    check(isinstance(batch, RunBatch), "environmentIds queue a batch")
    assert isinstance(batch, RunBatch)
    listed = must(
        list_runs.sync(client=client, batch_id=batch.batch_id, order_by=ListRunsOrderBy.CREATEDAT, limit=50),
        "list the batch",
    )
    check(listed.total == 2, "the batch lists its runs")
    cancelled = must(cancel_run.sync(single.id, client=client), "cancel run")
    error: RunError | None = cancelled.error
    check(error is not None and error.kind is RunErrorKind.CANCELLED, "a cancelled run's error")
    detail = must(get_run.sync(single.id, client=client, q="cancel", page=1, limit=20), "read run")
    check(detail.session is None and detail.logs.limit == 20, "no session was saved; the log's page")
    history = must(
        list_scenario_runs.sync(
            scenario.id,
            client=client,
            order_by=ListScenarioRunsOrderBy.STATUS,
            status=ListScenarioRunsStatus.FAIL,
        ),
        "list the scenario's runs",
    )
    check(len(history.items) == 1, "the one failed run")


def schedules_and_sessions(client: Client, scenario: Scenario, environment: Environment) -> None:
    schedule = must(
        create_schedule.sync(
            client=client,
            body=ScheduleInput(
                scenario_id=scenario.id,
                environment_ids=[environment.id],
                interval_seconds=3600,
                enabled=False,
            ),
        ),
        "create schedule",
    )
    check(schedule.cron is None, "an interval, no cron")
    check(
        must(list_schedules.sync(client=client, scenario_id=scenario.id), "list schedules").total == 1,
        "schedule",
    )
    check(must(list_sessions.sync(client=client, page=1, limit=5), "list sessions").total == 0, "no session")


def audit(client: Client) -> None:
    """Every write is in the audit log: the schedule made above, through REST, with no token name."""
    page = must(list_audit.sync(client=client, resource="schedule", limit=5), "list the audit log")
    check(page.total == 1 and page.items[0].action == "create", "the schedule's creation is audited")
    check(page.items[0].door == "rest" and page.items[0].token_name is None, "through REST, without a token")


def yaml_round_trip(client: Client, scenario: Scenario) -> None:
    """YAML operations are raw bodies: generators skip application/yaml, so the client's httpx calls them."""
    http = client.get_httpx_client()
    exported = http.get(f"/api/v1/scenarios/{scenario.id}/export")
    check(exported.headers["content-type"].startswith("application/yaml"), "export")
    imported = http.post(
        "/api/v1/scenarios/import", content=exported.content, headers={"Content-Type": "application/yaml"}
    )
    report: dict[str, Any] = imported.json()
    check(
        imported.status_code == 200 and report["counts"]["updated"] == 1, "the import overwrote the scenario"
    )


def main(base_url: str) -> None:
    with Client(base_url=base_url, raise_on_unexpected_status=True) as client:
        staging, production = environments(client)
        credential = credentials(client)
        devices(client)
        snippets(client)
        scenario = scenarios(client, staging, credential)
        runs(client, scenario, [staging, production])
        schedules_and_sessions(client, scenario, staging)
        audit(client)
        yaml_round_trip(client, scenario)
    print("round trip passed")


if __name__ == "__main__":
    main(sys.argv[1])
