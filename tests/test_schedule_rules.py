"""When a schedule fires next: cron in its time zone across DST changes, intervals that keep cadence."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scenariokit.domain.model import FieldErrors
from scenariokit.domain.schedule import Schedule, next_fire


def _cron(expression: str, timezone: str = "UTC") -> Schedule:
    return Schedule(
        scenario_id=uuid.uuid4(), environment_ids=(uuid.uuid4(),), cron=expression, timezone=timezone
    )


def test_a_cron_is_read_in_its_time_zone() -> None:
    weekdays = _cron("0 9 * * 1-5", "America/New_York")
    friday_evening = datetime(2026, 11, 20, 23, 0, tzinfo=UTC)  # 18:00 in New York (EST, UTC-5)
    assert next_fire(weekdays, friday_evening) == datetime(2026, 11, 23, 14, 0, tzinfo=UTC)  # Monday 09:00


def test_a_daily_cron_keeps_its_local_time_across_both_dst_changes() -> None:
    nightly = _cron("30 2 * * *", "Europe/Berlin")
    # spring forward (2026-03-29): 02:30 does not exist; it fires at 03:00 CEST, 01:00 UTC
    assert next_fire(nightly, datetime(2026, 3, 28, 12, tzinfo=UTC)) == datetime(
        2026, 3, 29, 1, 0, tzinfo=UTC
    )
    # the day after, 02:30 CEST again: 00:30 UTC
    assert next_fire(nightly, datetime(2026, 3, 29, 12, tzinfo=UTC)) == datetime(
        2026, 3, 30, 0, 30, tzinfo=UTC
    )
    # fall back (2026-10-25): 02:30 happens twice, the schedule fires at the first (CEST, 00:30 UTC) only
    assert next_fire(nightly, datetime(2026, 10, 24, 12, tzinfo=UTC)) == datetime(
        2026, 10, 25, 0, 30, tzinfo=UTC
    )
    assert next_fire(nightly, datetime(2026, 10, 25, 0, 30, tzinfo=UTC)) == datetime(
        2026, 10, 26, 1, 30, tzinfo=UTC
    )


def test_an_interval_fires_once_after_downtime_and_keeps_its_cadence() -> None:
    due = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    every_ten = Schedule(
        scenario_id=uuid.uuid4(), environment_ids=(uuid.uuid4(),), interval_seconds=10, next_fire_at=due
    )
    late = due + timedelta(seconds=95)  # nine fires missed
    assert next_fire(every_ten, late) == due + timedelta(seconds=100)  # one catch-up now, then on cadence
    assert next_fire(every_ten, due) == due + timedelta(seconds=10)
    fresh = Schedule(scenario_id=uuid.uuid4(), environment_ids=(uuid.uuid4(),), interval_seconds=10)
    assert next_fire(fresh, late) == late + timedelta(seconds=10)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "* * *"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 0 * * * *"}, "cron"),
        ({"interval_seconds": 0}, "intervalSeconds"),
        ({"interval_seconds": 1.5}, "intervalSeconds"),
        ({"cron": "0 * * * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"cron": "0 * * * *", "timezone": "../../etc/passwd"}, "timezone"),
    ],
)
def test_bad_timing_is_refused_naming_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(FieldErrors) as refused:
        Schedule(scenario_id=uuid.uuid4(), environment_ids=(uuid.uuid4(),), **fields)  # type: ignore[arg-type]
    assert field in refused.value.errors
