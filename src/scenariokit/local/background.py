"""An event loop on a thread of its own, for callers without one (pytest items, synchronous tests).

Everything bound to the loop (the store's engine, the scheduler, the worker pool's pipes) is created and
used on it alone; other threads hand it coroutines and wait for their results.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """An asyncio loop running on a daemon thread, started on creation, stopped by :meth:`stop`."""

    def __init__(self, name: str = "scenariokit-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the loop still takes work."""
        return self._thread.is_alive() and not self._loop.is_closed()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and block until it is done; an interrupt cancels it."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def acall(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and await it from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def stop(self) -> None:
        """Stop the loop after the work handed to it, and close it."""
        if not self.running:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.run_until_complete(self._loop.shutdown_default_executor())
        self._loop.close()
