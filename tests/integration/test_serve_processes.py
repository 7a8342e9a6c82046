"""``scenariokit serve --processes N``: several server processes on one port, PostgreSQL only.

The processes bind the port with ``SO_REUSEPORT`` and the kernel spreads connections over them; with
SQLite the option is refused before anything is opened.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from process_checks import alive, descendants, describe
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema

SCENARIOKIT = [sys.executable, "-m", "scenariokit.cli"]
PG_BASE = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
KEY = "processes-test-secret"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on ``port`` (from /proc/net/tcp and tcp6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def _holders(pids: set[int], inodes: set[str]) -> set[int]:
    """Which of ``pids`` hold one of the sockets ``inodes``."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    found = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in wanted:
                    found.add(pid)
                    break
            except OSError:
                continue
    return found


def test_several_processes_on_sqlite_are_refused_before_anything_is_opened(tmp_path: Path) -> None:
    database = tmp_path / "serve.db"
    answer = subprocess.run(
        [*SCENARIOKIT, "serve", "--processes", "2", "--port", str(_free_port()),
         "--database-url", f"sqlite:///{database}"],
        env={**os.environ, "SCENARIOKIT_RUN_SCHEDULER": "false"}, cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert answer.returncode == 2, answer.stderr
    assert "--processes 2 needs PostgreSQL" in answer.stderr
    assert "Traceback" not in answer.stderr
    assert not database.exists(), "nothing is created before the refusal"


def test_no_process_count_below_one(tmp_path: Path) -> None:
    answer = subprocess.run(
        [*SCENARIOKIT, "serve", "--processes", "0", "--database-url", f"sqlite:///{tmp_path / 'x.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert answer.returncode == 2
    assert "--processes must be 1 or more" in answer.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.postgres
def test_two_processes_answer_on_one_port_and_stop_together(tmp_path: Path) -> None:
    schema = unique_schema("procs")
    url = f"{PG_BASE}?schema={schema}"
    port = _free_port()
    env = {**os.environ, "SCENARIOKIT_SECRET_KEY": KEY, "SCENARIOKIT_RUN_SCHEDULER": "false"}
    log = tmp_path / "serve.log"
    try:
        with log.open("wb") as out:
            server = subprocess.Popen(
                [*SCENARIOKIT, "serve", "--processes", "2", "--port", str(port), "--database-url", url],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 90
                holders: set[int] = set()
                while time.monotonic() < deadline:
                    assert server.poll() is None, log.read_text(errors="replace")
                    pids = {server.pid} | descendants(server.pid)
                    holders = _holders(pids, _listening_inodes(port))
                    if len(holders) == 2:
                        break
                    time.sleep(0.2)
                assert len(holders) == 2, f"processes listening on {port}: {holders}\n{log.read_text()}"
                assert server.pid in holders
                # the kernel spreads new connections over both; every one is answered
                for _ in range(40):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/scenarios", timeout=30) as r:
                        assert r.status == 200
                started = descendants(server.pid)
                server.send_signal(signal.SIGTERM)
                status = server.wait(timeout=60)
            finally:
                if server.poll() is None:
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait()
        output = log.read_text(errors="replace")
        assert status == 0, output
        assert "(2 processes)" in output
        assert "Traceback" not in output, output
        deadline = time.monotonic() + 15
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alive(started) == set(), describe(started)
    finally:
        asyncio.run(_drop(url))


async def _drop(url: str) -> None:
    store = SqlStore(url, secret_key=KEY)
    await store.drop_schema()
    await store.close()
