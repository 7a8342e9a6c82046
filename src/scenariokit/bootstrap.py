"""One place that wires a store, the services and (optionally) a scheduler from settings.

The server's ``cleanup_ctx``, ``scenariokit worker`` and the embedding API all start here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from typing import Protocol

import pluggy

from scenariokit.runner.confinement.sandbox import SandboxConfig
from scenariokit.runner.parent.schedule_clock import ScheduleClock
from scenariokit.runner.parent.scheduler import Scheduler
from scenariokit.services import RunSettings, Services
from scenariokit.storage.opening import open_store

log = logging.getLogger(__name__)


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


class PoolSettings(Protocol):
    """The settings of a scheduler's worker pool (the server's Settings has them all)."""

    @property
    def workers(self) -> int: ...

    @property
    def browser_args(self) -> tuple[str, ...]: ...

    def sandbox_config(self) -> SandboxConfig:
        """How workers are confined."""
        ...


@contextlib.asynccontextmanager
async def running_scheduler(
    services: Services, *, workers: int | None = None, settings: PoolSettings | None = None
) -> AsyncIterator[Scheduler]:
    """Start a scheduler and the schedule clock; stop both afterwards.

    With ``settings``, its pool has their workers, sandbox and browser switches; without them, ``workers``
    worker processes (default: one a core) set up from the ``SCENARIOKIT_*`` variables.
    """
    if settings is None:
        scheduler = Scheduler(services, workers=workers)
    else:
        scheduler = Scheduler(
            services,
            workers=settings.workers if workers is None else workers,
            browser_args=settings.browser_args,
            sandbox=settings.sandbox_config(),
        )
    await scheduler.start()
    clock = ScheduleClock(services)
    await clock.start()
    try:
        yield scheduler
    finally:
        await clock.close()
        await scheduler.close()


class StopSignals:
    """SIGINT and SIGTERM for a long-running command: the first asks to stop in order, the next at once.

    ``requested`` is set by the first signal: the command drains (docs/deployment.md, "Rolling
    restarts") and closes what it opened. ``urgent`` is set by any later one: the drain ends now.
    """

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.urgent = asyncio.Event()

    def received(self, signum: int = signal.SIGTERM) -> None:
        """A signal arrived."""
        name = signal.Signals(signum).name
        if self.requested.is_set():
            log.warning("%s again: stopping now", name)
            self.urgent.set()
        else:
            log.info("%s: stopping in order (runs under way may finish); send it again to stop now", name)
            self.requested.set()


def stop_signals(*, interrupt: bool = True) -> StopSignals:
    """Catch SIGINT (Ctrl-C) and SIGTERM for a long-running command to wait on.

    A signal only asks to stop, so what is starting or running can close in order. Call it from
    inside the running loop; where the loop cannot take signal handlers, no signal sets them.
    ``interrupt=False`` leaves SIGINT out, for a process its parent stops with SIGTERM alone.
    """
    signals = StopSignals()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM) if interrupt else (signal.SIGTERM,):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, signals.received, sig)
    return signals


def stop_on_signals() -> asyncio.Event:
    """An event the first SIGINT or SIGTERM sets (:func:`stop_signals` also tells the second apart)."""
    return stop_signals().requested
