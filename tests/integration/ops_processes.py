"""A `scenariokit serve` process for the operations tests (backups, JSON logs), with a small client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

SCENARIOKIT = [sys.executable, "-m", "scenariokit.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any SCENARIOKIT_* variable, plus ``extra``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("SCENARIOKIT_")}
    return {**env, **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one `scenariokit` command to its end."""
    return subprocess.run(
        [*SCENARIOKIT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


@contextlib.contextmanager
def serving(
    database_url: str, folder: Path, *extra: str, env: dict[str, str], name: str = "server"
) -> Iterator[tuple[str, Path]]:
    """`scenariokit serve` on a free port; yields its base URL and the file its standard error goes to."""
    port = free_port()
    err = folder / f"{name}.stderr"
    with (folder / f"{name}.stdout").open("wb") as out, err.open("wb") as errors:
        process = subprocess.Popen(
            [*SCENARIOKIT, "serve", "--port", str(port), "--database-url", database_url, *extra],
            env=env, cwd=folder, stdout=out, stderr=errors,
        )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", err
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Api:
    """A small REST client of the server under test."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def call(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        async with self.session.request(
            method, f"{self.base}/api/v1{path}", json=body, headers=headers
        ) as response:
            assert response.status < 300, (response.status, await response.text())
            return await response.json() if response.content_type.endswith("json") else await response.text()

    async def wait_healthy(self, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with self.session.get(f"{self.base}/health") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.25)
        raise AssertionError("the server did not become healthy")

    async def wait_run(self, run_id: str, seconds: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            run: dict[str, Any] = await self.call("GET", f"/run/{run_id}?limit=1000")
            if run["status"] != "in_progress":
                return run
            await asyncio.sleep(0.25)
        raise AssertionError(f"run {run_id} did not finish in {seconds} s")
