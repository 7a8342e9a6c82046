"""Settings given as keywords reach the scheduler's pool: its sandbox, its limits and its browser's switches.

A server embedded with ``create_app(Settings(...))`` runs as its keywords say, whatever the
``SCENARIOKIT_*`` variables of its process hold; a keyword value is checked as the variable's is.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from api_support import API, ClientFactory, created

from scenariokit.runner.confinement.sandbox import ResourceLimits, SandboxConfig
from scenariokit_server import Settings, SettingsError, keys

HAS_WEBGL = "() => document.createElement('canvas').getContext('webgl') !== null"


def test_the_pool_settings_are_taken_from_the_keywords() -> None:
    settings = Settings(sandbox="off", run_memory_mb=512, driver_snapshot=False, driver_zygote=False)
    assert settings.sandbox_config() == SandboxConfig(
        mode="off", limits=ResourceLimits(memory_mb=512), driver_snapshot=False, driver_zygote=False
    )
    assert Settings().sandbox_config() == SandboxConfig()


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"SCENARIOKIT_SANDBOX": "off", "SCENARIOKIT_RUN_MEMORY_MB": "256"},
        {"SCENARIOKIT_SANDBOX": " bubblewrap ", "SCENARIOKIT_DRIVER_SNAPSHOT": "no"},
        {"SCENARIOKIT_DRIVER_ZYGOTE": "0", "SCENARIOKIT_RUN_MEMORY_MB": ""},
    ],
)
def test_the_server_and_the_library_read_the_pool_variables_alike(environ: dict[str, str]) -> None:
    # one table (SANDBOX_SETTINGS) maps the variables for both: the server's Settings and a bare pool's
    assert Settings.from_env(environ).sandbox_config() == SandboxConfig.from_env(environ)


def test_a_setting_given_to_the_library_wins_over_its_variable() -> None:
    environ = {"SCENARIOKIT_SANDBOX": "bubblewrap", "SCENARIOKIT_DRIVER_ZYGOTE": "no"}
    config = SandboxConfig.from_env(environ, sandbox="off", run_memory_mb=128, driver_zygote=True)
    assert config == SandboxConfig(mode="off", limits=ResourceLimits(memory_mb=128), driver_zygote=True)
    assert SandboxConfig.from_env(environ, pass_env=("MARK",)).pass_env == ("MARK",)


def test_a_bad_pool_variable_is_refused_by_both() -> None:
    environ = {"SCENARIOKIT_DRIVER_ZYGOTE": "maybe"}
    with pytest.raises(SettingsError, match="SCENARIOKIT_DRIVER_ZYGOTE='maybe' is invalid"):
        Settings.from_env(environ)
    with pytest.raises(ValueError, match="SCENARIOKIT_DRIVER_ZYGOTE='maybe' is invalid: must be one of true"):
        SandboxConfig.from_env(environ)  # the library names the variable as the server does


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        (
            {"browser_args": ["--lang=de", "--user-data-dir=/tmp/profile"]},
            "browser_args: --user-data-dir may not be given: each run's browser profile is the runner's own",
        ),
        (
            {"browser_args": ["about:blank"]},
            "browser_args: 'about:blank' is not a switch: each word must be --name or --name=value",
        ),
        ({"browser_args": [None]}, "browser_args: None is not a switch: each must be a string"),
        ({"run_memory_mb": 10}, "run_memory_mb must be a whole number of MiB, at least 64, got 10"),
    ],
)
def test_a_keyword_value_is_checked_as_its_variable_is(keywords: dict[str, Any], said: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings(**keywords)
    assert str(refused.value).startswith(said)


@pytest.mark.browser
async def test_keyword_settings_win_over_the_variables_in_the_runs_of_a_served_app(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read from the environment, either variable would stop the pool: the switch is refused, and
    # bubblewrap is asked for where the keyword turns the sandbox off.
    monkeypatch.setenv("SCENARIOKIT_BROWSER_ARGS", "--user-data-dir=/tmp/profile")
    monkeypatch.setenv("SCENARIOKIT_SANDBOX", "bubblewrap")
    client = await make_client(
        run_scheduler=True, sandbox="off", run_memory_mb=512, browser_args=["--disable-software-rasterizer"]
    )
    assert client.server.app[keys.SCHEDULER].pool.sandbox_kind == "none"

    environment = await created(client, f"{API}/environments", {"name": "local", "data": {}})
    step = {"title": "no WebGL", "execCode": f"assert not await page.evaluate({HAS_WEBGL!r})"}
    scenario = await created(client, f"{API}/scenarios", {"name": "switches", "steps": [step]})
    body = {"scenarioId": scenario["id"], "environmentId": environment["id"]}
    run = await created(client, f"{API}/run", body)
    for _ in range(600):
        read = await (await client.get(f"{API}/run/{run['id']}")).json()
        if read["status"] != "in_progress":
            break
        await asyncio.sleep(0.1)
    assert (read["status"], read["error"]) == ("pass", None)
