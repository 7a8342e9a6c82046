"""Property-based: every schemathesis check (no 5xx; documented status, content type and body; valid
data accepted, invalid data refused; 405 for undeclared methods) holds for generated requests.

The document is the one the app serves at ``/docs/openapi.json`` (a test checks they are the same); it
is built in-process at collection time because schemathesis' lazy fixture loading does not work with
pytest 9. The requests go to the real app served on a real loopback port.
"""

from __future__ import annotations

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
    config=SchemathesisConfig.from_str(
        SETTINGS + (Path(__file__).parents[2] / "schemathesis.toml").read_text()
    ),
).exclude(
    # Authoring sessions are held where step code runs: this app runs no scheduler, so every call is a
    # documented 503 (a 5xx the checks refuse), and with one each start would launch a browser. Their
    # refusals by field are tested in tests/mcp/test_authoring_limits.py.
    path_regex=r"^/api/v1/authoring"
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
