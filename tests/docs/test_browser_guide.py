"""docs/browser.md: every per-setting example is a setting the service accepts, and each setting has one."""

from __future__ import annotations

import json

import attrs
from doc_blocks import ROOT, code_blocks

from scenariokit.domain.browser import BrowserSettings
from scenariokit.domain.fields import camel
from scenariokit.formats.convert import make_converter, structure_input

GUIDE = ROOT / "docs" / "browser.md"


def test_every_setting_has_an_example_that_is_accepted_as_written() -> None:
    converter = make_converter()
    examples = code_blocks(GUIDE, after="## One example per setting", lang="json")
    shown: set[str] = set()
    for text in examples:
        settings = structure_input(converter, json.loads(text), BrowserSettings, what="browser")
        shown |= {
            camel(field.name)
            for field in attrs.fields(BrowserSettings)
            if getattr(settings, field.name) is not None
        }
    assert shown == {camel(field.name) for field in attrs.fields(BrowserSettings)}


def test_the_yaml_example_imports_as_an_environment() -> None:
    from ruamel.yaml import YAML

    from scenariokit.formats.inputs import EnvironmentInput

    (text,) = code_blocks(GUIDE, after="The same in YAML", lang="yaml")
    document = YAML(typ="safe").load(text)
    document.pop("kind")
    environment = structure_input(make_converter(), document, EnvironmentInput)
    assert environment.browser.ignore_https_errors is True
    assert environment.browser.http_credentials is not None
