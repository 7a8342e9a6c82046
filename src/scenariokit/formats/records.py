"""Read records: a page of scenarios as storage reads it for the doors that answer JSON.

A list answered as JSON needs no domain value: building a :class:`~scenariokit.domain.model.Scenario`
per row (and its steps, each through its converters) only for the converter to take it apart again
was most of what a page cost. Storage fills these records straight from one statement, and
:func:`scenariokit.formats.presenters.scenario_record_json` shapes them into exactly the JSON that
:func:`~scenariokit.formats.presenters.scenario_json` gives for the same stored scenario (a test
holds the two together on SQLite and PostgreSQL).

What storage guarantees of a record's values, whatever the database:

- ids are canonical UUID text (lower case, hyphenated);
- times are ISO 8601 text in UTC (``YYYY-MM-DDTHH:MM:SS.ffffffZ`` as stored, to the microsecond);
- seconds are floats (or None), as the domain's ``seconds`` converter makes them;
- a scenario's retries are the :class:`~scenariokit.domain.model.Retries` value its row holds, read by
  the storage rules (unknown keys ignored, missing ones defaulted, no validators);
- its browser settings likewise (:class:`~scenariokit.domain.browser.BrowserSettings`);
- the fields are the attrs fields of the domain class, in its order (a test compares them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scenariokit.domain.browser import BrowserSettings
from scenariokit.domain.model import Retries


class StepRecord(NamedTuple):
    """One step as stored: the fields of :class:`~scenariokit.domain.model.Step`."""

    exec_code: str
    order: int
    title: str | None
    timeout_seconds: float | None
    id: str


class LinkRecord(NamedTuple):
    """One credential link: the fields of :class:`~scenariokit.domain.model.CredentialLink`."""

    credential_id: str
    alias: str


class ScenarioRecord(NamedTuple):
    """One scenario with its steps (in order) and links: the fields of the domain's ``Scenario``."""

    name: str
    description: str | None
    environment_id: str | None
    timeout_seconds: float | None
    credentials: Sequence[LinkRecord]
    steps: Sequence[StepRecord]
    id: str
    created_at: str
    updated_at: str
    retries: Retries
    browser: BrowserSettings
