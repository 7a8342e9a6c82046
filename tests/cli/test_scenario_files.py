"""The core under ``scenariokit run`` and the pytest plugin: reading files, choosing environments.

No browser starts here: these are the rules decided before a run, and the watchdog for a runner that
never picks a run up.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from scenariokit.local import runner as local_runner
from scenariokit.local.runner import LocalRunner, open_local_runner
from scenariokit.local.scenario_files import ScenarioFileError, read_environment_file, read_scenario_file

ENV_ID = uuid.UUID("0b6f3c1e-5d2a-4c8e-9f1b-2a7d4e6c8b10")

TWO_ENVIRONMENTS = f"""\
# environments
---
kind: environment
id: {ENV_ID}
name: local
data: {{url: "http://127.0.0.1:1/"}}
---
kind: environment
name: staging
data: {{url: "http://127.0.0.1:2/"}}
# scenarios
---
kind: scenario
name: bound
environmentId: {ENV_ID}
---
kind: scenario
name: first unbound
---
kind: scenario
name: second unbound
"""


@pytest_asyncio.fixture
async def runner(tmp_path: Path) -> AsyncIterator[LocalRunner]:
    """A local runner whose workers are never started by these tests."""
    async with open_local_runner(artifacts_dir=tmp_path / "artifacts") as opened:
        yield opened


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


async def test_scenarios_without_ids_map_to_the_records_the_import_created(
    runner: LocalRunner, tmp_path: Path
) -> None:
    loaded = await runner.load(write(tmp_path, "two.scenario.yaml", TWO_ENVIRONMENTS))

    names = [(await runner.kit.scenarios.get(loaded.scenario_id(e))).name for e in loaded.source.scenarios]
    assert names == ["bound", "first unbound", "second unbound"]
    assert await runner.load(loaded.source.path) is loaded, "a file is imported once"


async def test_the_environment_is_the_named_one_the_files_the_own_or_the_only_one(
    runner: LocalRunner, tmp_path: Path
) -> None:
    loaded = await runner.load(write(tmp_path, "two.scenario.yaml", TWO_ENVIRONMENTS))
    bound, unbound, _ = loaded.source.scenarios
    env_file = write(tmp_path, "ci.env.yaml", "kind: environment\nname: ci\ndata:\n  url: http://ci/\n")

    staging = await runner.environment_for(loaded, unbound, "staging")
    from_file = await runner.environment_for(loaded, unbound, str(env_file))
    inline = await runner.environment_for(loaded, unbound, {"url": "http://inline/"})

    assert (await runner.kit.environments.get(staging)).name == "staging"
    assert (await runner.kit.environments.get(from_file)).data == {"url": "http://ci/"}
    assert await runner.environment_for(loaded, unbound, env_file) == from_file, "created once"
    assert (await runner.kit.environments.get(inline)).data == {"url": "http://inline/"}
    assert await runner.environment_for(loaded, bound) == ENV_ID
    with pytest.raises(ScenarioFileError, match="names no environment and the file holds 2"):
        await runner.environment_for(loaded, unbound)
    with pytest.raises(ScenarioFileError, match=r"no environment named 'prod' .*'local', 'staging'"):
        await runner.environment_for(loaded, unbound, "prod")
    with pytest.raises(ScenarioFileError, match="no such environment file"):
        await runner.environment_for(loaded, unbound, "missing.yaml")


async def test_a_file_of_snippets_lends_them_and_may_not_mix_with_scenarios(
    runner: LocalRunner, tmp_path: Path
) -> None:
    snippet = "kind: snippet\nalias: greet\ntitle: Greet\ncode: return 'hi'\n"
    loaded = await runner.load(write(tmp_path, "greet.snippet.yaml", snippet))

    assert loaded.source.kind == "snippet" and loaded.source.scenarios == ()
    assert (await runner.kit.snippets.get_by_alias("greet")).code == "return 'hi'"
    with pytest.raises(ScenarioFileError, match="snippets cannot share a file with scenarios"):
        read_scenario_file(write(tmp_path, "mixed.yaml", snippet + "---\nkind: scenario\nname: s\n"))


def test_an_environment_file_holds_exactly_one_environment(tmp_path: Path) -> None:
    two = write(tmp_path, "two.env.yaml", "name: a\n---\nname: b\n")

    with pytest.raises(ScenarioFileError, match="exactly one environment document"):
        read_environment_file(two)


async def test_an_import_the_store_refuses_names_the_file_and_the_line(
    runner: LocalRunner, tmp_path: Path
) -> None:
    bad = write(tmp_path, "bad.scenario.yaml", "kind: scenario\nname: s\nsteps:\n  - title: no code\n")

    with pytest.raises(ScenarioFileError, match=r"bad\.scenario\.yaml: the import was refused: .*line 4"):
        await runner.load(bad)


async def test_a_run_no_worker_picks_up_is_given_up_instead_of_waited_on_forever(
    runner: LocalRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def never_started() -> None:
        return None

    monkeypatch.setattr(runner.kit, "start_runner", never_started)
    monkeypatch.setattr(local_runner, "QUEUE_STALL_SECONDS", 0.3)
    loaded = await runner.load(write(tmp_path, "two.scenario.yaml", TWO_ENVIRONMENTS))
    bound = loaded.source.scenarios[0]

    outcome = await runner.run(loaded, bound, environment_id=ENV_ID)

    assert not outcome.passed and outcome.kind == "cancelled"


async def test_a_scenario_exported_without_its_environment_runs_against_the_chosen_one(
    runner: LocalRunner, tmp_path: Path
) -> None:
    elsewhere = uuid.uuid4()
    text = f"kind: scenario\nname: s\nenvironmentId: {elsewhere}\nsteps:\n  - execCode: pass\n"
    loaded = await runner.load(write(tmp_path, "bare.scenario.yaml", text))
    (entry,) = loaded.source.scenarios

    chosen = await runner.environment_for(loaded, entry, {"url": "http://chosen/"})

    assert (await runner.kit.environments.get(chosen)).data == {"url": "http://chosen/"}
    with pytest.raises(ScenarioFileError, match=f"environment {elsewhere}, which the file does not hold"):
        await runner.environment_for(loaded, entry)
