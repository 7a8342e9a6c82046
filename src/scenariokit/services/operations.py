"""What operators watch, read from the store: the queue, the schedules' lag, each scenario's last outcome."""

from __future__ import annotations

from datetime import datetime

import attrs

from scenariokit.domain.model import utcnow
from scenariokit.storage.ports import QueueState, ScenarioOutcome

from .base import ServiceBase


@attrs.frozen
class Readout:
    """The store's side of the service's metrics at one moment (docs/deployment.md, "Metrics")."""

    at: datetime
    queue: QueueState
    #: the latest finished run of each scenario that has one
    outcomes: tuple[ScenarioOutcome, ...]

    @property
    def oldest_queued_seconds(self) -> float:
        """How long the oldest unclaimed run has waited; 0 when none waits."""
        oldest = self.queue.oldest_queued_at
        return max((self.at - oldest).total_seconds(), 0.0) if oldest is not None else 0.0

    @property
    def schedule_lag_seconds(self) -> float:
        """How long the earliest due schedule fire is overdue; 0 when none is (every clock keeps up).

        A clock fires within about a second of the due time, so a lag that grows means no scheduler
        sharing the store fires schedules.
        """
        due = self.queue.next_fire_at
        return max((self.at - due).total_seconds(), 0.0) if due is not None else 0.0


class OperationsService(ServiceBase):
    """Figures about the whole store, for ``/metrics``: two queries, whatever the store holds."""

    async def readout(self) -> Readout:
        """The queue, the next schedule fire and each scenario's last outcome, now."""
        async with self.ctx.uow(readonly=True) as uow:
            queue = await uow.runs.queue_state()
            outcomes = await uow.runs.last_outcomes()
        return Readout(at=utcnow(), queue=queue, outcomes=tuple(outcomes))
