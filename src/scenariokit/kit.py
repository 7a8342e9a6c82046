"""The embedding API: open a store, manage scenarios, run them in real Chromium, read the results.

import asyncio
import scenariokit

async def main() -> None:
    async with scenariokit.open_kit("sqlite:///checks.db") as kit:
        env = await kit.environments.create({"name": "local", "data": {"url": "http://127.0.0.1:8000"}})
        scenario = await kit.scenarios.create({"name": "home", "steps": [
            {"execCode": "await page.goto(helpers.getEnvUrl())"},
        ]})
        result = await kit.run(scenario.id, environment_id=env.id)
        print(result.run.status, [line.message for line in result.logs.items])

asyncio.run(main())
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal

import cattrs
import pluggy

from scenariokit.domain.errors import ScenarioKitError
from scenariokit.formats.convert import structure_input
from scenariokit.formats.inputs import (
    AuthoringExecInput,
    AuthoringSaveInput,
    AuthoringStartInput,
    CredentialInput,
    EnvironmentInput,
    LinkInput,
    Patch,
    RunBatchInput,
    RunInput,
    ScenarioInput,
    ScheduleInput,
    SnippetInput,
    StepInput,
    StepOrderInput,
)
from scenariokit.formats.presenters import RunDetail
from scenariokit.formats.queries import LogQuery
from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import RunSettings, Services
from scenariokit.settings import default_artifacts_dir
from scenariokit.storage.opening import open_store

#: Runs of the embedding API wait at most this long unless told otherwise.
DEFAULT_RUN_TIMEOUT = 3600.0


def _catalog(command: type, what: str) -> dict[str, tuple[Any, str]]:
    patch: Any = Patch[command]  # type: ignore[valid-type]
    return {"create": (command, what), "replace": (command, what), "update": (patch, what)}


#: Per service, the commands a :class:`Kit` also takes as a mapping of their REST JSON, and the input
#: class (with the label its errors use) the mapping is structured into. The command is the last
#: positional argument.
JSON_COMMANDS: dict[str, dict[str, tuple[Any, str]]] = {
    "scenarios": {
        **_catalog(ScenarioInput, "scenario"),
        "add_step": (StepInput, "step"),
        "replace_step": (StepInput, "step"),
        "update_step": (Patch[StepInput], "step"),
        "reorder_steps": (StepOrderInput, "step order"),
        "link_credential": (LinkInput, "credential link"),
    },
    "environments": _catalog(EnvironmentInput, "environment"),
    "credentials": _catalog(CredentialInput, "credential"),
    "snippets": _catalog(SnippetInput, "snippet"),
    "runs": {"create": (RunInput, "run"), "create_batch": (RunBatchInput, "run")},
    "schedules": _catalog(ScheduleInput, "schedule"),
    "authoring": {
        "start": (AuthoringStartInput, "authoring session"),
        "exec": (AuthoringExecInput, "exec"),
        "save": (AuthoringSaveInput, "save"),
    },
}


class JsonDoor:
    """A service as the library offers it: a command may also be the mapping of its REST JSON.

    The services take typed commands (:mod:`scenariokit.formats.inputs`); a mapping given here is
    structured once, by the services' converter, exactly as a REST body is (a bad field is a
    ``ValidationError`` naming its JSON path). Typed commands and every other method pass straight
    through.
    """

    def __init__(
        self, service: Any, converter: cattrs.Converter, commands: Mapping[str, tuple[Any, str]]
    ) -> None:
        self._service = service
        self._converter = converter
        self._commands = commands

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._service, name)
        if name not in self._commands:
            return method
        kind, what = self._commands[name]

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[-1], Mapping):
                command = structure_input(self._converter, args[-1], kind, what=what)
                args = (*args[:-1], command)
            return await method(*args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"JsonDoor({self._service!r})"


class Kit:
    """A store and its services, with a local scheduler started on the first :meth:`run`.

    The resource services are attributes: ``kit.scenarios``, ``kit.revisions`` (docs/revisions.md),
    ``kit.environments``, ``kit.credentials``, ``kit.snippets``, ``kit.sessions``, ``kit.runs``,
    ``kit.transfer`` (YAML) and ``kit.authoring``. Their writes of a scenario make revisions of
    source ``library``; an ``origin=Origin(message=...)`` keyword keeps a message with one.
    Their commands take the input classes of :mod:`scenariokit.formats.inputs` or, for convenience,
    the REST JSON mapping of one (see :class:`JsonDoor`); ``kit.services`` is the typed service layer.
    """

    def __init__(self, services: Services, *, workers: int = 1) -> None:
        self.services = services
        self.workers = workers
        door = functools.partial(JsonDoor, converter=services.converter)
        self.scenarios: JsonDoor = door(services.scenarios, commands=JSON_COMMANDS["scenarios"])
        self.environments: JsonDoor = door(services.environments, commands=JSON_COMMANDS["environments"])
        self.credentials: JsonDoor = door(services.credentials, commands=JSON_COMMANDS["credentials"])
        self.snippets: JsonDoor = door(services.snippets, commands=JSON_COMMANDS["snippets"])
        self.sessions = services.sessions
        self.revisions = services.revisions
        self.runs: JsonDoor = door(services.runs, commands=JSON_COMMANDS["runs"])
        self.schedules: JsonDoor = door(services.schedules, commands=JSON_COMMANDS["schedules"])
        self.transfer = services.transfer
        #: live authoring sessions (docs/authoring.md); held once :meth:`start_runner` has run
        self.authoring: JsonDoor = door(services.authoring, commands=JSON_COMMANDS["authoring"])
        self._scheduler: Scheduler | None = None

    async def start_runner(self) -> Scheduler:
        """Start the local scheduler and its worker processes (done by the first :meth:`run`)."""
        if self._scheduler is None:
            scheduler = Scheduler(self.services, workers=self.workers, poll_seconds=0.2)
            await scheduler.start()
            self._scheduler = scheduler
        return self._scheduler

    async def run(
        self,
        scenario_id: uuid.UUID,
        *,
        environment_id: uuid.UUID,
        save_session: bool = False,
        session_id: uuid.UUID | None = None,
        timeout: float = DEFAULT_RUN_TIMEOUT,
        log_limit: int = 1000,
    ) -> RunDetail:
        """Run a scenario in a fresh browser and return the finished run with its log."""
        await self.start_runner()
        command = RunInput(
            scenario_id=scenario_id,
            environment_id=environment_id,
            save_session=save_session,
            session_id=session_id,
        )
        run = await self.services.runs.create(command)
        return await self.services.runs.wait(run.id, timeout, logs=LogQuery(limit=log_limit))

    async def logs(
        self, run_id: uuid.UUID, q: str | None = None, *, page: int = 1, limit: int = 100
    ) -> RunDetail:
        """A run with one page of its log, filtered by a case-insensitive substring."""
        return await self.runs.get(run_id, LogQuery(page=page, limit=limit, q=q))

    async def close(self) -> None:
        """Stop the local scheduler (if started) and close the store."""
        if self._scheduler is not None:
            await self._scheduler.close()
            self._scheduler = None
        await self.services.store.close()


@contextlib.asynccontextmanager
async def open_kit(
    url: str | None = None,
    *,
    secret_key: str | None = None,
    workers: int = 1,
    artifacts_dir: str | os.PathLike[str] | None = None,
    trace: Literal["off", "on-failure", "always"] = "off",
    session_keepalive_seconds: float = 600.0,
    plugins: pluggy.PluginManager | None = None,
) -> AsyncIterator[Kit]:
    """Open the store at ``url`` (default ``$SCENARIOKIT_DATABASE_URL`` or ``./scenariokit.db``), migrated.

    ``workers`` is how many runs may execute at once (one browser each); ``artifacts_dir`` where
    screenshots and traces go (default: ``artifacts/`` beside a SQLite file, else ``./artifacts``);
    ``trace`` when to keep a Playwright trace; ``session_keepalive_seconds`` how long a saved session's
    live browser context is held open.
    """
    if workers < 1:
        raise ScenarioKitError("workers must be at least 1")
    store = await open_store(url, secret_key=secret_key, plugin_manager=plugins)
    folder = Path(artifacts_dir) if artifacts_dir is not None else default_artifacts_dir(store.url)
    settings = RunSettings(
        artifacts_dir=folder, trace=trace, session_keepalive_seconds=session_keepalive_seconds
    )
    services = Services(store, plugins=plugins, settings=settings)
    kit = Kit(services, workers=workers)
    try:
        yield kit
    finally:
        await kit.close()
