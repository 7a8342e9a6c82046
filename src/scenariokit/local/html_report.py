"""HTML reports of local runs (``scenariokit run --html DIR``, ``pytest --scenariokit-html DIR``).

The same pages the service serves at ``/report/`` (:mod:`scenariokit.reports`), written as files that
open from disk: ``DIR/index.html`` lists the scenarios, ``DIR/runs/<run id>.html`` shows one, and every
link is relative. The run's screenshots and trace are copied into ``DIR/files/<run id>/`` and the
stylesheet and script into ``DIR/assets/``, so the folder can be moved, zipped or published as a CI
artifact as a whole. A trace opens with ``playwright show-trace`` (the trace viewer needs a server; the
page says so, with the path).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

import attrs

from scenariokit.local.outcomes import ScenarioOutcome
from scenariokit.reports import model
from scenariokit.reports.render import asset_files, render_index, render_run

INDEX_FILE = "index.html"
_LEVEL = re.compile(r"^(debug|info|warning|error|critical|log|print|stdout|stderr): ", re.IGNORECASE)


def _log_lines(lines: Sequence[str]) -> list[model.LogLine]:
    """An outcome's ``level: message`` lines as the page lists them."""
    parsed = []
    for line in lines:
        match = _LEVEL.match(line)
        if match:
            parsed.append(model.LogLine(match.group(1).lower(), line[match.end() :]))
        else:
            parsed.append(model.LogLine("info", line))
    return parsed


def _source(outcome: ScenarioOutcome) -> str:
    return f"{outcome.path}:{outcome.line}" if outcome.line is not None else str(outcome.path)


def _copy_files(outcome: ScenarioOutcome, folder: Path) -> set[str]:
    """Copy the run's files into ``folder``; the names copied (a file already gone is left out)."""
    copied = set()
    for name in outcome.run.artifacts:
        source = outcome.artifacts_dir / name
        if source.is_file() and "/" not in name and name not in (".", ".."):
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, folder / name)
            copied.add(name)
    return copied


def write_run_page(outcome: ScenarioOutcome, folder: Path, *, index: str | None = INDEX_FILE) -> Path:
    """Write the page of one outcome (and copy its files) under ``folder``; returns the page's path."""
    run = outcome.run
    page_path = folder / "runs" / f"{run.id}.html"
    files = folder / "files" / str(run.id)
    copied = _copy_files(outcome, files)
    trace = model.trace_artifact(run)
    hint = None
    if trace is not None and trace in copied:
        shown = os.path.relpath(files / trace)
        hint = f"Open the trace with: playwright show-trace {shown}"
    page = model.run_page(
        run,
        environment=outcome.environment or str(run.environment_id),
        log=_log_lines(outcome.log),
        artifact_url=lambda name: f"../files/{run.id}/{quote(name)}",
        trace_hint=hint,
        index_url=f"../{index}" if index else None,
        source=_source(outcome),
    )
    # A file the run lost (the artifacts folder was cleaned) is not linked. The revision shown is the
    # file's (``revision:``, its store's), not the private store's own 1.
    page = attrs.evolve(_without_missing(page, copied), revision=outcome.revision)
    page_path.parent.mkdir(parents=True, exist_ok=True)
    page_path.write_text(render_run(page, assets="../assets"), encoding="utf-8")
    return page_path


def _without_missing(page: model.RunPage, copied: set[str]) -> model.RunPage:
    artifacts = tuple(a for a in page.artifacts if a.name in copied)
    screenshot = page.screenshot if page.screenshot and page.screenshot.name in copied else None
    return attrs.evolve(page, artifacts=artifacts, screenshot=screenshot)


def write_assets(folder: Path) -> None:
    """Copy the pages' stylesheet and script into ``folder/assets``."""
    assets = folder / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    for name, content in asset_files().items():
        (assets / name).write_bytes(content)


def write_html_report(
    folder: str | os.PathLike[str],
    outcomes: Sequence[ScenarioOutcome],
    *,
    title: str = "scenariokit run",
    index_name: str = INDEX_FILE,
) -> Path:
    """Write the report of ``outcomes`` into ``folder``; returns the index page's path."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    write_assets(root)
    rows = []
    for outcome in outcomes:
        page = write_run_page(outcome, root, index=index_name)
        rows.append(
            model.index_row(
                outcome.run,
                url=page.relative_to(root).as_posix(),
                environment=outcome.environment or str(outcome.run.environment_id),
                source=_source(outcome),
            )
        )
        rows[-1] = attrs.evolve(rows[-1], revision=outcome.revision)
    passed, failed = model.counts([outcome.run for outcome in outcomes])
    index = model.IndexPage(rows=tuple(rows), title=title, passed=passed, failed=failed)
    path = root / index_name
    path.write_text(render_index(index, assets="assets"), encoding="utf-8")
    return path
