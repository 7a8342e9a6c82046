"""Running scenario files locally: the core of ``scenariokit run`` and of the pytest plugin.

:class:`LocalRunner` imports scenario files (see :mod:`scenariokit.local.scenario_files`) into a private
store (a temporary SQLite file: nothing is shared with another process) and runs their scenarios on
a local :class:`~scenariokit.Kit`, each in a fresh browser, reporting a
:class:`~scenariokit.local.outcomes.ScenarioOutcome` per run.

The environment a scenario runs against is chosen per call (:data:`EnvChoice`): the name of an
environment in the file's ``# environments`` section, a YAML file holding one environment, or a mapping
of environment data. Without a choice, a scenario runs against its own ``environmentId``, else against
the file's only environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs
import pluggy

from scenariokit.domain.code import StepCodeWarning
from scenariokit.domain.errors import Conflict, NotFound, ScenarioKitError, TooLarge, ValidationError
from scenariokit.domain.model import Run, RunError, RunErrorKind, RunStatus, utcnow
from scenariokit.formats.inputs import RunInput
from scenariokit.formats.queries import LogQuery
from scenariokit.kit import Kit, open_kit
from scenariokit.local.outcomes import FileResult, ScenarioOutcome, outcome_of
from scenariokit.local.scenario_files import (
    EnvChoice,
    ScenarioEntry,
    ScenarioFile,
    ScenarioFileError,
    environment_file,
    read_environment_file,
    read_scenario_file,
)
from scenariokit.storage.secrets import new_key

#: The private store of local runs: a SQLite file in a temporary folder of its own, one per runner.
STORE_FILE = "scenariokit.db"
#: How many log lines an outcome keeps.
LOG_LINES = 1000
#: How often a run in progress is read back for progress reports.
POLL_SECONDS = 0.1
#: How long past its time limit a started run is waited for before it is given up.
RUN_GRACE_SECONDS = 60.0
#: How long queued runs are waited for while none of them starts or finishes.
QUEUE_STALL_SECONDS = 300.0

#: Called with the run each time it is read back while in progress, and once finished.
ProgressCallback = Callable[[Run], None]


#: How a user chooses an environment, for the messages that ask them to.
_CHOOSE = "(scenariokit run --env NAME|FILE, pytest --scenariokit-env NAME|FILE)"


@attrs.frozen
class LoadedFile:
    """A file imported into the local store, with the stored ids of its scenarios and environments."""

    source: ScenarioFile
    scenario_ids: tuple[uuid.UUID, ...] = ()
    environment_ids: tuple[uuid.UUID, ...] = ()
    #: environments the file's scenarios name but the file does not hold (stored as empty stand-ins)
    absent_environment_ids: frozenset[uuid.UUID] = frozenset()
    #: what the import said of the file's step code (docs/step-code.md, "Common mistakes")
    warnings: tuple[StepCodeWarning, ...] = ()

    def scenario_id(self, entry: ScenarioEntry) -> uuid.UUID:
        """The stored id of one of the file's scenarios."""
        return self.scenario_ids[self.source.scenarios.index(entry)]


