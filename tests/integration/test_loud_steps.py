"""A step that prints a great deal passes with every line in its log, on SQLite and PostgreSQL alike.

The scheduler writes a run's new lines every quarter of a second. On PostgreSQL such a write of more
than about 6,500 lines was refused (a statement of more than 32,767 parameters): the lines were lost,
and the run failed on its step's time limit while the scheduler compiled ever larger statements.
"""

from __future__ import annotations

from pathlib import Path

import scenariokit
from scenariokit.domain.model import RunStatus
from scenariokit.storage.opening import open_store

LINES = 30_000
KEY = "loud-steps-secret-key"


async def test_a_step_that_prints_thirty_thousand_lines_passes_with_all_of_them(
    database_url: str, tmp_path: Path
) -> None:
    try:
        async with scenariokit.open_kit(
            database_url, secret_key=KEY, workers=1, artifacts_dir=tmp_path / "artifacts"
        ) as kit:
            env = await kit.environments.create({"name": "env"})
            code = f"for i in range({LINES}):\n    print('line', i)"
            scenario = await kit.scenarios.create({"name": "loud", "steps": [{"execCode": code}]})

            result = await kit.run(scenario.id, environment_id=env.id, timeout=120)

            assert result.run.status is RunStatus.PASS, result.run.error
            first = await kit.logs(result.run.id, "line ", limit=1000)
            last = await kit.logs(result.run.id, "line ", page=LINES // 1000, limit=1000)
    finally:
        if database_url.startswith("postgresql"):
            store = await open_store(database_url, secret_key=KEY, migrate=False)
            await store.drop_schema()  # type: ignore[attr-defined]
            await store.close()
    assert first.logs.total == LINES
    assert [entry.message for entry in first.logs.items][:2] == ["line 0", "line 1"]
    assert [entry.message for entry in last.logs.items][-2:] == [f"line {LINES - 2}", f"line {LINES - 1}"]
