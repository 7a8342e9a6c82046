"""Keys per docs/deployment.md, "Keys and rotation": several keys, fingerprints, refusals, rotation."""

from __future__ import annotations

import base64
import logging
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from json_services import json_services
from scenariokit.domain.errors import SecretKeyError
from scenariokit.domain.model import Session
from scenariokit.formats.queries import CredentialQuery, SessionQuery
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.secrets import legacy_key
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t

NEW_KEY = Fernet.generate_key().decode()
STATE = {"cookies": [{"name": "sid", "value": "cookie-secret"}], "origins": []}


async def _fill(url: str, key: str) -> str:
    """Store a credential secret, a session token and a storage state with ``key``; the credential id."""
    store = await open_store(url, secret_key=key)
    try:
        services = json_services(Services(store))
        credential = await services.credentials.create({"name": "admin", "username": "u", "secret": "pw-1"})
        async with store.unit_of_work() as uow:
            await uow.sessions.add(Session(name="s", token="tok-123", storage_state=STATE))
            await uow.commit()
        return str(credential.id)
    finally:
        await store.close()


async def _read(url: str, key: str) -> tuple[list[str | None], list[tuple[str | None, object]]]:
    store = await open_store(url, secret_key=key)
    try:
        async with store.unit_of_work(readonly=True) as uow:
            credentials = await uow.credentials.list(CredentialQuery())
            sessions = await uow.sessions.list(SessionQuery())
        return [c.secret for c in credentials.items], [(s.token, s.storage_state) for s in sessions.items]
    finally:
        await store.close()


async def _stored(url: str) -> dict[str, str]:
    store = SqlStore(url, secret_key="unused")
    try:
        async with store.engine.connect() as conn:
            return {row.name: row.value for row in await conn.execute(sa.select(t.store_metadata))}
    finally:
        await store.close()


async def _ciphertexts(url: str) -> list[str]:
    store = SqlStore(url, secret_key="unused")
    try:
        async with store.engine.connect() as conn:
            found = []
            for table, column in t.ENCRYPTED_COLUMNS:
                found += list((await conn.execute(sa.select(table.c[column]))).scalars())
            return found
    finally:
        await store.close()


@pytest.fixture
async def url(database_url: str) -> AsyncIterator[str]:
    """A database URL whose PostgreSQL schema, if any, is dropped afterwards."""
    yield database_url
    store = SqlStore(database_url, secret_key="unused")
    await store.drop_schema()
    await store.close()


async def test_rotation_re_encrypts_every_secret_so_the_old_key_can_go(url: str) -> None:
    await _fill(url, "old passphrase")
    before = await _ciphertexts(url)

    # The new key first, the old one after it: everything reads, new writes use the new key.
    assert await _read(url, f"{NEW_KEY},old passphrase") == (["pw-1"], [("tok-123", STATE)])
    store = await open_store(url, secret_key=f"{NEW_KEY},old passphrase")
    try:
        rotation = await store.rotate_keys()  # type: ignore[attr-defined]
    finally:
        await store.close()

    assert rotation.counts == {
        "credentials.secret_encrypted": 1,
        "sessions.token_encrypted": 1,
        "sessions.storage_state_encrypted": 1,
    }
    after = await _ciphertexts(url)
    assert len(after) == 3 and not set(after) & set(before)
    assert all(Fernet(NEW_KEY.encode()).decrypt(token.encode()) for token in after)
    assert await _read(url, NEW_KEY) == (["pw-1"], [("tok-123", STATE)])
    with pytest.raises(SecretKeyError, match="cannot decrypt this store"):
        await open_store(url, secret_key="old passphrase")


async def test_a_store_refuses_to_open_with_a_key_that_did_not_write_it(url: str) -> None:
    await _fill(url, "the right key")
    recorded = await _stored(url)

    with pytest.raises(SecretKeyError) as refused:
        await open_store(url, secret_key="a wrong key")

    assert "cannot decrypt this store" in str(refused.value) and "Keys and rotation" in str(refused.value)
    assert await _stored(url) == recorded, "a refused key is not recorded"
    assert await _read(url, "the right key") == (["pw-1"], [("tok-123", STATE)])


async def test_an_empty_store_still_refuses_a_second_key(url: str) -> None:
    """Two hosts given different keys must not both write to one store, even before any secret."""
    store = await open_store(url, secret_key="host one")
    await store.close()
    with pytest.raises(SecretKeyError):
        await open_store(url, secret_key="host two")


async def test_passphrases_are_stretched_with_the_stores_own_salt(database_url: str, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path}/other.db"
    await _fill(database_url, "same passphrase")
    await _fill(other, "same passphrase")
    try:
        first, second = await _stored(database_url), await _stored(other)
        assert len(base64.b64decode(first["key_salt"])) == 16 and first["key_salt"] != second["key_salt"]
        assert first["key_fingerprints"] != second["key_fingerprints"]
        assert "same passphrase" not in str(first)
        token = (await _ciphertexts(database_url))[0]
        with pytest.raises(Exception):  # noqa: B017 - the unsalted derivation no longer reads it
            Fernet(legacy_key("same passphrase")).decrypt(token.encode())
    finally:
        store = SqlStore(database_url, secret_key="unused")
        await store.drop_schema()
        await store.close()


