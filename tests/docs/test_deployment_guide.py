"""docs/deployment.md's commands work as written: the PostgreSQL setup, and what refuses to start.

The PostgreSQL block runs in bash with the page's database URL replaced by a schema of its own on the
test server (dropped afterwards), and its ``...`` secret key by a value; the ``pip install`` line is
left out (this virtualenv has the extras).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block
from doc_commands import clean_env, free_port

from scenariokit.storage.sqlalchemy import unique_schema

DEPLOYMENT_MD = ROOT / "docs" / "deployment.md"
PG_BASE_URL = os.environ.get("SCENARIOKIT_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
DOC_URL = "postgresql+asyncpg://scenariokit:secret@db.internal/scenariokit"


async def drop_schema(schema: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(PG_BASE_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await connection.close()


@pytest.mark.postgres
def test_the_postgresql_setup_upgrades_and_shows_the_revision(tmp_path: Path) -> None:
    block = code_block(DEPLOYMENT_MD, after="## PostgreSQL: shared", lang="sh")
    lines = block.splitlines()
    assert lines[0].startswith("pip install -e '.[server,postgres]'")
    assert block.count(DOC_URL) == 1 and block.count("SCENARIOKIT_SECRET_KEY=...") == 1
    schema = unique_schema("docs")
    script = (
        "\n".join(lines[1:])
        .replace(DOC_URL, f"'{PG_BASE_URL}?schema={schema}'")
        .replace("SCENARIOKIT_SECRET_KEY=...", "SCENARIOKIT_SECRET_KEY=docs-test-key")
    )
    try:
        done = subprocess.run(
            ["bash", "-eu", "-c", script],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        asyncio.run(drop_schema(schema))

    assert done.returncode == 0, done.stderr
    upgraded, current = done.stdout.splitlines()
    text = " ".join(DEPLOYMENT_MD.read_text(encoding="utf-8").split())
    documented = re.search(r"Both commands print the revision: `([^`]+)`, `([^`]+)`", text)
    assert documented is not None
    revision = upgraded.rsplit(" ", 1)[-1]
    assert (upgraded, current) == (documented[1], documented[2]), "the page names another revision"
    assert current.endswith(f" {revision}")
    assert not (tmp_path / "scenariokit.key").exists()  # the key came from SCENARIOKIT_SECRET_KEY


def test_serve_on_another_address_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    try:
        done = subprocess.run(
            ["scenariokit", "serve", "--host", "0.0.0.0", "--no-scheduler", "--port", str(free_port())],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:  # it started: the page's promise is broken (and the port is closed)
        pytest.fail("scenariokit serve --host 0.0.0.0 started without API tokens")
    assert done.returncode == 2
    assert "refusing to serve on '0.0.0.0' without authentication" in done.stderr
    assert "SCENARIOKIT_API_TOKENS" in done.stderr and "--insecure" in done.stderr


def test_a_variable_that_cannot_be_used_stops_the_command_naming_it(tmp_path: Path) -> None:
    done = subprocess.run(
        ["scenariokit", "worker"],
        cwd=tmp_path,
        env=clean_env(SCENARIOKIT_WORKERS="four"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "SCENARIOKIT_WORKERS='four' is invalid" in done.stderr


def test_the_browser_switches_example_is_taken_and_a_reserved_switch_stops_serve(tmp_path: Path) -> None:
    from scenariokit.runner.worker.browser import discover_browser

    block = code_block(DEPLOYMENT_MD, after="#### Chromium switches of your own", lang="sh")
    found = re.search(r'export SCENARIOKIT_BROWSER_ARGS="([^"]+)"', block)
    assert found is not None and "--disable-software-rasterizer" in found[1]
    config = discover_browser({**os.environ, "SCENARIOKIT_BROWSER_ARGS": found[1]})
    assert config.args == tuple(found[1].split())
    assert config.launch_args[-len(config.args) :] == [*config.args]

    done = subprocess.run(
        ["scenariokit", "serve", "--no-scheduler", "--port", str(free_port())],
        cwd=tmp_path,
        env=clean_env(SCENARIOKIT_BROWSER_ARGS="--user-data-dir=/tmp/profile"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        "SCENARIOKIT_BROWSER_ARGS='--user-data-dir=/tmp/profile' is invalid: --user-data-dir may not be given"
        in done.stderr
    )
