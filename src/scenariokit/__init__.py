"""scenariokit: store browser-automation test scenarios and run them in real Chromium.

The embedding API::

    async with scenariokit.open_kit("sqlite:///checks.db") as kit:
        env = await kit.environments.create({"name": "local", "data": {"url": "http://127.0.0.1:8000"}})
        steps = [{"execCode": "await page.goto(helpers.getEnvUrl())"}]
        scenario = await kit.scenarios.create({"name": "home", "steps": steps})
        result = await kit.run(scenario.id, environment_id=env.id)
        assert result.run.status == scenariokit.RunStatus.PASS

Everything named here is stable API; other modules are implementation.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from scenariokit.domain.errors import (
    BrowserUnavailable,
    Conflict,
    InvalidQuery,
    NotFound,
    ScenarioKitError,
    TooLarge,
    ValidationError,
)
from scenariokit.domain.model import (
    Credential,
    CredentialLink,
    Environment,
    Run,
    RunError,
    RunErrorKind,
    RunLogEntry,
    RunStatus,
    Scenario,
    Session,
    SessionStatus,
    Snippet,
    Step,
    StepResult,
    StepStatus,
    mask_token,
)
from scenariokit.kit import Kit, open_kit
from scenariokit.plugins import get_plugin_manager, hookimpl
from scenariokit.queries import (
    CredentialQuery,
    EnvironmentQuery,
    LogQuery,
    Page,
    RunQuery,
    ScenarioQuery,
    SessionQuery,
    SnippetQuery,
)
from scenariokit.services import RunSettings, Services
from scenariokit.storage import open_store
from scenariokit.views import RunDetail

try:
    __version__ = version("scenariokit")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "BrowserUnavailable",
    "Conflict",
    "Credential",
    "CredentialLink",
    "CredentialQuery",
    "Environment",
    "EnvironmentQuery",
    "InvalidQuery",
    "Kit",
    "LogQuery",
    "NotFound",
    "Page",
    "Run",
    "RunDetail",
    "RunError",
    "RunErrorKind",
    "RunLogEntry",
    "RunQuery",
    "RunSettings",
    "RunStatus",
    "Scenario",
    "ScenarioKitError",
    "ScenarioQuery",
    "Services",
    "Session",
    "SessionQuery",
    "SessionStatus",
    "Snippet",
    "SnippetQuery",
    "Step",
    "StepResult",
    "StepStatus",
    "TooLarge",
    "ValidationError",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "mask_token",
    "open_kit",
    "open_store",
]
