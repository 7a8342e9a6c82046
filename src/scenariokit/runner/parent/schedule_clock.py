"""The schedule clock: fires due schedules, beside the scheduler that runs what they queue.

Every process that runs a scheduler (the server, each ``scenariokit worker``) runs a clock too; the
store's claim makes each fire happen once however many clocks see it due (docs/monitoring.md).
"""

from __future__ import annotations

import asyncio
import logging

from scenariokit.domain.model import utcnow
from scenariokit.services import Services

log = logging.getLogger(__name__)

#: The longest a clock sleeps: a schedule created or changed by another process is seen within it.
POLL_SECONDS = 1.0
#: The shortest sleep, so a fire that failed to be stored is not retried in a busy loop.
MIN_SLEEP_SECONDS = 0.02


class ScheduleClock:
    """Fires due schedules, sleeping until the next fire the store knows of (at most ``poll_seconds``)."""

    def __init__(self, services: Services, *, poll_seconds: float = POLL_SECONDS) -> None:
        self.services = services
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start firing; a schedule that came due while no clock ran fires once now (catch-up)."""
        self._task = asyncio.create_task(self._loop(), name="scenariokit-schedules")

    async def close(self) -> None:
        """Stop firing (a fire under way is rolled back whole: its claim and its runs together)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # a cancel of close() itself still goes through
            self._task = None

    async def tick(self) -> None:
        """Fire what is due now."""
        fires = await self.services.schedules.fire_due()
        for fire in fires:
            log.info("schedule %s fired: %d run(s) queued", fire.schedule_id, len(fire.run_ids))

    async def _loop(self) -> None:
        while True:
            wait = self.poll_seconds
            try:
                await self.tick()
                upcoming = await self.services.schedules.next_due()
                if upcoming is not None:
                    wait = (upcoming - utcnow()).total_seconds()
            except Exception:
                log.exception("firing schedules failed; trying again")
            await asyncio.sleep(min(max(wait, MIN_SLEEP_SECONDS), self.poll_seconds))