async def test_secrets_written_before_fingerprints_still_read_and_rotate(url: str) -> None:
    await _fill(url, "old style")
    legacy = Fernet(legacy_key("old style")).encrypt(b"pw-legacy").decode()
    store = SqlStore(url, secret_key="unused")
    async with store.engine.begin() as conn:  # as the unsalted SHA-256 key wrote it, before 0002
        await conn.execute(sa.update(t.credentials).values(secret_encrypted=legacy))
        await conn.execute(sa.delete(t.store_metadata).where(t.store_metadata.c.name == "key_fingerprints"))
    await store.close()

    assert (await _read(url, "old style"))[0] == ["pw-legacy"]
    store = await open_store(url, secret_key="old style")
    try:
        await store.rotate_keys()  # type: ignore[attr-defined]
    finally:
        await store.close()
    assert len((await _stored(url))["key_fingerprints"].split(",")) == 1
    token = (await _ciphertexts(url))[0]
    with pytest.raises(Exception):  # noqa: B017
        Fernet(legacy_key("old style")).decrypt(token.encode())
    assert (await _read(url, "old style"))[0] == ["pw-legacy"]


async def test_a_store_from_before_fingerprints_with_foreign_secrets_is_refused(url: str) -> None:
    await _fill(url, "mine")
    store = SqlStore(url, secret_key="unused")
    async with store.engine.begin() as conn:
        await conn.execute(sa.delete(t.store_metadata).where(t.store_metadata.c.name == "key_fingerprints"))
    await store.close()
    with pytest.raises(SecretKeyError, match="3 stored secret"):
        await open_store(url, secret_key="not mine")


async def test_a_postgresql_store_without_a_key_refuses_to_open_and_writes_no_key_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SCENARIOKIT_SECRET_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SecretKeyError, match="needs SCENARIOKIT_SECRET_KEY"):
        await open_store("postgresql+asyncpg://postgres@127.0.0.1:5432/test?schema=never_made")
    assert os.listdir(tmp_path) == []


async def test_the_sqlite_default_creates_its_key_file_once_and_logs_where(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("SCENARIOKIT_SECRET_KEY", raising=False)
    url = f"sqlite:///{tmp_path}/data/sk.db"
    with caplog.at_level(logging.INFO, logger="scenariokit.storage.secrets"):
        await _fill(url, "")
    key_file = tmp_path / "data" / "sk.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert [r.getMessage() for r in caplog.records if str(key_file) in r.getMessage()], caplog.text
    caplog.clear()

    with caplog.at_level(logging.INFO, logger="scenariokit.storage.secrets"):
        assert await _read(url, "") == (["pw-1"], [("tok-123", STATE)])
    assert not caplog.records, "an existing key file is used silently"


async def test_a_key_setting_with_no_key_is_refused() -> None:
    with pytest.raises(SecretKeyError, match="holds no key"):
        SqlStore("sqlite://", secret_key=" , ")


async def test_an_empty_key_file_is_refused_rather_than_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SCENARIOKIT_SECRET_KEY", raising=False)
    (tmp_path / "sk.key").write_text("\n")
    with pytest.raises(SecretKeyError, match=r"sk\.key is empty"):
        await open_store(f"sqlite:///{tmp_path}/sk.db")
    assert (tmp_path / "sk.key").read_text() == "\n"


async def test_the_rolling_rotation_of_the_guide_keeps_every_process_reading(url: str) -> None:
    """docs/deployment.md's four steps, with a process left one step behind at each."""
    old, new = "the old passphrase", Fernet.generate_key().decode()
    await _fill(url, old)
    await _fill(url, f"{old},{new}")  # step 1: the new key can decrypt, the old one still encrypts
    await _fill(url, f"{new},{old}")  # step 2: the new key encrypts
    secrets = ["pw-1"] * 3
    assert (await _read(url, f"{old},{new}"))[0] == secrets  # a process still at step 1 reads all
    with pytest.raises(SecretKeyError):
        await open_store(url, secret_key=old)  # one given only the old key would not
    store = await open_store(url, secret_key=f"{new},{old}")
    try:
        await store.rotate_keys()  # type: ignore[attr-defined]  # step 3
    finally:
        await store.close()
    assert (await _read(url, new))[0] == secrets  # step 4


def test_rotation_knows_every_encrypted_column() -> None:
    """A new ``*_encrypted`` column must be listed, or rotation would leave it under the old key."""
    named = {(table.name, column.name) for table in t.metadata.tables.values() for column in table.columns}
    encrypted = {pair for pair in named if pair[1].endswith("_encrypted")}
    assert encrypted == {(table.name, column) for table, column in t.ENCRYPTED_COLUMNS}
