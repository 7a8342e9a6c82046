"""JUnit XML reports of scenario outcomes, in the shape CI systems parse.

One ``<testsuite>`` per scenario file, one ``<testcase>`` per scenario. A failed assertion or a step over
its time limit is a ``<failure>``; an exception in step code, a cancelled run or a lost worker is an
``<error>`` (JUnit's "the test could not complete"). The element's text is the full failure report
(step, code line, message, screenshot); ``<system-out>`` holds the run log and, for a failure, the
screenshot as ``[[ATTACHMENT|path]]``, which GitLab and Jenkins show beside the test.
"""

from __future__ import annotations

import os
import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from scenariokit.local.outcomes import ScenarioOutcome

#: Kinds of run error reported as ``<failure>``; every other kind is an ``<error>``.
FAILURE_KINDS = frozenset({"assertion", "timeout"})


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _suite_name(path: Path) -> str:
    name = path.name
    for suffix in (".scenario.yaml", ".scenario.yml", ".yaml", ".yml"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def junit_tree(
    outcomes: Sequence[ScenarioOutcome], *, name: str = "scenariokit", timestamp: datetime | None = None
) -> ET.ElementTree[ET.Element]:
    """The JUnit XML document of ``outcomes`` (grouped into one suite per file, in order)."""
    stamp = (timestamp or datetime.now(UTC)).isoformat(timespec="seconds")
    root = ET.Element("testsuites", name=name)
    suites: dict[Path, list[ScenarioOutcome]] = {}
    for outcome in outcomes:
        suites.setdefault(outcome.path, []).append(outcome)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    for path, members in suites.items():
        suite = ET.SubElement(root, "testsuite", name=_suite_name(path), timestamp=stamp)
        suite.set("hostname", socket.gethostname())
        suite.set("file", os.fspath(path))
        counts = {"tests": len(members), "failures": 0, "errors": 0}
        for outcome in members:
            _testcase(suite, outcome, counts)
        time = sum(o.duration_seconds for o in members)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("skipped", "0")
        suite.set("time", _seconds(time))
        total_time += time
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("skipped", "0")
    root.set("time", _seconds(total_time))
    ET.indent(root)
    return ET.ElementTree(root)


def _testcase(suite: ET.Element, outcome: ScenarioOutcome, counts: dict[str, int]) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=suite.get("name", ""),
        name=outcome.label,
        file=os.fspath(outcome.path),
        time=_seconds(outcome.duration_seconds),
    )
    if outcome.line is not None:
        case.set("line", str(outcome.line))
    properties = ET.SubElement(case, "properties")
    ET.SubElement(properties, "property", name="run_id", value=str(outcome.run.id))
    if outcome.revision is not None:  # the scenario's revision in the store its file came from
        ET.SubElement(properties, "property", name="revision", value=str(outcome.revision))
    if outcome.screenshot is not None:
        ET.SubElement(properties, "property", name="screenshot", value=os.fspath(outcome.screenshot))
    out = list(outcome.log)
    if not outcome.passed:
        tag = "failure" if outcome.kind in FAILURE_KINDS else "error"
        counts["failures" if tag == "failure" else "errors"] += 1
        problem = ET.SubElement(case, tag, message=outcome.summary, type=outcome.kind or "error")
        problem.text = outcome.describe()
        if outcome.screenshot is not None:
            out.append(f"[[ATTACHMENT|{outcome.screenshot}]]")
    if out:
        ET.SubElement(case, "system-out").text = "\n".join(out)


def write_junit_xml(
    path: str | os.PathLike[str],
    outcomes: Sequence[ScenarioOutcome],
    *,
    name: str = "scenariokit",
    timestamp: datetime | None = None,
) -> Path:
    """Write the JUnit XML of ``outcomes`` to ``path`` (its folder is created); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tree = junit_tree(outcomes, name=name, timestamp=timestamp)
    tree.write(target, encoding="utf-8", xml_declaration=True)
    return target
