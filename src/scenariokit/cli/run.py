"""``scenariokit run``: run scenario YAML files locally, with no server, and report like a test runner.

The files are imported into a private temporary store (a SQLite file removed afterwards) and every
scenario runs in a fresh browser on a local worker pool. On a terminal the progress is live (a bar per
scenario and one overall); otherwise one plain line per finished scenario. Both end with the failure
reports and a table. Exit status: 0 when every scenario passed, 1 when one failed, 2 for a usage or
input error.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from scenariokit.domain.model import Run, RunStatus
from scenariokit.local.junit import write_junit_xml
from scenariokit.local.outcomes import ScenarioOutcome
from scenariokit.local.runner import LoadedFile, open_local_runner
from scenariokit.local.scenario_files import (
    EnvChoice,
    ScenarioEntry,
    ScenarioFile,
    ScenarioFileError,
    read_scenario_file,
)
from scenariokit.settings import LOCAL_RUN_SETTINGS, TRACE_MODES, Settings, SettingsError

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """\
Run the scenarios of YAML files (as `scenariokit export` writes them) in real Chromium, here and now:
no server, no database to set up (a private temporary store, removed afterwards), each scenario in a
fresh browser.

The environment of a scenario is, in this order: --env NAME (an environment of the file's
'# environments' section), --env FILE (a YAML file holding one environment document), the scenario's
own environmentId, or the file's only environment. A FILE holding only snippet documents (a snippet
export) lends its snippets to the scenarios of the other files.
"""

EXAMPLES = """\
examples:
  scenariokit run checkout.scenario.yaml                        # the file's own environment
  scenariokit run checks/*.scenario.yaml --env staging           # by name, from '# environments'
  scenariokit run checkout.scenario.yaml --env local.env.yaml    # an environment file
  scenariokit run checks/*.scenario.yaml --env staging --env prod # each scenario against both
  scenariokit run checks/*.yaml --workers 4 --junit-xml report.xml --artifacts run-files/
  scenariokit run checks/*.yaml --html report/                   # then open report/index.html
  scenariokit run checkout.scenario.yaml login.snippet.yaml      # with the snippets of a snippet export

exit status: 0 every scenario passed, 1 a scenario failed, 2 usage or input error.
Reads SCENARIOKIT_WORKERS, SCENARIOKIT_ARTIFACTS_DIR and SCENARIOKIT_TRACE; flags win over them.
"""


def _positive(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise argparse.ArgumentTypeError("must be a whole number of at least 1")
    return int(raw)


def add_run_command(commands: Any) -> None:
    """Add ``run`` to the subcommands of the ``scenariokit`` parser."""
    parser = commands.add_parser(
        "run",
        help="run scenario YAML files locally and report (no server needed)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="scenario YAML files (and snippet exports)")
    parser.add_argument(
        "--env",
        action="append",
        metavar="NAME|FILE",
        help="environment name, or a YAML file with one environment; more than once: each scenario "
        "runs against each environment, a row per pair",
    )
    parser.add_argument(
        "--workers", type=_positive, metavar="N", help="scenarios at once, one browser each (default: cores)"
    )
    parser.add_argument("--junit-xml", metavar="PATH", help="also write a JUnit XML report to PATH")
    parser.add_argument(
        "--html",
        metavar="DIR",
        help="also write an HTML report to DIR: index.html and a page per scenario, opening from disk",
    )
    parser.add_argument(
        "--artifacts",
        metavar="DIR",
        help="where screenshots and traces go, a folder per run (default ./artifacts)",
    )
    parser.add_argument("--trace", choices=TRACE_MODES, help="keep a Playwright trace (default off)")
    parser.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace, *, console: Console | None = None) -> int:
    """Run the files named on the command line; returns the exit status."""
    console = console or Console(highlight=False)
    errors = Console(stderr=True, highlight=False)
    try:
        settings = Settings.from_env(
            only=LOCAL_RUN_SETTINGS, workers=args.workers, artifacts_dir=args.artifacts, trace=args.trace
        )
        if args.html and Path(args.html).exists() and not Path(args.html).is_dir():
            raise ScenarioFileError(f"--html {args.html}: not a folder")
        files = [read_scenario_file(path) for path in args.files]
        if not any(source.scenarios for source in files):
            raise ScenarioFileError(f"no scenarios in {', '.join(args.files)}")
        began = time.monotonic()
        outcomes = asyncio.run(_run_files(files, args.env or [None], settings, console))
    except (ScenarioFileError, SettingsError) as exc:
        errors.print(f"scenariokit run: {escape(str(exc))}", soft_wrap=True)
        return EXIT_USAGE
    _report(console, outcomes, time.monotonic() - began)
    if args.junit_xml:
        path = write_junit_xml(args.junit_xml, outcomes)
        console.print(f"JUnit XML: {escape(str(path))}", soft_wrap=True)
    if args.html:
        from scenariokit.local.html_report import write_html_report

        index = write_html_report(args.html, outcomes)
        console.print(f"HTML report: {escape(str(index))}", soft_wrap=True)
    return EXIT_PASSED if all(outcome.passed for outcome in outcomes) else EXIT_FAILED


async def _run_files(
    files: Sequence[ScenarioFile], envs: Sequence[EnvChoice], settings: Settings, console: Console
) -> list[ScenarioOutcome]:
    """Run every scenario of ``files`` against each of ``envs`` (``[None]``: each scenario's own)."""
    count = sum(len(source.scenarios) for source in files) * len(envs)
    async with open_local_runner(
        workers=min(settings.workers, count), artifacts_dir=settings.artifacts_dir, trace=settings.trace
    ) as runner:
        loaded = [await runner.load(source) for source in files]
        _print_warnings(console, loaded)
        plan = [
            (item, entry, await runner.environment_for(item, entry, env), _env_label(env, len(envs)))
            for env in envs
            for item in loaded
            for entry in item.source.scenarios
        ]
        display: Display = LiveDisplay(console, plan) if console.is_terminal else PlainDisplay(console)
        with display:

            async def one(
                index: int, item: LoadedFile, entry: ScenarioEntry, ident: uuid.UUID, label: str | None
            ) -> ScenarioOutcome:
                outcome = await runner.run(
                    item, entry, environment_id=ident, on_progress=lambda run: display.progress(index, run)
                )
                outcome = attrs.evolve(outcome, env_choice=label)
                display.finished(index, outcome)
                return outcome

            return list(await asyncio.gather(*(one(i, *planned) for i, planned in enumerate(plan))))


def _print_warnings(console: Console, loaded: Sequence[LoadedFile]) -> None:
    """What the import said of the files' step code: each mistake, by file, scenario and step."""
    for item in loaded:
        names = dict(zip(item.scenario_ids, (entry.name for entry in item.source.scenarios), strict=True))
        for warning in item.warnings:
            scenario = names.get(warning.scenario_id) if warning.scenario_id is not None else None
            where = f"scenario {scenario!r} " if scenario is not None else ""
            line = f"warning: {item.source.path}: {where}step {warning.order}: {warning.message}"
            console.print(escape(line), soft_wrap=True, highlight=False)


def _env_label(env: EnvChoice, count: int) -> str | None:
    """How a report names an environment of the command line: only when there are several."""
    return None if count < 2 or env is None else str(env)


# --- progress ---------------------------------------------------------------------------------


class Display(Protocol):
    """Where progress goes while scenarios run."""

    def __enter__(self) -> Display: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def progress(self, index: int, run: Run) -> None:
        """The run of scenario ``index`` was read back while in progress."""

    def finished(self, index: int, outcome: ScenarioOutcome) -> None:
        """Scenario ``index`` has finished."""


def _status(run: Run, steps: int) -> tuple[int, str]:
    """Steps done, and a short status: queued, step k/n, pass or fail."""
    done = sum(1 for result in run.step_results if result.status.value != "skipped")
    if run.finished:
        return steps, "[green]pass[/]" if run.status is RunStatus.PASS else "[red]fail[/]"
    if run.started_at is None:
        return done, "[dim]queued[/]"
    return done, f"step {min(done + 1, steps)}/{steps}" if steps else "running"


class LiveDisplay:
    """Live bars on a terminal: one per scenario (its steps) and one overall (scenarios finished)."""

    def __init__(
        self, console: Console, plan: Sequence[tuple[LoadedFile, ScenarioEntry, uuid.UUID, str | None]]
    ) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
        )
        self._overall = self._progress.add_task("[bold]all scenarios[/]", total=len(plan), status="")
        self._tasks: list[TaskID] = []
        self._steps: list[int] = []
        for item, entry, _, env in plan:
            where = f" [{env}]" if env is not None else ""
            label = f"{escape(entry.name + where)} [dim]({escape(item.source.path.name)})[/]"
            steps = max(entry.steps, 1)
            self._tasks.append(self._progress.add_task(label, total=steps, status="[dim]queued[/]"))
            self._steps.append(steps)

    def __enter__(self) -> LiveDisplay:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def progress(self, index: int, run: Run) -> None:
        done, status = _status(run, self._steps[index])
        self._progress.update(self._tasks[index], completed=done, status=status)

    def finished(self, index: int, outcome: ScenarioOutcome) -> None:
        if outcome.passed:
            status = "[yellow]flaky[/]" if outcome.flaky else "[green]pass[/]"
        else:
            status = f"[red]fail[/] {escape(outcome.summary[:60])}"
        self._progress.update(self._tasks[index], completed=self._steps[index], status=status)
        self._progress.advance(self._overall)


class PlainDisplay:
    """One plain line per finished scenario, for logs and CI (standard output is not a terminal)."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def __enter__(self) -> PlainDisplay:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def progress(self, index: int, run: Run) -> None:
        return None

    def finished(self, index: int, outcome: ScenarioOutcome) -> None:
        word = ("FLAKY" if outcome.flaky else "PASS") if outcome.passed else "FAIL"
        tail = f"  {outcome.summary}" if outcome.summary else ""
        revision = f" revision {outcome.revision}" if outcome.revision is not None else ""
        line = f"{word} {outcome.label}{revision} ({outcome.path}) {outcome.duration_seconds:.2f} s{tail}"
        self._console.print(escape(line), soft_wrap=True, highlight=False)


# --- the final report -------------------------------------------------------------------------


def _report(console: Console, outcomes: Sequence[ScenarioOutcome], elapsed: float) -> None:
    failures = [outcome for outcome in outcomes if not outcome.passed]
    for outcome in failures:
        console.rule(f"[red]{escape(outcome.label)}[/]", style="red")
        console.print(escape(outcome.describe()), soft_wrap=True)
    table = Table(title="scenariokit run", title_justify="left")
    # headers stay whole on a narrow terminal: the file and the failing step wrap instead
    table.add_column("result", min_width=6)
    table.add_column("scenario", min_width=8)
    several = any(outcome.env_choice is not None for outcome in outcomes)
    if several:
        table.add_column("environment", min_width=11)
    revisions = any(outcome.revision is not None for outcome in outcomes)
    if revisions:
        table.add_column("revision", justify="right", min_width=8)
    table.add_column("file")
    table.add_column("time", justify="right")
    table.add_column("failing step")
    for outcome in outcomes:
        table.add_row(
            _result_word(outcome),
            escape(outcome.name),
            *([escape(outcome.env_choice or "")] if several else []),
            *([str(outcome.revision or "")] if revisions else []),
            escape(str(outcome.path)),
            f"{outcome.duration_seconds:.2f} s",
            escape(outcome.summary),
        )
    console.print(table)
    passed = len(outcomes) - len(failures)
    flaky = sum(1 for outcome in outcomes if outcome.passed and outcome.flaky)
    colour = "red" if failures else "green"
    counts = f"{passed} passed" + (f" ({flaky} flaky)" if flaky else "") + f", {len(failures)} failed"
    console.print(f"[{colour}]{counts}[/] in {elapsed:.1f} s", highlight=False)


def _result_word(outcome: ScenarioOutcome) -> str:
    """The report's result column: PASS, FLAKY (passed after a failed attempt) or FAIL."""
    if not outcome.passed:
        return "[red]FAIL[/]"
    return "[yellow]FLAKY[/]" if outcome.flaky else "[green]PASS[/]"
