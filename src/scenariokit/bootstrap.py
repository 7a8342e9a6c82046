"""One place that wires a store, the services and (optionally) a scheduler from settings.

The server's ``cleanup_ctx``, ``scenariokit worker`` and the embedding API all start here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

import pluggy

from scenariokit.runner.scheduler import Scheduler
from scenariokit.services import RunSettings, Services
from scenariokit.storage import open_store


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
    """Start a scheduler with ``workers`` worker processes over the services; stop it afterwards."""
    scheduler = Scheduler(services, workers=workers)
    await scheduler.start()
    try:
        yield scheduler
    finally:
        await scheduler.close()
