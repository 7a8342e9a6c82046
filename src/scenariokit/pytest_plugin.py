"""The pytest plugin: scenario YAML files as tests, and the ``scenariokit`` fixture.

Installed with scenariokit (entry point ``pytest11``). Every ``*.scenario.yaml`` file pytest meets is
collected: one test per scenario, run in a fresh browser against the environment chosen with
``--scenariokit-env NAME|FILE``. A failure reports the step, its code line, the message and the
screenshot, without a traceback of the plugin.

Each pytest process (each pytest-xdist worker too) has its own private store and one browser pool,
started on first use, kept across tests, and closed at the end of the session. The pool runs on an
event loop of its own thread, so the fixture serves synchronous and asynchronous tests alike.

Every pytest session loads this module (entry point ``pytest11``), so it imports only pytest at the
top: the runner, the store and the settings are imported when a scenario file is collected or the
fixture is used, and a pytest session without scenarios pays nothing for them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from scenariokit.kit import Kit
    from scenariokit.local.background import BackgroundLoop
    from scenariokit.local.outcomes import FileResult, ScenarioOutcome
    from scenariokit.local.runner import LocalRunner
    from scenariokit.local.scenario_files import EnvChoice, ScenarioEntry, ScenarioFile
    from scenariokit.settings import TraceMode

T = TypeVar("T")
MARKER = "scenariokit"
#: what :func:`scenariokit.local.scenario_files.is_scenario_file` accepts, checked here without importing it
_SCENARIO_FILE_SUFFIXES = (".scenario.yaml", ".scenario.yml")


# --- one runner per pytest process ------------------------------------------------------------


class SessionRunner:
    """The process's :class:`LocalRunner`, on a background event loop, started on first use."""

    def __init__(
        self,
        *,
        workers: int = 1,
        artifacts_dir: Path | None = None,
        trace: TraceMode = "off",
    ) -> None:
        self.workers = workers
        self.artifacts_dir = artifacts_dir
        self.trace = trace
        self._loop: BackgroundLoop | None = None
        self._runner: LocalRunner | None = None
        self._stack = contextlib.AsyncExitStack()

    async def _open(self) -> LocalRunner:
        from scenariokit.local.runner import open_local_runner

        runner = await self._stack.enter_async_context(
            open_local_runner(
                workers=self.workers,
                artifacts_dir=self.artifacts_dir,
                trace=self.trace,
            )
        )
        await runner.kit.start_runner()
        return runner

    def _started(self) -> tuple[BackgroundLoop, LocalRunner]:
        if self._loop is None:
            from scenariokit.local.background import BackgroundLoop

            self._loop = BackgroundLoop()
        if self._runner is None:
            self._runner = self._loop.call(self._open())
        return self._loop, self._runner

    def call(self, fn: Callable[[LocalRunner], Awaitable[T]]) -> T:
        """``await fn(runner)`` on the runner's loop, blocking until it is done."""
        loop, runner = self._started()
        return loop.call(_awaited(fn(runner)))

    async def acall(self, fn: Callable[[LocalRunner], Awaitable[T]]) -> T:
        """``await fn(runner)`` on the runner's loop, from the caller's own event loop."""
        loop, runner = self._started()
        return await loop.acall(_awaited(fn(runner)))

    def close(self) -> None:
        """Stop the workers and their browsers, and the loop (safe to call more than once)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            if self._runner is not None:
                loop.call(self._stack.aclose())
        finally:
            self._runner = None
            loop.stop()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


SESSION_RUNNER = pytest.StashKey[SessionRunner]()


def session_runner(config: pytest.Config) -> SessionRunner:
    """The runner of this pytest process, prepared (not started) on first use from the settings."""
    runner = config.stash.get(SESSION_RUNNER, None)
    if runner is None:
        runner = config.stash[SESSION_RUNNER] = _prepare_runner(config)
    return runner


def _prepare_runner(config: pytest.Config) -> SessionRunner:
    """A runner as the options and ``SCENARIOKIT_*`` settings say; bad values are a usage error."""
    from scenariokit.settings import LOCAL_RUN_SETTINGS, Settings, SettingsError, environment_variable

    try:
        settings = Settings.from_env(only=LOCAL_RUN_SETTINGS)
    except SettingsError as exc:
        raise pytest.UsageError(f"scenariokit: {exc}") from None
    given = {name for name in LOCAL_RUN_SETTINGS if os.environ.get(environment_variable(name), "").strip()}
    # One browser per pytest process unless asked: pytest-xdist multiplies processes already.
    workers = config.getoption("scenariokit_workers") or (settings.workers if "workers" in given else 1)
    artifacts = config.getoption("scenariokit_artifacts")
    if artifacts is None and "artifacts_dir" in given:
        artifacts = settings.artifacts_dir
    return SessionRunner(
        workers=workers, artifacts_dir=Path(artifacts) if artifacts else None, trace=settings.trace
    )


# --- options and lifecycle --------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--scenariokit-*`` options."""
    group = parser.getgroup("scenariokit", "scenariokit: scenario YAML files as tests")
    group.addoption(
        "--scenariokit-env",
        metavar="NAME|FILE",
        help="environment for *.scenario.yaml tests: a name from the file's '# environments' section, "
        "or a YAML file holding one environment (default: each scenario's own)",
    )
    group.addoption(
        "--scenariokit-workers",
        type=int,
        metavar="N",
        help="browsers per pytest process (default $SCENARIOKIT_WORKERS or 1)",
    )
    group.addoption(
        "--scenariokit-html",
        metavar="DIR",
        help="write an HTML report of the scenarios run to DIR (index.html and a page per scenario; "
        "under pytest-xdist each worker writes index-<worker>.html)",
    )
    group.addoption(
        "--scenariokit-artifacts",
        metavar="DIR",
        help="where screenshots and traces go, a folder per run (default $SCENARIOKIT_ARTIFACTS_DIR "
        "or a new temporary folder)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``scenariokit`` marker; the runner is prepared when a scenario first needs it."""
    config.addinivalue_line("markers", f"{MARKER}: a scenario collected from a *.scenario.yaml file")
    workers = config.getoption("scenariokit_workers")
    if workers is not None and workers < 1:
        raise pytest.UsageError("--scenariokit-workers must be at least 1")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Close the browsers at the end of the session, before pytest reports; write the HTML report."""
    runner = session.config.stash.get(SESSION_RUNNER, None)
    if runner is not None:
        runner.close()
    _write_html_report(session.config)


#: The outcomes of the scenarios this process ran, in order, for ``--scenariokit-html``.
OUTCOMES = pytest.StashKey["list[ScenarioOutcome]"]()


def _record(config: pytest.Config, outcome: ScenarioOutcome) -> None:
    if config.getoption("scenariokit_html", None):
        config.stash.setdefault(OUTCOMES, []).append(outcome)


def _write_html_report(config: pytest.Config) -> None:
    """``--scenariokit-html DIR``: the report of the scenarios this process ran (none: nothing written)."""
    folder = config.getoption("scenariokit_html", None)
    outcomes = config.stash.get(OUTCOMES, [])
    if not folder or not outcomes:
        return
    from scenariokit.local.html_report import INDEX_FILE, write_html_report

    worker = getattr(config, "workerinput", {}).get("workerid")
    index = f"index-{worker}.html" if worker else INDEX_FILE
    path = write_html_report(
        config.invocation_params.dir / folder, outcomes, title="scenariokit (pytest)", index_name=index
    )
    config.stash[HTML_INDEX] = path


#: The index page ``--scenariokit-html`` wrote, for the terminal summary.
HTML_INDEX = pytest.StashKey[Path]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say where the HTML report is, last, where a person looks."""
    index = config.stash.get(HTML_INDEX, None)
    if index is not None:
        terminalreporter.write_line(f"scenariokit HTML report: {index}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the browsers if the session ended before ``pytest_sessionfinish``."""
    runner = config.stash.get(SESSION_RUNNER, None)
    if runner is not None:
        runner.close()


#: the user property a scenario that passed only after a failed attempt carries
FLAKY_PROPERTY = "scenariokit_flaky"


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """A scenario that passed only after a failed attempt is reported ``flaky`` (Playwright's word)."""
    if report.when == "call" and report.passed and (FLAKY_PROPERTY, True) in report.user_properties:
        return "flaky", "K", ("FLAKY", {"yellow": True})
    return None


# --- collecting scenario files ----------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect ``*.scenario.yaml`` (and ``*.scenario.yml``) files."""
    if file_path.name.endswith(_SCENARIO_FILE_SUFFIXES):
        return ScenarioYamlFile.from_parent(parent, path=file_path)
    return None


class ScenarioYamlFile(pytest.File):
    """A scenario YAML file: one test per scenario."""

    def collect(self) -> Iterator[pytest.Item]:
        from scenariokit.local.scenario_files import ScenarioFileError, read_scenario_file

        try:  # bad SCENARIOKIT_* settings stop the session here, not mid-run
            session_runner(self.config)
        except pytest.UsageError as exc:  # a line naming the variable, as a broken file gets, no traceback
            raise self.CollectError(str(exc)) from None
        try:
            source = read_scenario_file(self.path)
        except ScenarioFileError as exc:
            raise self.CollectError(str(exc)) from None
        seen: set[str] = set()
        for entry in source.scenarios:
            name = entry.name if entry.name not in seen else f"{entry.name} (line {entry.line})"
            seen.add(entry.name)
            yield ScenarioItem.from_parent(self, name=name, source=source, entry=entry)


class ScenarioFailed(Exception):
    """A collected scenario's run did not pass."""

    def __init__(self, outcome: ScenarioOutcome) -> None:
        super().__init__(outcome.summary)
        self.outcome = outcome


class ScenarioItem(pytest.Item):
    """One scenario of a file, run in a fresh browser."""

    def __init__(self, *, source: ScenarioFile, entry: ScenarioEntry, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.entry = entry
        self.add_marker(MARKER)

    def setup(self) -> None:
        """Import the file (once per process) and resolve the environment; a problem is an ERROR."""
        runner = session_runner(self.config)
        choice = self.config.getoption("scenariokit_env")
        if choice and Path(choice).suffix in (".yaml", ".yml"):
            choice = self.config.invocation_params.dir / choice  # xdist workers may start elsewhere
        from scenariokit.local.scenario_files import ScenarioFileError

        try:
            self._environment_id = runner.call(self._resolve(choice))
            return
        except ScenarioFileError as exc:
            problem = str(exc)
        pytest.fail(problem, pytrace=False)  # outside the except: the report shows the problem once

    def _resolve(self, choice: EnvChoice) -> Callable[[LocalRunner], Awaitable[Any]]:
        async def resolve(runner: LocalRunner) -> Any:
            loaded = await runner.load(self.source)
            return await runner.environment_for(loaded, self.entry, choice)

        return resolve

    def runtest(self) -> None:
        """Run the scenario; a failed run raises :class:`ScenarioFailed`."""

        async def run(runner: LocalRunner) -> ScenarioOutcome:
            loaded = await runner.load(self.source)
            return await runner.run(loaded, self.entry, environment_id=self._environment_id)

        outcome = session_runner(self.config).call(run)
        _record(self.config, outcome)
        self.user_properties.append(("run_id", str(outcome.run.id)))
        if outcome.screenshot is not None:
            self.user_properties.append(("screenshot", str(outcome.screenshot)))
        if outcome.trace is not None:
            self.user_properties.append(("trace", str(outcome.trace)))
        if outcome.flaky:
            self.user_properties.append((FLAKY_PROPERTY, True))
        if outcome.log:
            self.add_report_section("call", "scenariokit log", "\n".join(outcome.log))
        if not outcome.passed:
            raise ScenarioFailed(outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The failure report of the run, with no traceback of the plugin."""
        from scenariokit.local.scenario_files import ScenarioFileError

        if isinstance(excinfo.value, ScenarioFailed):
            return excinfo.value.outcome.describe()
        if isinstance(excinfo.value, ScenarioFileError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the scenario is: its file and line."""
        return self.path, self.entry.line - 1, f"scenario: {self.name}"


# --- the fixture ------------------------------------------------------------------------------


class ScenarioKitFixture:
    """Runs scenario files from ordinary tests, on the session's browser pool.

    ``run_yaml`` blocks (for synchronous tests); ``arun_yaml`` is its coroutine (for ``async`` tests,
    where blocking would stall a site the test itself serves). ``env`` is an environment name, a YAML
    file with one environment, or a mapping of environment data such as ``{"url": site_url}``.
    """

    def __init__(
        self,
        runner: SessionRunner,
        *,
        base: Path,
        default_env: EnvChoice = None,
        record: Callable[[ScenarioOutcome], None] | None = None,
    ) -> None:
        self._runner = runner
        self._base = base
        self._default_env = default_env
        #: keeps each outcome for ``--scenariokit-html``
        self._record = record or (lambda outcome: None)

    def _path(self, path: str | os.PathLike[str]) -> Path:
        """A relative path is looked up beside the test module first, then from the current folder."""
        given = Path(path)
        beside = self._base / given
        return beside if not given.is_absolute() and beside.exists() else given

    def _env(self, env: EnvChoice) -> EnvChoice:
        env = self._default_env if env is None else env
        if isinstance(env, os.PathLike) or (isinstance(env, str) and Path(env).suffix in (".yaml", ".yml")):
            return self._path(env)
        return env

    def _run(self, path: str | os.PathLike[str], env: EnvChoice, scenario: str | None) -> Callable[..., Any]:
        target, choice = self._path(path), self._env(env)
        return lambda runner: runner.run_file(target, env=choice, scenario=scenario)

    def run_yaml(
        self, path: str | os.PathLike[str], *, env: EnvChoice = None, scenario: str | None = None
    ) -> FileResult:
        """Run every scenario of a file (or the one named ``scenario``) and return their outcomes."""
        result: FileResult = self._runner.call(self._run(path, env, scenario))
        for outcome in result:
            self._record(outcome)
        return result

    async def arun_yaml(
        self, path: str | os.PathLike[str], *, env: EnvChoice = None, scenario: str | None = None
    ) -> FileResult:
        """:meth:`run_yaml` as a coroutine, for ``async`` tests."""
        result: FileResult = await self._runner.acall(self._run(path, env, scenario))
        for outcome in result:
            self._record(outcome)
        return result

    def call(self, fn: Callable[[Kit], Awaitable[T]]) -> T:
        """``await fn(kit)`` with the session's :class:`~scenariokit.Kit` (on its own loop), blocking."""
        return self._runner.call(lambda runner: fn(runner.kit))

    async def acall(self, fn: Callable[[Kit], Awaitable[T]]) -> T:
        """:meth:`call` as a coroutine, for ``async`` tests."""
        return await self._runner.acall(lambda runner: fn(runner.kit))


@pytest.fixture
def scenariokit(request: pytest.FixtureRequest) -> ScenarioKitFixture:
    """Run scenario YAML files from a test: ``scenariokit.run_yaml(path, env=...)``."""
    return ScenarioKitFixture(
        session_runner(request.config),
        base=Path(request.path).parent,
        default_env=request.config.getoption("scenariokit_env"),
        record=lambda outcome: _record(request.config, outcome),
    )
