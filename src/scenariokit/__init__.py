"""scenariokit: store browser-automation test scenarios and run them in real Chromium.

The embedding API::

    async with scenariokit.open_kit("sqlite:///checks.db") as kit:
        env = await kit.environments.create({"name": "local", "data": {"url": "http://127.0.0.1:8000"}})
        steps = [{"execCode": "await page.goto(helpers.getEnvUrl())"}]
        scenario = await kit.scenarios.create({"name": "home", "steps": steps})
        result = await kit.run(scenario.id, environment_id=env.id)
        assert result.run.status == scenariokit.RunStatus.PASS

Everything named here is stable API; other modules are implementation.

The names are imported on first use (module ``__getattr__``), so ``import scenariokit`` (and so every
pytest session, which loads the scenariokit plugin) does not pay for Playwright or SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scenariokit.domain.browser import BrowserSettings, Geolocation, HttpCredentials, Viewport
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
    from scenariokit.formats.presenters import RunDetail
    from scenariokit.formats.queries import (
        CredentialQuery,
        EnvironmentQuery,
        LogQuery,
        Page,
        RunQuery,
        ScenarioQuery,
        SessionQuery,
        SnippetQuery,
    )
    from scenariokit.kit import Kit, open_kit
    from scenariokit.plugins import get_plugin_manager, hookimpl
    from scenariokit.services import RunSettings, Services
    from scenariokit.storage.opening import open_store

#: where each public name lives
_PUBLIC: dict[str, tuple[str, ...]] = {
    "scenariokit.domain.browser": ("BrowserSettings", "Geolocation", "HttpCredentials", "Viewport"),
    "scenariokit.domain.errors": (
        "BrowserUnavailable",
        "Conflict",
        "InvalidQuery",
        "NotFound",
        "ScenarioKitError",
        "TooLarge",
        "ValidationError",
    ),
    "scenariokit.domain.model": (
        "Credential",
        "CredentialLink",
        "Environment",
        "Run",
        "RunError",
        "RunErrorKind",
        "RunLogEntry",
        "RunStatus",
        "Scenario",
        "Session",
        "SessionStatus",
        "Snippet",
        "Step",
        "StepResult",
        "StepStatus",
        "mask_token",
    ),
    "scenariokit.kit": ("Kit", "open_kit"),
    "scenariokit.plugins": (
        "get_plugin_manager",
        "hookimpl",
    ),
    "scenariokit.formats.queries": (
        "CredentialQuery",
        "EnvironmentQuery",
        "LogQuery",
        "Page",
        "RunQuery",
        "ScenarioQuery",
        "SessionQuery",
        "SnippetQuery",
    ),
    "scenariokit.services": (
        "RunSettings",
        "Services",
    ),
    "scenariokit.storage.opening": ("open_store",),
    "scenariokit.formats.presenters": ("RunDetail",),
}
_HOME = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it, so later lookups are plain attribute reads."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value: Any = version("scenariokit")
        except PackageNotFoundError:  # running from a source tree that was never installed
            value = "0.0.0"
    elif name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    else:
        raise AttributeError(f"module 'scenariokit' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BrowserSettings",
    "BrowserUnavailable",
    "Conflict",
    "Credential",
    "CredentialLink",
    "CredentialQuery",
    "Environment",
    "EnvironmentQuery",
    "Geolocation",
    "HttpCredentials",
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
    "Viewport",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "mask_token",
    "open_kit",
    "open_store",
]
