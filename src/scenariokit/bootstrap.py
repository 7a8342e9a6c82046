"""One place that wires a store, the services and (optionally) a scheduler from settings.

The server's ``cleanup_ctx``, ``scenariokit worker`` and the embedding API all start here.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from typing import Protocol

import pluggy

from scenariokit.runner.parent.schedule_clock import ScheduleClock
from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import RunSettings, Services
from scenariokit.storage.opening import open_store


class WiringSettings(Protocol):
    """The settings the wiring reads (the server's Settings has them all)."""

    # read-only, so frozen settings classes fit
    @property
    def database_url(self) -> str: ...

    @property
    def secret_key(self) -> str | None: ...

    @property
    def workers(self) -> int: ...

    def run_settings(self) -> RunSettings:
        """How runs execute."""
        ...


@contextlib.asynccontextmanager
async def open_services(
    settings: WiringSettings, *, plugins: pluggy.PluginManager | None = None
) -> AsyncIterator[Services]:
    """Open (and migrate) the store and yield the services over it; the store is closed afterwards."""
    store = await open_store(settings.database_url, secret_key=settings.secret_key, plugin_manager=plugins)
    try:
        yield Services(store, plugins=plugins, settings=settings.run_settings())
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def running_scheduler(services: Services, *, workers: int) -> AsyncIterator[Scheduler]:
    """Start a scheduler with ``workers`` worker processes and the schedule clock; stop both afterwards."""
    scheduler = Scheduler(services, workers=workers)
    await scheduler.start()
    clock = ScheduleClock(services)
    await clock.start()
    try:
        yield scheduler
    finally:
        await clock.close()
        await scheduler.close()


def stop_on_signals() -> asyncio.Event:
    """An event that SIGINT (Ctrl-C) or SIGTERM sets, for a long-running command to wait on.

    The signal only asks to stop, so what is starting or running can close in order. Call it from
    inside the running loop; where the loop cannot take signal handlers, the event is never set by one.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    return stop
