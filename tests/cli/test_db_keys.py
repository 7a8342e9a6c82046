"""``scenariokit db new-key`` and ``db rotate-key``: one command re-encrypts every stored secret."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from json_services import json_services
from scenariokit.cli import main
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy.tables import credentials


async def _store_a_secret(url: str, key: str) -> None:
    store = await open_store(url, secret_key=key)
    try:
        await json_services(Services(store)).credentials.create(
            {"name": "admin", "username": "u", "secret": "pw"}
        )
    finally:
        await store.close()


async def _secrets(url: str, key: str) -> list[str | None]:
    store = await open_store(url, secret_key=key)
    try:
        return [c.secret for c in (await Services(store).credentials.list()).items]
    finally:
        await store.close()


async def _ciphertext(url: str) -> str:
    store = SqlStore(url, secret_key="unused")
    try:
        async with store.engine.connect() as conn:
            return str((await conn.execute(sa.select(credentials.c.secret_encrypted))).scalar_one())
    finally:
        await store.close()


def test_new_key_prints_a_fernet_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "new-key"]) == 0
    key = capsys.readouterr().out.strip()
    assert Fernet(key.encode())  # a valid key
    assert main(["db", "new-key"]) == 0 and capsys.readouterr().out.strip() != key


def test_rotate_key_re_encrypts_with_the_first_key_and_the_old_one_can_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'sk.db'}"
    asyncio.run(_store_a_secret(url, "old key"))
    new = Fernet.generate_key().decode()
    monkeypatch.setenv("SCENARIOKIT_SECRET_KEY", f"{new},old key")

    assert main(["db", "rotate-key", "--database-url", url]) == 0

    shown = capsys.readouterr().out
    assert "credentials.secret_encrypted: 1 re-encrypted" in shown
    assert "1 secret(s) re-encrypted with the first key" in shown and "needs only that key" in shown
    assert asyncio.run(_secrets(url, new)) == ["pw"]
    monkeypatch.setenv("SCENARIOKIT_SECRET_KEY", "old key")
    assert main(["db", "upgrade", "--database-url", url]) == 2
    assert "SCENARIOKIT_SECRET_KEY cannot decrypt this store" in capsys.readouterr().err


def test_rotate_key_with_keys_that_cannot_read_the_store_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'sk.db'}"
    asyncio.run(_store_a_secret(url, "old key"))
    before = asyncio.run(_ciphertext(url))
    monkeypatch.setenv("SCENARIOKIT_SECRET_KEY", Fernet.generate_key().decode())  # the old key forgotten

    assert main(["db", "rotate-key", "--database-url", url]) == 2

    assert "cannot decrypt this store" in capsys.readouterr().err
    assert asyncio.run(_ciphertext(url)) == before
    assert asyncio.run(_secrets(url, "old key")) == ["pw"]


def test_rotate_key_help_says_how_to_rotate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["db", "rotate-key", "--help"])
    shown = capsys.readouterr().out
    assert stopped.value.code == 0 and shown.startswith("usage: scenariokit db rotate-key")
    assert "the first encrypts" in shown and "examples:" in shown and "--database-url" in shown
