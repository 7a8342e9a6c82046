"""A store, a scheduler and real Chromium for hostile step code, once with bubblewrap and once without."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from security_support import SECRET, UNLINKED_SECRET, VICTIM_SECRET, Hostile

import scenariokit
from scenariokit.runner.confinement.sandbox import bubblewrap_works
from scenariokit.runner.parent import executor
from served_pages import serve_pages

PAGES = {"/": "<!doctype html><title>Home</title><h1>Hello</h1>"}


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serve_pages(PAGES) as base:
        yield base


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[("bubblewrap", "zygote"), ("off", "zygote"), ("bubblewrap", "exec"), ("off", "exec")],
    ids=lambda param: "-".join(param),
)
async def hostile(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, site: str
) -> AsyncIterator[Hostile]:
    """A SQLite store with its generated key file, and a scheduler whose workers use the sandbox mode.

    Its workers are forked from the pool's zygote, or (``exec``, as where the zygote cannot serve)
    each started by exec.
    """
    mode, started = request.param
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap cannot start a sandbox on this machine")
    patch = pytest.MonkeyPatch()
    if started == "exec":
        patch.setattr(executor, "zygote_supported", lambda kind: False)
    patch.setenv("SCENARIOKIT_SANDBOX", mode)
    patch.delenv("SCENARIOKIT_SECRET_KEY", raising=False)  # the key file beside the database is generated
    patch.setenv("SCENARIOKIT_API_TOKENS", "service-token-that-must-not-leak")
    folder = tmp_path_factory.mktemp(f"hostile-{mode}-{started}")
    database = folder / "kit.db"
    mark = uuid.uuid4().hex
    try:
        async with scenariokit.open_kit(
            f"sqlite:///{database}", workers=1, artifacts_dir=folder / "artifacts"
        ) as kit:
            key = database.with_suffix(".key")
            credential = await kit.credentials.create(
                {"name": "admin", "username": "alice", "secret": SECRET}
            )
            victim = await kit.credentials.create(
                {"name": "victim", "username": "bob", "secret": VICTIM_SECRET}
            )
            await kit.credentials.create({"name": "other team", "username": "eve", "secret": UNLINKED_SECRET})
            env = await kit.environments.create(
                {
                    "name": "targets",
                    "data": {
                        "url": site,
                        "db": str(database),
                        "key": str(key),
                        "artifacts": str(folder / "artifacts"),
                        "folder": str(folder),
                        "cwd": os.getcwd(),
                        "mark": mark,
                    },
                }
            )
            yield Hostile(
                kit=kit,
                mode=mode,
                started=started,
                folder=folder,
                database=database,
                key=key,
                artifacts=folder / "artifacts",
                env_id=env.id,
                credential_id=credential.id,
                victim_credential_id=victim.id,
                key_text=key.read_text().strip(),
                mark=mark,
            )
    finally:
        patch.undo()
