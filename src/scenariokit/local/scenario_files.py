"""Scenario YAML files as the pytest plugin and ``scenariokit run`` read them, before any store.

A scenario file is a YAML stream as ``scenariokit export`` writes it (``# environments``,
``# credentials``, ``# scenarios``). :func:`read_scenario_file` lists its scenarios and environments
without a store, so pytest can collect them without starting a browser; a file holding only snippet
documents (a snippet export) is a file of snippets. :func:`read_environment_file` reads the one
environment of an environment file. :mod:`scenariokit.local.runner` imports and runs them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from scenariokit.domain.errors import ScenarioKitError, TooLarge, ValidationError
from scenariokit.formats.yaml_io import load_entities

#: File names the pytest plugin collects.
SCENARIO_FILE_SUFFIXES = (".scenario.yaml", ".scenario.yml")

#: An environment name, a path to a YAML file with one environment, a mapping of ``data``, or None.
EnvChoice = str | os.PathLike[str] | Mapping[str, Any] | None


class ScenarioFileError(ScenarioKitError):
    """A scenario file, environment file or environment choice that cannot be used (says which)."""


@attrs.frozen
class ScenarioEntry:
    """One scenario of a file, as listed before anything is imported."""

    name: str
    line: int
    id: uuid.UUID | None = None
    environment_id: uuid.UUID | None = None
    steps: int = 0
    #: the scenario's revision in the store the file was exported from (``revision:``), when it says
    revision: int | None = None


@attrs.frozen
class EnvironmentEntry:
    """One environment of a file's ``# environments`` section."""

    name: str
    id: uuid.UUID | None = None


@attrs.frozen
class ScenarioFile:
    """A YAML file read and listed: a scenario stream, or a stream of snippets only."""

    path: Path
    text: str
    kind: Literal["scenario", "snippet"] = "scenario"
    #: the file's real path: one file named two ways is imported once
    real_path: str = ""
    scenarios: tuple[ScenarioEntry, ...] = ()
    environments: tuple[EnvironmentEntry, ...] = ()


def is_scenario_file(path: str | os.PathLike[str]) -> bool:
    """Whether the pytest plugin collects this file (``*.scenario.yaml`` or ``*.scenario.yml``)."""
    return os.fspath(path).endswith(SCENARIO_FILE_SUFFIXES)


def _revision(value: object) -> int | None:
    """A document's ``revision:`` when it is a revision number (the import ignores it either way)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value is not None else None
    except ValueError:
        return None  # the import names the bad id with its line


def read_scenario_file(path: str | os.PathLike[str]) -> ScenarioFile:
    """Read and list a scenario file (or a file of snippets); ScenarioFileError says what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(f"{path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        entities = load_entities(text)
    except (ValidationError, TooLarge) as exc:
        raise ScenarioFileError(f"{path}: {getattr(exc, 'message', exc)}") from None
    kinds = {entity.kind or "scenario" for entity in entities}
    real = os.path.realpath(path)
    if kinds == {"snippet"}:
        return ScenarioFile(path=path, text=text, kind="snippet", real_path=real)
    if "snippet" in kinds:
        raise ScenarioFileError(
            f"{path}: snippets cannot share a file with scenarios: give them a file of their own"
        )
    scenarios, environments = [], []
    for entity in entities:
        data = entity.data
        kind = entity.kind or "scenario"
        raw_name = data.get("name")
        name = raw_name if isinstance(raw_name, str) else f"line {entity.line}"
        if kind == "scenario":
            steps = data.get("steps")
            scenarios.append(
                ScenarioEntry(
                    name=name,
                    line=entity.line,
                    id=_uuid(data.get("id")),
                    environment_id=_uuid(data.get("environmentId")),
                    steps=len(steps) if isinstance(steps, list) else 0,
                    revision=_revision(data.get("revision")),
                )
            )
        elif kind == "environment":
            environments.append(EnvironmentEntry(name=name, id=_uuid(data.get("id"))))
    return ScenarioFile(
        path=path,
        text=text,
        real_path=real,
        scenarios=tuple(scenarios),
        environments=tuple(environments),
    )


def environment_file(env: EnvChoice) -> Path | None:
    """The environment file ``env`` names (a path, or a string ending in .yaml/.yml or naming a file)."""
    if env is None or isinstance(env, Mapping):
        return None
    path = Path(env)
    if isinstance(env, os.PathLike) or path.suffix in (".yaml", ".yml") or path.is_file():
        return Path(os.path.realpath(path)) if path.exists() else path
    return None


def read_environment_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``name``, ``description`` and ``data`` of the one environment a YAML file holds."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioFileError(f"{path}: no such environment file")
    try:
        entities = load_entities(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(f"{path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    except (ValidationError, TooLarge) as exc:
        raise ScenarioFileError(f"{path}: {getattr(exc, 'message', exc)}") from None
    if len(entities) != 1 or entities[0].kind not in (None, "environment"):
        raise ScenarioFileError(f"{path}: an environment file holds exactly one environment document")
    data = entities[0].data
    return {key: data[key] for key in ("name", "description", "data") if key in data}
