"""helpers.fake: the generator's promises, and the hook through real runs in Chromium."""

from __future__ import annotations

import re
import string
import uuid
from pathlib import Path

import pytest
from scenariokit_fake_data import FakeData, scenariokit_step_helpers

import scenariokit
from scenariokit import RunStatus
from scenariokit.domain.job import RunJob


def job(env_data: dict[str, object] | None = None) -> RunJob:
    return RunJob(
        run_id=uuid.uuid4(),
        scenario_id=uuid.uuid4(),
        scenario_name="s",
        steps=(),
        env_name="e",
        env_data=dict(env_data or {}),
    )


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data() -> None:
    def sample(seed: int) -> list[str]:
        fake = FakeData(seed)
        return [fake.name(), fake.email(), fake.password(), fake.uuid(), fake.date(), fake.sentence()]

    assert sample(7) == sample(7)
    assert sample(7) != sample(8)


def test_values_are_plainly_fake_and_well_formed() -> None:
    fake = FakeData(1)
    emails = {fake.email() for _ in range(200)}
    password = fake.password(12)

    assert len(emails) == 200, "e-mail addresses never repeat within a generator"
    assert all(re.fullmatch(r"[a-z.]+\d+\.\d{4}@example\.com", email) for email in emails)
    assert len(password) == 12
    for pool in (string.ascii_lowercase, string.ascii_uppercase, string.digits):
        assert any(ch in pool for ch in password)
    assert re.fullmatch(r"\+1 555-01\d\d", fake.phone())
    assert "1999-12-31" <= fake.date("1999-12-31", "2000-01-01") <= "2000-01-01"
    assert uuid.UUID(fake.uuid()).version == 4
    with pytest.raises(ValueError):
        fake.password(4)


def test_hook_step_helpers_seeds_from_the_environment_else_the_run() -> None:
    seeded = scenariokit_step_helpers(job=job({"fakeSeed": 42}))["fake"]
    unseeded = job()

    assert seeded.seed == 42
    assert scenariokit_step_helpers(job=unseeded)["fake"].seed == unseeded.run_id.int


@pytest.mark.browser
async def test_step_code_fills_a_form_with_helpers_fake_in_a_real_run(tmp_path: Path) -> None:
    code = (
        "await page.set_content('<input id=email><input id=password type=password>')\n"
        "email = helpers.fake.email()\n"
        "await page.fill('#email', email)\n"
        "await page.fill('#password', helpers.fake.password())\n"
        "assert await page.input_value('#email') == email\n"
        "print('seed', helpers.fake.seed, 'email', email)"
    )
    async with scenariokit.open_kit(f"sqlite:///{tmp_path}/kit.db", artifacts_dir=tmp_path / "a") as kit:
        env = await kit.environments.create({"name": "seeded", "data": {"fakeSeed": 42}})
        scenario = await kit.scenarios.create({"name": "sign up", "steps": [{"execCode": code}]})
        first = await kit.run(scenario.id, environment_id=env.id, timeout=60)
        second = await kit.run(scenario.id, environment_id=env.id, timeout=60)

    assert first.run.status is RunStatus.PASS, first.run.error
    printed = [
        [line.message for line in result.logs.items if line.message.startswith("seed")]
        for result in (first, second)
        if result.logs is not None
    ]
    assert printed[0] == printed[1] == [f"seed 42 email {FakeData(42).email()}"]
