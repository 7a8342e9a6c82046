"""The long-running commands as an operator meets them: stopped by a terminal's Ctrl-C, and what they print.

A terminal's Ctrl-C reaches every process of the foreground process group, so the worker processes a
server is still spawning die with it. The server must still stop cleanly, with no traceback and no
process left behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from process_checks import alive, descendants
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema

SCENARIOKIT = [sys.executable, "-m", "scenariokit.cli"]
PG_HOST = "127.0.0.1:5432/test"
ENV = {**os.environ, "SCENARIOKIT_SECRET_KEY": "signals-secret"}


def _is_browser(pid: int) -> bool:
    try:
        program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        return b"chrom" in program  # the program, not an argument naming it (the driver zygote's)
    except OSError:
        return False


#: Moments of the server's start-up, told apart by the processes it has started so far.
START_UP_MOMENTS = {
    "worker processes spawning": lambda pids: bool(pids),
    "browsers launching": lambda pids: any(_is_browser(pid) for pid in pids),
}


@pytest.mark.browser
@pytest.mark.parametrize("moment", list(START_UP_MOMENTS))
def test_ctrl_c_to_the_process_group_while_serve_starts_stops_it_cleanly(tmp_path: Path, moment: str) -> None:
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*SCENARIOKIT, "serve", "--port", "0", "--workers", "2",
             "--database-url", f"sqlite:///{tmp_path / 'serve.db'}"],
            env=ENV, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
        )  # fmt: skip
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while not START_UP_MOMENTS[moment](seen) and time.monotonic() < deadline:
            seen |= descendants(server.pid)  # every process it starts, to check none outlives it
            time.sleep(0.02)
        assert seen, "the server started no process within 60 s"
        os.killpg(server.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        try:
            status = server.wait(timeout=60)
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()

    output = log.read_text(errors="replace")
    assert status == 0, output
    assert "Traceback" not in output and "ERROR" not in output, output
    deadline = time.monotonic() + 15
    while alive(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(seen) == set(), "a worker or browser outlived the server"


@pytest.mark.postgres
@pytest.mark.browser
def test_a_worker_never_prints_the_database_password(tmp_path: Path) -> None:
    schema = unique_schema("pw")
    url = f"postgresql+asyncpg://postgres:hunter2@{PG_HOST}?schema={schema}"  # trust auth ignores it
    worker = subprocess.Popen(
        [*SCENARIOKIT, "worker", "--workers", "1", "--database-url", url],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        lines = []
        for line in worker.stdout:
            lines.append(line)
            if "Ctrl-C to stop" in line:
                break
    finally:
        worker.send_signal(signal.SIGTERM)
        rest, _ = worker.communicate(timeout=60)
        asyncio.run(_drop(url))

    output = "".join(lines) + rest
    assert "postgres:***@127.0.0.1" in output, output
    assert "hunter2" not in output


async def _drop(url: str) -> None:
    store = await open_store(url, secret_key="signals-secret", migrate=False)
    assert isinstance(store, SqlStore)
    await store.drop_schema()
    await store.close()
