"""Keys seen from HTTP: a server whose keys cannot read the store does not start; a damaged secret is a
clear 503 naming the record, never a 500 (docs/deployment.md, "Keys and rotation")."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa
from api_support import API, Client, both_backends, problem_of
from cryptography.fernet import Fernet

from json_services import json_services
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.ports import Store
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t


@both_backends
async def test_a_secret_no_key_decrypts_gives_a_503_naming_it_and_the_list_still_answers(
    client: Client, services: Services, api_store: Store
) -> None:
    credential = await services.credentials.create({"name": "admin", "username": "u", "secret": "pw"})
    assert isinstance(api_store, SqlStore)
    damaged = Fernet(Fernet.generate_key()).encrypt(b"pw").decode()
    async with api_store.engine.begin() as conn:  # written by some other key, behind the server's back
        await conn.execute(sa.update(t.credentials).values(secret_encrypted=damaged))

    response = await client.get(f"{API}/credentials")

    problem = await problem_of(response, 503)
    assert f"credential {credential.id} ('admin')" in problem["detail"]
    assert "SCENARIOKIT_SECRET_KEY" in problem["detail"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _store_a_secret(url: str) -> None:
    store = await open_store(url, secret_key="the key it was written with")
    await json_services(Services(store)).credentials.create({"name": "admin", "secret": "pw"})
    await store.close()


def test_serve_refuses_to_start_with_a_key_that_cannot_read_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sk.db'}"
    asyncio.run(_store_a_secret(url))
    environ = {**os.environ, "SCENARIOKIT_SECRET_KEY": "another key", "SCENARIOKIT_RUN_SCHEDULER": "0"}

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scenariokit.cli",
            "serve",
            "--port",
            str(_free_port()),
            "--database-url",
            url,
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 2, result.stderr
    assert "scenariokit: SCENARIOKIT_SECRET_KEY cannot decrypt this store" in result.stderr
    assert "Traceback" not in result.stderr
