"""`scenariokit export` / `import` / `db` from the command line, against SQLite files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from json_services import json_services
from scenariokit.services import Services
from scenariokit.storage.migrations import head_revision
from scenariokit.storage.opening import open_store

SCENARIOKIT = [sys.executable, "-m", "scenariokit.cli"]
ENV = {**os.environ, "SCENARIOKIT_SECRET_KEY": "cli-secret"}


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the scenariokit command."""
    return subprocess.run(
        [*SCENARIOKIT, *args], env=ENV, capture_output=True, text=True, input=stdin, timeout=120
    )


@pytest.fixture
async def source_db(tmp_path: Path) -> tuple[str, str]:
    """A SQLite database with an environment, a credential and a linked scenario of two steps."""
    url = f"sqlite:///{tmp_path / 'source.db'}"
    store = await open_store(url, secret_key="cli-secret")
    services = json_services(Services(store))
    env = await services.environments.create({"name": "staging", "data": {"url": "http://127.0.0.1:9/"}})
    credential = await services.credentials.create({"name": "admin", "username": "root", "secret": "pw"})
    await services.scenarios.create(
        {
            "name": "checkout ✓",
            "environmentId": str(env.id),
            "credentials": [{"credentialId": str(credential.id), "alias": "admin"}],
            "steps": [
                {"title": "open", "execCode": "await page.goto(helpers.getEnvUrl())\nprint('hi')\n"},
                {"execCode": "await expect(page).to_have_title('Shop')", "timeoutSeconds": 5},
            ],
        }
    )
    await store.close()
    return url, str(credential.id)


def test_export_import_export_gives_the_same_text(source_db: tuple[str, str], tmp_path: Path) -> None:
    url, credential_id = source_db
    options = ("--include-environment", "--credential-ids", credential_id, "--include-secrets")
    exported = cli("export", *options, "--database-url", url)
    assert exported.returncode == 0, exported.stderr
    assert "# environments" in exported.stdout and "# credentials" in exported.stdout
    assert "secret: pw" in exported.stdout
    assert "execCode: |" in exported.stdout
    stream = tmp_path / "all.yaml"
    stream.write_text(exported.stdout)

    target = f"sqlite:///{tmp_path / 'target.db'}"
    assert cli("db", "upgrade", "--database-url", target).returncode == 0
    imported = cli("import", str(stream), "--database-url", target)
    assert imported.returncode == 0, imported.stderr
    assert "created scenario" in imported.stdout and "created environment" in imported.stdout
    again = cli("export", *options, "--database-url", target)
    assert again.stdout == exported.stdout


def test_a_bad_import_exits_2_naming_the_document_and_changes_nothing(
    source_db: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = source_db
    before = cli("export", "--database-url", url).stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: scenario\nname: ok\n---\nkind: scenario\nname: broken\nsteps:\n  - title: no code\n"
    )
    result = cli("import", str(bad), "--database-url", url)
    assert result.returncode == 2
    assert "documents[1]" in result.stderr and "line" in result.stderr
    assert cli("export", "--database-url", url).stdout == before


def test_db_current_reports_the_revision(source_db: tuple[str, str]) -> None:
    result = cli("db", "current", "--database-url", source_db[0])
    assert result.returncode == 0 and str(head_revision()) in result.stdout


def test_db_current_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none-yet.db'}"

    result = cli("db", "current", "--database-url", url)

    assert result.returncode == 0 and "run `scenariokit db upgrade`" in result.stdout
    assert list(tmp_path.iterdir()) == [], "neither the database nor its key file was created"


def test_serve_without_the_server_extra_says_what_to_install() -> None:
    hidden = "import sys; sys.modules['aiohttp'] = None"  # as if the server extra were not installed
    code = f"{hidden}; from scenariokit.cli import main; sys.exit(main(['serve']))"

    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)

    assert result.returncode == 2
    assert "pip install 'scenariokit[server]'" in result.stderr and "Traceback" not in result.stderr


def test_help_teaches_with_examples() -> None:
    result = cli("--help")
    assert result.returncode == 0
    for command in ("serve", "worker", "db", "export", "import", "run"):
        assert f"    {command} " in result.stdout
    assert "examples:" in result.stdout
