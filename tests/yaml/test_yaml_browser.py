"""Browser settings in YAML export and import (docs/yaml.md, docs/browser.md).

The round trip of every setting is tests/yaml/test_yaml_roundtrip.py (the fixture set holds them).
"""

from __future__ import annotations

from typing import Any

import pytest

from scenariokit.domain.errors import ValidationError


async def test_settings_are_exported_only_where_set_and_imported_back(services: Any) -> None:
    environment = await services.environments.create(
        {"name": "mobile", "browser": {"device": "Pixel 7", "colorScheme": "dark"}}
    )
    plain = await services.environments.create({"name": "plain"})
    text = await services.transfer.export_environment(environment.id)
    assert "browser:\n  device: Pixel 7\n  colorScheme: dark\n" in text
    assert "browser" not in await services.transfer.export_environment(plain.id)  # as it was before
    await services.environments.delete(environment.id)
    report = await services.transfer.import_yaml(text, kind="environment")
    (back,) = [await services.environments.get(i) for i in report.created["environment"]]
    assert back.browser.device == "Pixel 7" and back.browser.color_scheme == "dark"
    assert await services.transfer.export_environment(back.id) == text


@pytest.mark.parametrize(
    ("browser", "field", "words"),
    [
        ("device: Nokia 3310", "browser.device", "not a device Playwright knows"),
        ("video: sometimes", "browser.video", "must be one of"),
        ("colorScheme: sepia", "browser.colorScheme", "must be one of"),
        ("geolocation: {latitude: 100, longitude: 0}", "browser.geolocation.latitude", "-90 to 90"),
        ("httpCredentials: {credential: nobody}", "browser.httpCredentials.credential", "not the alias"),
        ("zoom: 2", "browser.zoom", "unknown field"),
    ],
)
async def test_bad_settings_refuse_the_import_naming_the_field_and_line(
    services: Any, browser: str, field: str, words: str
) -> None:
    text = f"kind: scenario\nname: x\nbrowser:\n  {browser}\n"
    with pytest.raises(ValidationError) as refused:
        await services.transfer.import_yaml(text, kind="scenario")
    key = f"documents[0].{field}"
    assert key in refused.value.errors, refused.value.errors
    assert refused.value.errors[key].startswith("line "), refused.value.errors
    assert words in refused.value.errors[key]
    assert (await services.scenarios.list()).total == 0
