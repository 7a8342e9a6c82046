"""The example of docs/yaml.md imports as written and is exactly what the exporter writes."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from scenariokit.services import Services

DOC = Path(__file__).resolve().parents[2] / "docs" / "yaml.md"
EXAMPLE = re.compile(r"<!-- import: (\w+) -->\n```yaml\n(.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    """The ``(kind, text)`` of each YAML block marked ``<!-- import: kind -->`` in the document."""
    found = EXAMPLE.findall(DOC.read_text(encoding="utf-8"))
    assert found, f"no marked example in {DOC}"
    return found


async def test_the_documented_example_imports_and_exports_as_written(lite: Services) -> None:
    blocks = dict(examples())
    assert set(blocks) == {"scenario", "snippet"}

    stream = await lite.transfer.import_yaml(blocks["scenario"], kind="scenario")
    snippet = await lite.transfer.import_yaml(blocks["snippet"], kind="snippet")

    assert stream.to_json()["counts"] == {"created": 3, "updated": 0}
    [credential_id] = stream.created["credential"]
    [snippet_id] = snippet.created["snippet"]
    exported = await lite.transfer.export_scenarios(
        include_environment=True, credential_ids=[credential_id], include_secrets=True
    )
    assert exported == blocks["scenario"]
    assert await lite.transfer.export_snippet(snippet_id) == blocks["snippet"]
    scenario = await lite.scenarios.get(uuid.UUID("9d4a7e21-6c3b-4f8a-b5e2-1f0c9d8a7b63"))
    assert [step.title for step in scenario.steps] == ["Log in", "Buy the cheapest item"]
    assert scenario.steps[0].exec_code.count("\n") == 4
