"""docs/deployment.md, "Keys and rotation": the SQLite rotation runs as written, and the refusals and
log lines the page quotes are the ones the commands print."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from doc_blocks import ROOT, code_block
from doc_commands import clean_env

DEPLOYMENT_MD = ROOT / "docs" / "deployment.md"
SECTION = "## Keys and rotation"


def _page() -> str:
    text = DEPLOYMENT_MD.read_text(encoding="utf-8")
    return " ".join(text[text.index(SECTION) :].split())


def test_the_sqlite_rotation_runs_as_written(tmp_path: Path) -> None:
    block = code_block(DEPLOYMENT_MD, after=SECTION, lang="sh")

    done = subprocess.run(
        ["bash", "-eu", "-c", block],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    key_file = tmp_path / "scenariokit.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    created = "INFO scenariokit.storage.secrets: created a new secret key in scenariokit.key"
    assert done.stderr.count(created) == 1
    assert created in _page()
    rotated = [line for line in done.stdout.splitlines() if "re-encrypted with the first key" in line]
    assert len(rotated) == 1 and rotated[0].startswith("0 secret(s) re-encrypted with the first key (")
    assert rotated[0].endswith("; the store now needs only that key")
    assert "the store now needs only that key" in _page()

    old_key_only = clean_env(SCENARIOKIT_SECRET_KEY="a key this store never saw")
    refused = subprocess.run(
        ["scenariokit", "db", "upgrade"],
        cwd=tmp_path,
        env=old_key_only,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    quoted = (
        "SCENARIOKIT_SECRET_KEY cannot decrypt this store: it holds secrets written with the key(s) "
        "fingerprinted"
    )
    assert quoted in refused.stderr and quoted in _page()


def test_postgresql_without_a_key_refuses_to_start_as_the_page_says(tmp_path: Path) -> None:
    url = "postgresql+asyncpg://postgres@127.0.0.1:5432/test?schema=docs_never_made"

    done = subprocess.run(
        ["scenariokit", "db", "upgrade", "--database-url", url],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "a postgresql+asyncpg store needs SCENARIOKIT_SECRET_KEY" in done.stderr
    assert "a postgresql+asyncpg store needs SCENARIOKIT_SECRET_KEY" in _page()
    assert os.listdir(tmp_path) == [], "no key file in the working directory"
