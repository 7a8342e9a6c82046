"""How a locally run scenario ended, told the way a person fixing it needs it.

A :class:`ScenarioOutcome` is what ``scenariokit run``, the pytest plugin and the ``scenariokit``
fixture report: pass or fail, and for a failure the step (order and title), the line of step code it
failed on, the message (a failed ``expect`` says what it expected) and the screenshot the runner took.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from scenariokit.domain.model import Run, RunStatus, Scenario, StepStatus
from scenariokit.formats.presenters import trace_artifact

#: ``describe_failure`` appends ``(line N)`` (and ``, in snippet 'x' line M``) to a message's first line;
#: a coroutine never awaited starts it with ``line N:``.
_LINE_MARK = re.compile(r"\(line (\d+)(?:, in snippet '[^']*' line \d+)?\)|^line (\d+): ")


@attrs.frozen
class FailedStep:
    """The step a run stopped at, with the line of its code the failure passed through."""

    order: int
    title: str | None = None
    line: int | None = None
    code: str | None = None

    @property
    def label(self) -> str:
        """``step 2 "Log in"`` (or ``step 2`` for an untitled step)."""
        return f'step {self.order} "{self.title}"' if self.title else f"step {self.order}"


@attrs.frozen
class ScenarioOutcome:
    """One scenario run from a file: its run, and where and why it failed."""

    path: Path
    name: str
    run: Run
    #: the run's files (screenshots, traces) live here
    artifacts_dir: Path
    #: the line of the file the scenario starts on, when known
    line: int | None = None
    failed_step: FailedStep | None = None
    screenshot: Path | None = None
    #: the run log, one ``level: message`` line each
    log: tuple[str, ...] = ()
    #: the Playwright trace the run recorded (``--trace``/``SCENARIOKIT_TRACE``), if any
    trace: Path | None = None
    #: the name of the environment the scenario ran against, when known
    environment: str | None = None
    #: the environment as the command line named it, when it named several (a row per pair)
    env_choice: str | None = None

    @property
    def label(self) -> str:
        """The scenario's name, with ``[environment]`` when several environments were run."""
        return f"{self.name} [{self.env_choice}]" if self.env_choice is not None else self.name

    @property
    def passed(self) -> bool:
        """Whether the run passed."""
        return self.run.status is RunStatus.PASS

    @property
    def flaky(self) -> bool:
        """Whether it passed only after a failed attempt (the scenario's ``retries``)."""
        return self.run.flaky

    @property
    def status(self) -> str:
        """``pass`` or ``fail``."""
        return self.run.status.value

    @property
    def kind(self) -> str | None:
        """Why it failed: ``assertion``, ``error``, ``timeout``, ``cancelled``, ``worker_lost``; or None."""
        return self.run.error.kind.value if self.run.error else None

    @property
    def message(self) -> str:
        """The failure message (a Playwright message runs on with its call log), or ``""``."""
        return self.run.error.message if self.run.error else ""

    @property
    def duration_seconds(self) -> float:
        """Seconds from the run's start to its end."""
        return (self.run.duration_ms or 0) / 1000

    @property
    def summary(self) -> str:
        """One line: ``step 2 "Log in": Locator expected to be visible (line 3)``, or ``""`` on a pass."""
        if self.passed:
            return ""
        first = self.message.strip().partition("\n")[0] or (self.kind or "failed")
        return f"{self.failed_step.label}: {first}" if self.failed_step else first

    def describe(self) -> str:
        """The full failure report: step, code line, message, screenshot and run id (``""`` on a pass)."""
        if self.passed:
            return ""
        lines = [f"scenario {self.name!r} failed ({self.kind})"]
        step = self.failed_step
        if step is not None:
            where = f", line {step.line}" if step.line is not None else ""
            lines.append(f"in {step.label}{where}:")
            if step.code:
                lines.append(f"    {step.code}")
        lines.extend(f"  {line}" if line else "" for line in self.message.strip().splitlines())
        if self.screenshot is not None:
            lines.append(f"screenshot: {self.screenshot}")
        if self.trace is not None:
            lines.append(f"trace: {self.trace} (playwright show-trace {self.trace})")
        lines.append(f"run {self.run.id} (files in {self.artifacts_dir})")
        return "\n".join(lines)


def outcome_of(
    path: Path,
    run: Run,
    scenario: Scenario | None,
    *,
    artifacts_dir: Path,
    line: int | None = None,
    log: Sequence[str] = (),
    environment: str | None = None,
) -> ScenarioOutcome:
    """The outcome of a finished run of ``scenario`` (read back from the store)."""
    failed = _failed_step(run, scenario)
    screenshots = [name for name in run.artifacts if name.endswith(".png")]
    preferred = f"step-{failed.order}.png" if failed else None
    shot = preferred if preferred in screenshots else (screenshots[0] if screenshots else None)
    trace = trace_artifact(run)
    return ScenarioOutcome(
        path=path,
        name=scenario.name if scenario is not None else run.scenario_name,
        run=run,
        artifacts_dir=artifacts_dir,
        line=line,
        failed_step=failed,
        screenshot=artifacts_dir / shot if shot else None,
        log=tuple(log),
        trace=artifacts_dir / trace if trace else None,
        environment=environment,
    )


def _failed_step(run: Run, scenario: Scenario | None) -> FailedStep | None:
    if run.error is None:
        return None
    result = next((r for r in run.step_results if r.step_id == run.error.step_id), None)
    if result is None:
        result = next((r for r in run.step_results if r.status is StepStatus.FAIL), None)
    if result is None:
        return None
    step = scenario.step(result.step_id) if scenario is not None else None
    mark = _LINE_MARK.search(run.error.message.partition("\n")[0])
    line = int(mark.group(1) or mark.group(2)) if mark else None
    code = None
    if step is not None and line is not None:
        source = step.exec_code.splitlines()
        code = source[line - 1].strip() if 0 < line <= len(source) else None
    title = result.title if result.title is not None else (step.title if step else None)
    return FailedStep(order=result.order, title=title, line=line, code=code)


@attrs.frozen
class FileResult:
    """The outcomes of the scenarios of one file, in file order."""

    outcomes: tuple[ScenarioOutcome, ...]

    @property
    def passed(self) -> bool:
        """Whether every scenario passed (an empty file passes)."""
        return all(outcome.passed for outcome in self.outcomes)

    @property
    def failures(self) -> tuple[ScenarioOutcome, ...]:
        """The outcomes that did not pass."""
        return tuple(outcome for outcome in self.outcomes if not outcome.passed)

    def __iter__(self) -> Iterator[ScenarioOutcome]:
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def __getitem__(self, name: str) -> ScenarioOutcome:
        """The outcome of the scenario named ``name``; KeyError naming the scenarios there are."""
        for outcome in self.outcomes:
            if outcome.name == name:
                return outcome
        known = ", ".join(repr(o.name) for o in self.outcomes) or "none"
        raise KeyError(f"no scenario named {name!r} (there are: {known})")

    def assert_passed(self) -> None:
        """Raise AssertionError with every failure report when a scenario failed."""
        if not self.passed:
            raise AssertionError("\n\n".join(outcome.describe() for outcome in self.failures))
