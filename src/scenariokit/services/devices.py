"""The devices a browser setting may name: Playwright's device list (docs/browser.md)."""

from __future__ import annotations

import asyncio

from scenariokit.domain.browser import device_names

from .base import ServiceBase


class DeviceService(ServiceBase):
    """The device names the installed Playwright knows."""

    async def names(self) -> list[str]:
        """Every device name, sorted (read once per process, on a thread: it may start the driver)."""
        return await asyncio.to_thread(device_names)
