"""Schedules: a scenario run against some environments on a cron or an interval (docs/monitoring.md).

The cron expressions are read by ``cronsim`` (five fields, in the schedule's IANA time zone), never by
a parser of our own. What a fire claims and when the next one falls is decided here; the store makes
the claim atomic across every scheduler sharing it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs
from cronsim import CronSim, CronSimError

from scenariokit.domain.model import FieldError, camel, new_id, reports_every_field, utcnow

#: The longest interval a schedule may have: a year.
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
CRON_FIELDS = "minute hour day-of-month month day-of-week"


def valid_cron(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or len(value.split()) != 5:
        raise FieldError(camel(attribute.name), f"must be 5 fields: {CRON_FIELDS}")
    try:
        CronSim(value, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise FieldError(camel(attribute.name), f"is not a valid cron expression: {exc}") from None


def valid_interval(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INTERVAL_SECONDS:
        raise FieldError(camel(attribute.name), f"must be a whole number from 1 to {MAX_INTERVAL_SECONDS}")


def valid_timezone(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise FieldError(
            camel(attribute.name), "must be an IANA time zone such as UTC or Europe/Berlin"
        ) from None


def one_timing(cron: str | None, interval_seconds: int | None) -> None:
    """A schedule fires on a cron expression or on an interval: exactly one of them."""
    if (cron is None) == (interval_seconds is None):
        raise FieldError("cron", "give cron or intervalSeconds: exactly one of them")


@reports_every_field
@attrs.frozen
class Schedule:
    """Runs of a scenario, one per environment, queued at each fire (``cron`` or ``interval_seconds``)."""

    scenario_id: uuid.UUID
    environment_ids: tuple[uuid.UUID, ...]
    cron: str | None = attrs.field(default=None, validator=valid_cron)
    interval_seconds: int | None = attrs.field(default=None, validator=valid_interval)
    timezone: str = attrs.field(default="UTC", validator=valid_timezone)
    enabled: bool = True
    last_fired_at: datetime | None = None
    #: when it fires next; None while paused
    next_fire_at: datetime | None = None
    id: uuid.UUID = attrs.field(factory=new_id)
    created_at: datetime = attrs.field(factory=utcnow)
    updated_at: datetime = attrs.field(factory=utcnow)


def next_fire(schedule: Schedule, now: datetime) -> datetime:
    """When ``schedule`` fires next after ``now``: once, however many fires it missed.

    An interval keeps its cadence from the fire it was due for (a late claim does not drift it); a
    cron expression is read in the schedule's time zone, so a daily 02:30 in Europe/Berlin stays 02:30
    across a DST change (on the night that has no 02:30, cronsim fires at 03:00).
    """
    if schedule.interval_seconds is not None:
        step = timedelta(seconds=schedule.interval_seconds)
        anchor = schedule.next_fire_at
        if anchor is None or anchor > now + step:
            return now + step
        missed = (now - anchor) // step + 1 if anchor <= now else 0
        return anchor + missed * step
    assert schedule.cron is not None  # one_timing holds for every stored schedule
    zone = ZoneInfo(schedule.timezone)
    fire: datetime = next(CronSim(schedule.cron, now.astimezone(zone)))
    return fire.astimezone(UTC)
