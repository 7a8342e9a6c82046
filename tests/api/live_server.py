"""The real app served on a real 127.0.0.1 port from a background thread, for clients that block."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from scenariokit_server import Settings, create_app
from scenariokit_server.boundary import server_options


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """Serve ``create_app(settings)`` on a free loopback port; yields its base URL, stops on exit."""
    started = threading.Event()
    state: dict[str, object] = {}
    stopping: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        runner = web.AppRunner(create_app(settings), access_log=None, **server_options())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        stop = asyncio.Event()
        stopping.append((asyncio.get_running_loop(), stop))
        started.set()
        await stop.wait()
        await runner.cleanup()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to the waiting test instead of dying silently
            state["error"] = exc
            started.set()

    thread = threading.Thread(target=run, name="live-server", daemon=True)
    thread.start()
    if not started.wait(timeout=30) or "error" in state:
        raise RuntimeError(f"the live server did not start: {state.get('error')!r}")
    try:
        yield str(state["url"])
    finally:
        loop, stop = stopping[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
