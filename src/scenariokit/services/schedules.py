"""Use cases of schedules: create, read, change, pause and delete them, and fire those that are due."""

from __future__ import annotations

import builtins
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from scenariokit.domain.errors import NotFound, ValidationError
from scenariokit.domain.model import Run, utcnow
from scenariokit.domain.schedule import Schedule, next_fire
from scenariokit.formats.inputs import Patch, ScheduleInput
from scenariokit.formats.queries import Page, ScheduleQuery
from scenariokit.storage.ports import UnitOfWork

from . import audit
from .base import ServiceBase, missing_reference, require
from .runs import recorded_browser

log = logging.getLogger(__name__)

_FIELDS = ("scenario_id", "environment_ids", "cron", "interval_seconds", "timezone", "enabled")
#: fields whose change moves the next fire (it is computed again from now)
_TIMING = frozenset({"cron", "interval_seconds", "timezone", "enabled"})
#: schedules fired per pass of a clock; the rest wait for the next pass
FIRE_BATCH = 50


@attrs.frozen
class Fire:
    """One fire of a schedule: the runs it queued (one per environment that still exists)."""

    schedule_id: uuid.UUID
    fired_at: datetime
    run_ids: tuple[uuid.UUID, ...]


class ScheduleService(ServiceBase):
    """Schedules (docs/monitoring.md, "Schedules")."""

    async def list(self, query: ScheduleQuery | None = None) -> Page[Schedule]:
        """One page of schedules."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.schedules.list(query or ScheduleQuery())

    async def get(self, schedule_id: uuid.UUID) -> Schedule:
        """One schedule."""
        async with self.ctx.uow(readonly=True) as uow:
            return require(await uow.schedules.get(schedule_id), "schedule", schedule_id)

    async def create(self, command: ScheduleInput) -> Schedule:
        """Create a schedule; enabled, its first fire is one interval (or the cron's next time) away."""
        async with self.ctx.uow() as uow:
            await self._check_references(uow, command)
            schedule = schedule_from_input(command, None)
            await uow.schedules.add(schedule)
            await audit.record(uow, "create", "schedule", schedule.id, f"created {_described(schedule)}")
            await uow.commit()
        return schedule

    async def replace(self, schedule_id: uuid.UUID, command: ScheduleInput) -> Schedule:
        """Replace a schedule (PUT)."""
        async with self.ctx.uow() as uow:
            old = require(await uow.schedules.get(schedule_id, lock=True), "schedule", schedule_id)
            return await self._save(uow, old, command)

    async def update(self, schedule_id: uuid.UUID, patch: Patch[ScheduleInput]) -> Schedule:
        """Change some fields of a schedule (PATCH); ``enabled: false`` pauses it, ``true`` resumes it."""
        async with self.ctx.uow() as uow:
            old = require(await uow.schedules.get(schedule_id, lock=True), "schedule", schedule_id)
            current = {name: getattr(old, name) for name in _FIELDS}
            return await self._save(uow, old, patch.applied_to(current, ScheduleInput))

    async def delete(self, schedule_id: uuid.UUID) -> None:
        """Delete a schedule; the runs it queued stay."""
        async with self.ctx.uow() as uow:
            if not await uow.schedules.delete(schedule_id):
                raise NotFound("schedule", schedule_id)
            await audit.record(uow, "delete", "schedule", schedule_id, f"deleted schedule {schedule_id}")
            await uow.commit()

    async def fire_due(self, now: datetime | None = None) -> builtins.list[Fire]:
        """Fire every schedule that is due, each exactly once across all schedulers sharing the store.

        A schedule that missed fires (every scheduler was down) fires once and moves on to its next
        time after ``now``: one catch-up, not a burst.
        """
        now = now or utcnow()
        async with self.ctx.uow(readonly=True) as uow:
            due = await uow.schedules.due(now, FIRE_BATCH)
        fires = []
        for schedule in due:
            fire = await self._fire(schedule, now)
            if fire is not None:
                fires.append(fire)
        if any(fire.run_ids for fire in fires):
            self.ctx.control.run_queued()
        return fires

    async def next_due(self) -> datetime | None:
        """When the earliest enabled schedule fires next, or None."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.schedules.next_due()

    async def _fire(self, schedule: Schedule, now: datetime) -> Fire | None:
        assert schedule.next_fire_at is not None  # due() lists only schedules with a next fire
        async with self.ctx.uow() as uow:
            claimed = await uow.schedules.claim_fire(
                schedule.id, due_at=schedule.next_fire_at, fired_at=now, next_fire_at=next_fire(schedule, now)
            )
            if not claimed:
                return None  # another scheduler took this fire
            scenario = await uow.scenarios.get(schedule.scenario_id)  # deleted: the schedule went with it
            found = {env.id: env for env in await uow.environments.get_many(schedule.environment_ids)}
            batch_id = uuid.uuid4() if len(schedule.environment_ids) > 1 else None
            runs = [
                Run(
                    scenario_id=scenario.id,
                    scenario_name=scenario.name,
                    environment_id=environment_id,
                    schedule_id=schedule.id,
                    batch_id=batch_id,
                    browser=await recorded_browser(uow, scenario, found[environment_id], strict=False),
                )
                for environment_id in schedule.environment_ids
                if scenario is not None and environment_id in found
            ]
            for run in runs:
                await uow.runs.add(run)
            await audit.record(
                uow, "fire", "schedule", schedule.id, f"queued {len(runs)} run(s)", door="schedule"
            )
            await uow.commit()
        if len(runs) < len(schedule.environment_ids):
            skipped = len(schedule.environment_ids) - len(runs)
            log.warning("schedule %s fired without %d deleted environment(s)", schedule.id, skipped)
        return Fire(schedule_id=schedule.id, fired_at=now, run_ids=tuple(run.id for run in runs))

    async def _save(self, uow: UnitOfWork, old: Schedule, command: ScheduleInput) -> Schedule:
        await self._check_references(uow, command)
        new = schedule_from_input(command, old)
        await uow.schedules.update(new)
        await audit.record(uow, "update", "schedule", new.id, f"changed {_described(new)}")
        await uow.commit()
        return new

    @staticmethod
    async def _check_references(uow: UnitOfWork, command: ScheduleInput) -> None:
        await check_schedule_references(uow, command)


async def check_schedule_references(uow: UnitOfWork, command: ScheduleInput) -> None:
    """The scenario and every environment a schedule names exist (400 naming the field otherwise)."""
    if await uow.scenarios.get(command.scenario_id) is None:
        raise missing_reference("scenarioId", "scenario", command.scenario_id)
    found = {env.id for env in await uow.environments.get_many(command.environment_ids)}
    missing = {
        f"environmentIds[{i}]": f"no environment with id {ident}"
        for i, ident in enumerate(command.environment_ids)
        if ident not in found
    }
    if missing:
        raise ValidationError("environmentIds refers to missing environments", missing)


def _described(schedule: Schedule) -> str:
    timing = f"cron {schedule.cron!r}" if schedule.cron else f"every {schedule.interval_seconds} s"
    state = "" if schedule.enabled else ", paused"
    return f"schedule of scenario {schedule.scenario_id} ({timing}{state})"


def _fields(command: ScheduleInput) -> Mapping[str, Any]:
    return {name: getattr(command, name) for name in _FIELDS}


def schedule_from_input(command: ScheduleInput, old: Schedule | None) -> Schedule:
    """The schedule a checked input describes (laid over ``old``), its next fire counted from now
    when it is new or its timing (cron, interval, time zone, enabled) changed."""
    if old is None:
        return _timed(Schedule(**_fields(command)))
    new = attrs.evolve(old, **_fields(command), updated_at=max(utcnow(), old.updated_at))
    if any(getattr(new, name) != getattr(old, name) for name in _TIMING):
        new = _timed(new)
    return new


def _timed(schedule: Schedule) -> Schedule:
    """The schedule with its next fire counted from now (None while paused)."""
    if not schedule.enabled:
        return attrs.evolve(schedule, next_fire_at=None)
    fresh = attrs.evolve(schedule, next_fire_at=None)
    return attrs.evolve(schedule, next_fire_at=next_fire(fresh, utcnow()))
