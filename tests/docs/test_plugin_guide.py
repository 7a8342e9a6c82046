"""The plugin guide's promises: its example plugin works as written, and each hook does what it says.

Hooks of the worker processes are called through :class:`PluginHooks`, the object a worker calls them
with; the scheduler's hooks through a real run. ``test_hook_<name>`` tests are what the hook reference
meta-test looks for.
"""

from __future__ import annotations

import logging
import types
import uuid
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import ROOT, code_block
from playwright.async_api import async_playwright

import scenariokit
from json_services import json_services
from scenariokit.domain.job import RunJob
from scenariokit.domain.model import RunErrorKind
from scenariokit.plugins import HookRelay
from scenariokit.runner.worker.browser import discover_browser
from scenariokit.runner.worker.plugin_hooks import PluginHooks
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.ports import Store
from scenariokit.storage.sqlalchemy import SqlStore


def job() -> RunJob:
    return RunJob(
        run_id=uuid.uuid4(), scenario_id=uuid.uuid4(), scenario_name="s", steps=(), env_name="e", env_data={}
    )


@pytest.mark.browser
async def test_hook_run_started_and_finished_reach_the_example_plugin_of_the_guide(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    module = types.ModuleType("scenariokit_run_log")
    exec(code_block(ROOT / "docs" / "plugins.md", after="<!-- docs-example: plugin -->"), module.__dict__)
    plugins = scenariokit.get_plugin_manager()
    plugins.register(module)
    plugins.check_pending()
    caplog.set_level(logging.INFO, logger="scenariokit_run_log")

    async with scenariokit.open_kit(
        f"sqlite:///{tmp_path}/kit.db", artifacts_dir=tmp_path / "a", plugins=plugins
    ) as kit:
        env = await kit.environments.create({"name": "none", "data": {}})
        scenario = await kit.scenarios.create({"name": "says hi", "steps": [{"execCode": "print('hi')"}]})
        result = await kit.run(scenario.id, environment_id=env.id, timeout=60)

    messages = [r.getMessage() for r in caplog.records if r.name == "scenariokit_run_log"]
    assert messages[0] == f"run {result.run.id} of 'says hi' started"
    assert messages[1].startswith(f"run {result.run.id} of 'says hi' finished: pass in ")


async def test_hook_plugins_loaded_lets_the_guides_plugin_listen_only_once_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = code_block(ROOT / "docs" / "plugins.md", after="<!-- docs-example: configured-plugin -->")

    def loaded() -> tuple[Any, frozenset[str]]:
        module = types.ModuleType("my_alerts")
        exec(source, module.__dict__)
        plugins = scenariokit.get_plugin_manager(load_entry_points=False)
        plugins.register(module)  # after the manager was made: the historic hook reaches it all the same
        return plugins, HookRelay(plugins).run_finished_takes

    monkeypatch.delenv("MY_ALERTS_URL", raising=False)
    assert loaded()[1] == frozenset(), "not configured: no run hook at all"
    monkeypatch.setenv("MY_ALERTS_URL", "http://127.0.0.1:9/alerts")
    plugins, takes = loaded()
    assert takes == {"run", "scenario", "streak"}

    store = await open_store(f"sqlite:///{tmp_path}/kit.db", secret_key="k", plugin_manager=plugins)
    try:
        services = json_services(Services(store, plugins=plugins))
        env = await services.environments.create({"name": "here", "data": {}})
        scenario = await services.scenarios.create({"name": "checkout", "steps": [{"execCode": "a = 1"}]})
        run = await services.runs.create({"scenarioId": str(scenario.id), "environmentId": str(env.id)})
        assert await services.runs.claim("w") is not None
        await services.runs.fail(run.id, RunErrorKind.ERROR, "it could not start")
    finally:
        await store.close()
    assert capsys.readouterr().out == "to http://127.0.0.1:9/alerts: 'checkout' is failing\n"


async def test_hook_storage_backend_serves_the_schemes_a_plugin_claims(tmp_path: Path) -> None:
    class FolderStores:
        @scenariokit.hookimpl
        def scenariokit_storage_backend(self, url: str, secret_key: str) -> Store | None:
            if not url.startswith("folder://"):
                return None
            return SqlStore(f"sqlite:///{tmp_path}/{url.removeprefix('folder://')}.db", secret_key=secret_key)

    plugins = scenariokit.get_plugin_manager()
    plugins.register(FolderStores())

    store = await open_store("folder://checks", secret_key="k", plugin_manager=plugins)
    try:
        services = json_services(Services(store, plugins=plugins))
        await services.environments.create({"name": "kept", "data": {}})
        assert [e.name for e in (await services.environments.list()).items] == ["kept"]
    finally:
        await store.close()
    assert (tmp_path / "checks.db").is_file()
    with pytest.raises(scenariokit.ScenarioKitError, match="no storage backend serves 'nowhere' URLs"):
        await open_store("nowhere://x", plugin_manager=plugins)


def test_hook_extract_session_token_overrides_the_built_in_rule() -> None:
    class HeaderToken:
        @scenariokit.hookimpl
        def scenariokit_extract_session_token(self, storage_state: dict[str, Any]) -> str | None:
            found = [c["value"] for c in storage_state.get("cookies", []) if c["name"] == "X-Session"]
            return found[0] if found else None

    plugins = scenariokit.get_plugin_manager()
    plugins.register(HeaderToken())
    hooks = PluginHooks(plugins.hook)

    both = {"cookies": [{"name": "token", "value": "built-in"}, {"name": "X-Session", "value": "mine"}]}
    assert hooks.extract_token(both) == "mine"
    assert hooks.extract_token({"cookies": [{"name": "token", "value": "built-in"}]}) == "built-in"


@pytest.mark.browser
async def test_hook_browser_provider_launches_the_run_browser() -> None:
    launched: list[uuid.UUID] = []

    class OwnBrowsers:
        @scenariokit.hookimpl
        def scenariokit_browser_provider(self, job: RunJob) -> Any:
            async def launch(playwright: Any) -> Any:
                launched.append(job.run_id)
                return await playwright.chromium.launch(**discover_browser().launch_options())

            return launch

    plugins = scenariokit.get_plugin_manager()
    plugins.register(OwnBrowsers())
    the_job = job()
    launcher = PluginHooks(plugins.hook).browser_provider(the_job)
    assert launcher is not None
    # such a worker's driver sends Playwright's devices: the launcher is handed the Playwright object
    assert PluginHooks(plugins.hook).provides_browsers
    assert not PluginHooks(scenariokit.get_plugin_manager().hook).provides_browsers
    assert not PluginHooks(None).provides_browsers

    async with async_playwright() as playwright:
        browser = await launcher(playwright)
        try:
            page = await browser.new_page()
            await page.set_content("<h1>launched by a plugin</h1>")
            assert await page.text_content("h1") == "launched by a plugin"
        finally:
            await browser.close()
    assert launched == [the_job.run_id]
    assert PluginHooks(scenariokit.get_plugin_manager().hook).browser_provider(the_job) is None
