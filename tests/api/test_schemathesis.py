"""Property-based: every schemathesis check (no 5xx; documented status, content type and body; valid
data accepted, invalid data refused; 405 for undeclared methods) holds for generated requests.

The document is the one the app serves at ``/docs/openapi.json`` (a test checks they are the same); it
is built in-process at collection time because schemathesis' lazy fixture loading does not work with
pytest 9. The requests go to the real app served on a real loopback port.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from live_server import serve
from schemathesis.config import SchemathesisConfig

from scenariokit_server import Settings, create_app

MAX_EXAMPLES = 4  # per operation: about 50 operations, so a few hundred cases in all
#: The repository's schemathesis.toml (the rules OpenAPI cannot state, used by ``nox -s fuzz``) under
#: a short, deterministic generation: every check runs, as ``st run --checks all`` does.
SETTINGS = f"""
seed = 20240501
[generation]
mode = "all"
max-examples = {MAX_EXAMPLES}
deterministic = true
[phases.coverage]
enabled = false
[phases.stateful]
enabled = false
"""


def _document() -> dict[str, Any]:
    document: dict[str, Any] = create_app(Settings(database_url="sqlite://"))["swagger_dict"]
    return document


schema = schemathesis.openapi.from_dict(
    _document(),
    # Authoring sessions are held where step code runs: this app runs no scheduler, so a call whose
    # input passes every check is the documented 503, which schemathesis.toml allows for them alone;
    # input that fails one is refused first, as with a scheduler. Their refusals by field are also
    # tested in tests/mcp/test_authoring_limits.py.
    config=SchemathesisConfig.from_str(
        SETTINGS + (Path(__file__).parents[2] / "schemathesis.toml").read_text()
    ),
)


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app over its own SQLite file, on a real loopback port."""
    folder: Path = tmp_path_factory.mktemp("schemathesis")
    app_settings = Settings(
        database_url=f"sqlite:///{folder}/scenariokit.db",
        secret_key="schemathesis-key",
        run_scheduler=False,
        artifacts_dir=folder / "artifacts",
        workers=1,
    )
    with serve(app_settings) as url:
        yield url


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    """One connection pool for every generated request."""
    with requests.Session() as session:
        yield session


def test_the_tested_document_is_the_served_one(live_url: str, http: requests.Session) -> None:
    served = http.get(f"{live_url}/docs/openapi.json", timeout=10).json()
    # `servers` names the server as the request reached it; the rest is the document built in-process
    assert served.pop("servers") == [{"url": live_url, "description": "this server"}]
    assert served == {key: value for key, value in _document().items() if key != "servers"}


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
def test_generated_requests_get_documented_answers(case: Any, live_url: str, http: requests.Session) -> None:
    case.call_and_validate(base_url=live_url, session=http)


def test_each_entry_of_the_config_applies_to_the_paths_and_methods_its_filters_name() -> None:
    """schemathesis joins an entry's ``include-*`` filters with OR: an entry naming paths and methods
    must include the paths and exclude the other methods, or it takes in every write of every path
    (the 400s it allows then hid rules the document did not state: blank names, revision 0)."""
    entries = tomllib.loads((Path(__file__).parents[2] / "schemathesis.toml").read_text())["operations"]
    blocks = schema.config.operations.operations
    assert len(blocks) == len(entries)
    for entry, block in zip(entries, blocks, strict=True):
        assert "include-method-regex" not in entry, entry
        taken = [
            op.ok() for op in schema.get_all_operations() if block._filter_set.applies_to(operation=op.ok())
        ]
        assert taken, entry
        for operation in taken:
            assert re.search(entry["include-path-regex"], operation.path), (entry, operation.path)
            excluded = entry.get("exclude-method-regex")
            assert excluded is None or not re.search(excluded, operation.method.upper()), (
                entry,
                operation.method,
            )
