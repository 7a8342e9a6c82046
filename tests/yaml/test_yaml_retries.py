"""A scenario's ``retries`` in YAML export and import (docs/yaml.md, docs/monitoring.md)."""

from __future__ import annotations

from typing import Any

import pytest

from scenariokit.domain.errors import ValidationError
from scenariokit.domain.model import Backoff, Retries


async def test_retries_are_exported_and_imported_back(services: Any) -> None:
    retried = await services.scenarios.create(
        {"name": "retried", "retries": {"count": 3, "backoff": "linear", "backoffSeconds": 2}}
    )
    plain = await services.scenarios.create({"name": "plain"})

    text = await services.transfer.export_scenarios([retried.id, plain.id])

    assert "retries:\n  count: 3\n  backoff: linear\n  backoffSeconds: 2\n" in text
    assert text.count("retries:") == 1  # a scenario without retries exports as it did before
    await services.scenarios.delete(retried.id)
    await services.scenarios.delete(plain.id)
    report = await services.transfer.import_yaml(text, kind="scenario")
    back = {s.name: s for s in [await services.scenarios.get(i) for i in report.created["scenario"]]}
    assert back["retried"].retries == Retries(count=3, backoff=Backoff.LINEAR, backoff_seconds=2)
    assert back["plain"].retries == Retries()


@pytest.mark.parametrize(
    ("retries", "field", "words"),
    [
        ("count: 9", "retries.count", "from 0 to 5"),
        ("backoff: sometimes", "retries.backoff", "must be one of"),
        ("backoffSeconds: 1000", "retries.backoffSeconds", "from 0 to 600"),
    ],
)
async def test_bad_retries_refuse_the_import_naming_the_field_and_line(
    services: Any, retries: str, field: str, words: str
) -> None:
    text = f"kind: scenario\nname: x\nretries:\n  {retries}\n"
    with pytest.raises(ValidationError) as refused:
        await services.transfer.import_yaml(text, kind="scenario")
    key = f"documents[0].{field}"
    assert key in refused.value.errors, refused.value.errors
    assert refused.value.errors[key].startswith("line 4: ") and words in refused.value.errors[key]
    assert (await services.scenarios.list()).total == 0
