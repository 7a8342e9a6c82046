"""`scenariokit db backup` under load and `db restore` (docs/deployment.md, "Backups"): the copy is
taken with SQLite's online backup API while the server runs and writes; a server started on the
restored copy with the same key reads every scenario, run and log and decrypts every secret."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import aiohttp
import pytest
from ops_processes import Api, clean_env, cli, serving

pytestmark = pytest.mark.browser

SECRET = "the-backed-up-secret-0123"
PRINTS = 'print("hello from the run")'


def _one_whole_file(copy: Path) -> bool:
    """Whether the copy passes SQLite's integrity check with no ``-wal`` file beside it."""
    with contextlib.closing(sqlite3.connect(copy)) as db:
        whole = db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return whole and not Path(f"{copy}-wal").exists()


async def _every_id(api: Api, path: str) -> set[str]:
    """The ids on every page of a paged list (a page holds at most 200)."""
    ids: set[str] = set()
    page = 1
    while True:
        listed = await api.call("GET", f"{path}?limit=200&page={page}")
        ids.update(item["id"] for item in listed["items"])
        if page * listed["limit"] >= listed["total"]:
            return ids
        page += 1


async def test_a_backup_under_load_restores_every_record_and_decrypts_every_secret(tmp_path: Path) -> None:
    live, shelf, restored = tmp_path / "live", tmp_path / "shelf", tmp_path / "restored"
    for folder in (live, shelf, restored):
        folder.mkdir()
    live_url = f"sqlite:///{live / 'scenariokit.db'}"
    env = clean_env()  # no SCENARIOKIT_SECRET_KEY: the embedded default keeps its key beside the database
    backup = shelf / "sk.db"
    acknowledged: list[str] = []  # scenarios whose create was answered before the backup began
    with serving(live_url, live, "--workers", "2", env=env) as (base, _):
        async with aiohttp.ClientSession() as http:
            api = Api(http, base)
            await api.wait_healthy()
            credential = await api.call(
                "POST", "/credentials", {"name": "login", "username": "u", "secret": SECRET}
            )
            environment = await api.call(
                "POST", "/environments", {"name": "e", "data": {"url": "http://127.0.0.1:9"}}
            )
            scenario = await api.call(
                "POST", "/scenarios",
                {"name": "greets", "steps": [{"execCode": PRINTS}],
                 "credentials": [{"credentialId": credential["id"], "alias": "login"}]},
            )  # fmt: skip
            queue = {"scenarioId": scenario["id"], "environmentId": environment["id"]}
            finished = [(await api.call("POST", "/run", queue))["id"] for _ in range(2)]
            for run_id in finished:
                assert (await api.wait_run(run_id))["status"] == "pass"

            stop = asyncio.Event()
            created: list[str] = []

            async def load() -> None:  # writes and runs going on while the backup is taken
                i = 0
                while not stop.is_set():
                    made = await api.call(
                        "POST", "/scenarios", {"name": f"load {i}", "steps": [{"execCode": PRINTS}]}
                    )
                    created.append(made["id"])
                    if i % 4 == 0:
                        await api.call(
                            "POST", "/run", {"scenarioId": made["id"], "environmentId": environment["id"]}
                        )
                    i += 1

            writer = asyncio.create_task(load())
            await asyncio.sleep(2)
            acknowledged = list(created)
            took = await asyncio.to_thread(
                cli, "db", "backup", str(backup), "--artifacts", "--database-url", live_url, env=env, cwd=live
            )
            await asyncio.sleep(1)
            stop.set()
            await writer
            assert took.returncode == 0, took.stderr
            assert len(created) > len(acknowledged) > 0, "the server went on writing during the backup"

    assert f"the key that decrypts its secrets is in {live / 'scenariokit.key'}" in took.stdout
    assert (shelf / "sk.db.artifacts").is_dir()
    assert _one_whole_file(backup)

    again = cli("db", "backup", str(backup), "--database-url", live_url, env=env, cwd=live)
    assert again.returncode == 2 and f"{backup} exists; a backup never overwrites" in again.stderr

    restored_url = f"sqlite:///{restored / 'scenariokit.db'}"
    back = cli(
        "db", "restore", str(backup), "--artifacts", "--key-file", str(live / "scenariokit.key"),
        "--database-url", restored_url, env=env, cwd=restored,
    )  # fmt: skip
    assert back.returncode == 0, back.stderr
    assert (restored / "scenariokit.key").read_bytes() == (live / "scenariokit.key").read_bytes()
    twice = cli("db", "restore", str(backup), "--database-url", restored_url, env=env, cwd=restored)
    assert twice.returncode == 2 and "exists" in twice.stderr

    with serving(restored_url, restored, "--no-scheduler", env=env, name="restored") as (base, _):
        async with aiohttp.ClientSession() as http:
            api = Api(http, base)
            await api.wait_healthy()
            ids = await _every_id(api, "/scenarios")  # more than a page: creates run at hundreds a second
            assert {scenario["id"], *acknowledged} <= ids
            for run_id in finished:
                run = await api.call("GET", f"/run/{run_id}?limit=1000")
                assert run["status"] == "pass"
                assert any("hello from the run" in line["message"] for line in run["logs"]["items"])
            for run_id in await _every_id(api, "/run"):  # every run of the copy reads, with its log
                await api.call("GET", f"/run/{run_id}?limit=1000")
            exported = await api.call(
                "GET",
                f"/scenarios/export?ids={scenario['id']}&credentialIds={credential['id']}&includeSecrets=true",
            )
            assert SECRET in exported
            assert (await api.call("GET", f"/credentials/{credential['id']}"))["hasSecret"] is True


def test_backup_of_a_postgresql_store_points_to_pg_dump(tmp_path: Path) -> None:
    answer = cli(
        "db", "backup", str(tmp_path / "x.db"), "--database-url", "postgresql+asyncpg://u@127.0.0.1/x",
        env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 2 and "pg_dump" in answer.stderr
    assert not (tmp_path / "x.db").exists()