def _stored_ids(explicit: Sequence[uuid.UUID | None], created: Sequence[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """Documents without an id were created with new ids, reported in document order."""
    given = {ident for ident in explicit if ident is not None}
    fresh = iter([ident for ident in created if ident not in given])
    return tuple(ident if ident is not None else next(fresh) for ident in explicit)


class LocalRunner:
    """Imports scenario files into a Kit's store and runs their scenarios, reporting outcomes."""

    def __init__(self, kit: Kit, *, artifacts_dir: Path) -> None:
        self.kit = kit
        self.artifacts_dir = artifacts_dir
        self._loaded: dict[str, LoadedFile] = {}
        self._environment_files: dict[str, uuid.UUID] = {}
        self._lock = asyncio.Lock()
        #: when a run of this runner last started or finished (the stall watchdog reads it)
        self._activity = time.monotonic()

    async def load(self, source: ScenarioFile | str | os.PathLike[str]) -> LoadedFile:
        """Import a file into the store, once however often it is asked for."""
        if not isinstance(source, ScenarioFile):
            source = read_scenario_file(source)
        key = source.real_path or str(source.path)
        async with self._lock:
            if key not in self._loaded:
                absent = await self._stand_in_for_absent_environments(source)
                try:
                    report = await self.kit.transfer.import_yaml(source.text, kind=source.kind)
                except (ValidationError, Conflict, TooLarge) as exc:
                    raise ScenarioFileError(f"{source.path}: the import was refused: {exc}") from None
                self._loaded[key] = LoadedFile(
                    source=source,
                    scenario_ids=_stored_ids(
                        [s.id for s in source.scenarios], report.created.get("scenario", ())
                    ),
                    environment_ids=_stored_ids(
                        [e.id for e in source.environments], report.created.get("environment", ())
                    ),
                    absent_environment_ids=absent,
                    warnings=report.warnings,
                )
            return self._loaded[key]

    async def _stand_in_for_absent_environments(self, source: ScenarioFile) -> frozenset[uuid.UUID]:
        """Store an empty environment under each ``environmentId`` the file names but does not hold.

        A scenario exported without ``--include-environment`` still names its environment; the
        stand-in lets the file import, and the run goes against the environment chosen for it.
        """
        held = {e.id for e in source.environments if e.id is not None}
        named = {s.environment_id for s in source.scenarios if s.environment_id is not None}
        absent = set()
        for ident in sorted(named - held):
            try:
                await self.kit.environments.get(ident)
            except NotFound:
                document = f"kind: environment\nid: {ident}\nname: not in {source.path.name}\ndata: {{}}\n"
                await self.kit.transfer.import_yaml(document, kind="environment")
                absent.add(ident)
        return frozenset(absent)

    async def environment_for(
        self, loaded: LoadedFile, entry: ScenarioEntry, env: EnvChoice = None
    ) -> uuid.UUID:
        """The id of the environment ``entry`` runs against (see the module docs for the rules)."""
        path = loaded.source.path
        if env is None:
            if entry.environment_id in loaded.absent_environment_ids:
                raise ScenarioFileError(
                    f"{path}: scenario {entry.name!r} runs against environment {entry.environment_id}, "
                    "which the file does not hold: choose one by name or give an environment file " + _CHOOSE
                )
            if entry.environment_id is not None:
                return entry.environment_id
            if len(loaded.environment_ids) == 1:
                return loaded.environment_ids[0]
            held = len(loaded.environment_ids)
            raise ScenarioFileError(
                f"{path}: scenario {entry.name!r} names no environment and the file holds {held}: "
                "choose one by name or give an environment file " + _CHOOSE
            )
        if isinstance(env, Mapping):
            created = await self.kit.environments.create({"name": "inline", "data": dict(env)})
            return created.id
        env_file: Path | None = await asyncio.to_thread(environment_file, env)
        if env_file is not None:
            return await self._environment_file(env_file)
        name = os.fspath(env)
        for known, ident in zip(loaded.source.environments, loaded.environment_ids, strict=True):
            if known.name == name:
                return ident
        names = ", ".join(repr(e.name) for e in loaded.source.environments) or "none"
        raise ScenarioFileError(
            f"{path}: no environment named {name!r} in its '# environments' section (it has: {names})"
        )

    async def _environment_file(self, path: Path) -> uuid.UUID:
        key = str(path)
        if key not in self._environment_files:
            fields = await asyncio.to_thread(read_environment_file, path)
            try:
                created = await self.kit.environments.create(fields)
            except ValidationError as exc:
                raise ScenarioFileError(f"{path}: {exc}") from None
            self._environment_files[key] = created.id
        return self._environment_files[key]

    async def run(
        self,
        loaded: LoadedFile,
        entry: ScenarioEntry,
        *,
        environment_id: uuid.UUID,
        on_progress: ProgressCallback | None = None,
    ) -> ScenarioOutcome:
        """Run one scenario of a loaded file in a fresh browser, and tell how it went."""
        await self.kit.start_runner()
        scenario_id = loaded.scenario_id(entry)
        scenario = await self.kit.scenarios.get(scenario_id)
        run = await self.kit.services.runs.create(
            RunInput(scenario_id=scenario_id, environment_id=environment_id)
        )
        finished = await self._follow(run, scenario.retries.longest(scenario.run_timeout), on_progress)
        detail = await self.kit.runs.get(run.id, LogQuery(limit=LOG_LINES))
        lines = detail.logs.items if detail.logs else ()
        log = [f"{line.level}: {line.message}" for line in lines if line.level != "debug"]
        return outcome_of(
            loaded.source.path,
            finished,
            scenario,
            artifacts_dir=self.kit.runs.artifacts_dir(run.id),
            line=entry.line,
            log=log,
            environment=detail.environment.name if detail.environment else None,
        )

    async def _follow(self, run: Run, limit: float, on_progress: ProgressCallback | None) -> Run:
        """Read the run back until it finishes, reporting progress; give up on a runner that stalls.

        The runner enforces every time limit itself; this is the backstop for a runner that stopped
        (a run that started and outlived its limit by a minute, or a queue that has not moved for
        five minutes): the run is cancelled and reported as an error rather than waited on forever.
        """
        seen: Run | None = None
        deadline: float | None = None
        while True:
            current = (await self.kit.runs.get(run.id, LogQuery(limit=1))).run
            if current != seen:
                if seen is None or current.started_at != seen.started_at or current.finished:
                    self._activity = time.monotonic()
                if on_progress is not None:
                    on_progress(current)
                seen = current
            if current.finished:
                return current
            now = time.monotonic()
            if current.started_at is not None and deadline is None:
                deadline = now + limit + RUN_GRACE_SECONDS
            if deadline is not None and now > deadline:
                return await self._abandon(current, f"the run outlived its time limit of {limit:g} s")
            if deadline is None and now - self._activity > QUEUE_STALL_SECONDS:
                return await self._abandon(current, f"no run started for {QUEUE_STALL_SECONDS:g} s")
            await asyncio.sleep(POLL_SECONDS)

    async def _abandon(self, run: Run, why: str) -> Run:
        with contextlib.suppress(ScenarioKitError):
            run = await self.kit.runs.cancel(run.id)
        if run.finished:
            return run
        error = RunError(kind=RunErrorKind.ERROR, message=f"the runner stopped answering: {why}")
        return attrs.evolve(run, status=RunStatus.FAIL, error=error, finished_at=utcnow())

    async def run_file(
        self,
        path: str | os.PathLike[str],
        *,
        env: EnvChoice = None,
        scenario: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> FileResult:
        """Run every scenario of a file (or the one named ``scenario``), as many at once as workers allow."""
        loaded = await self.load(path)
        entries = [e for e in loaded.source.scenarios if scenario is None or scenario in (e.name, str(e.id))]
        if scenario is not None and not entries:
            names = ", ".join(repr(e.name) for e in loaded.source.scenarios) or "none"
            raise ScenarioFileError(f"{loaded.source.path}: no scenario {scenario!r} (there are: {names})")
        envs = [await self.environment_for(loaded, entry, env) for entry in entries]
        outcomes = await asyncio.gather(
            *(
                self.run(loaded, entry, environment_id=ident, on_progress=on_progress)
                for entry, ident in zip(entries, envs, strict=True)
            )
        )
        return FileResult(tuple(outcomes))


@contextlib.asynccontextmanager
async def open_local_runner(
    *,
    workers: int = 1,
    artifacts_dir: str | os.PathLike[str] | None = None,
    trace: Literal["off", "on-failure", "always"] = "off",
    plugins: pluggy.PluginManager | None = None,
) -> AsyncIterator[LocalRunner]:
    """A :class:`LocalRunner` on a private store (a temporary SQLite file); browsers close on exit.

    ``artifacts_dir`` is where each run's screenshots and traces go (in a folder named by the run id);
    by default a new temporary folder, which is kept.
    """
    folder = (
        Path(artifacts_dir) if artifacts_dir is not None else Path(tempfile.mkdtemp(prefix="scenariokit-"))
    )
    store = tempfile.mkdtemp(prefix="scenariokit-store-")
    try:
        async with open_kit(
            f"sqlite:///{store}/{STORE_FILE}",
            secret_key=new_key(),  # the store lives as long as this runner: so does its key
            workers=workers,
            artifacts_dir=folder,
            trace=trace,
            plugins=plugins,
        ) as kit:
            yield LocalRunner(kit, artifacts_dir=folder)
    finally:
        shutil.rmtree(store, ignore_errors=True)
