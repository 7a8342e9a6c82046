"""Settings from the environment, ``/health``, and serving with ``run_server``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from api_support import Client, ClientFactory

from scenariokit.runner.parent.capacity import default_workers
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit_server import Settings, SettingsError, UnsafeBindError, create_app, run_server


def test_defaults() -> None:
    settings = Settings.from_env({})
    assert (settings.host, settings.port) == ("127.0.0.1", 13000)
    assert settings.database_url == "sqlite:///scenariokit.db"
    assert settings.artifacts_dir == Path("artifacts")
    assert settings.max_body_bytes == 5 * 1024 * 1024
    assert settings.api_tokens == () and settings.cors_origins == ()
    assert (settings.trace, settings.lease_seconds, settings.session_keepalive_seconds) == (
        "off",
        15.0,
        600.0,
    )
    assert settings.workers == default_workers()  # measured per machine: docs/deployment.md
    assert settings.run_scheduler is True and settings.insecure is False


def test_environment_variables_are_read() -> None:
    settings = Settings.from_env(
        {
            "SCENARIOKIT_DATABASE_URL": "sqlite:////data/sk/app.db",
            "SCENARIOKIT_API_TOKENS": " one-0123456789abcdef, two-0123456789abcdef ,,",
            "SCENARIOKIT_CORS_ORIGINS": "http://a.example,*",
            "SCENARIOKIT_MAX_BODY_BYTES": "1024",
            "SCENARIOKIT_SECRET_KEY": "k",
            "SCENARIOKIT_TRACE": "on-failure",
            "SCENARIOKIT_WORKERS": "3",
            "SCENARIOKIT_LEASE_SECONDS": "2.5",
            "SCENARIOKIT_SESSION_KEEPALIVE": "60",
        }
    )
    assert settings.api_tokens == ("one-0123456789abcdef", "two-0123456789abcdef")
    assert settings.cors_origins == ("http://a.example", "*")
    assert settings.artifacts_dir == Path("/data/sk/artifacts")  # beside the SQLite file
    assert (settings.max_body_bytes, settings.secret_key, settings.trace) == (1024, "k", "on-failure")
    assert (settings.workers, settings.lease_seconds, settings.session_keepalive_seconds) == (3, 2.5, 60.0)
    assert "one" not in repr(settings) and "'k'" not in repr(settings)
    run = settings.run_settings()
    assert (run.artifacts_dir, run.trace, run.lease_seconds) == (
        Path("/data/sk/artifacts"),
        "on-failure",
        2.5,
    )


def test_overrides_win_and_none_is_ignored() -> None:
    environ = {"SCENARIOKIT_ARTIFACTS_DIR": "/files", "SCENARIOKIT_WORKERS": "2"}
    settings = Settings.from_env(environ, workers=5, port=None, run_scheduler=False)
    assert (settings.workers, settings.port, settings.run_scheduler) == (5, 13000, False)
    assert settings.artifacts_dir == Path("/files")
    postgres = Settings.from_env({}, database_url="postgresql+asyncpg://u@db/sk")
    assert postgres.artifacts_dir == Path("artifacts")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SCENARIOKIT_PORT", "http"),
        ("SCENARIOKIT_PORT", "70000"),
        ("SCENARIOKIT_MAX_BODY_BYTES", "0"),
        ("SCENARIOKIT_MAX_BODY_BYTES", "5MB"),
        ("SCENARIOKIT_TRACE", "sometimes"),
        ("SCENARIOKIT_WORKERS", "-1"),
        ("SCENARIOKIT_LEASE_SECONDS", "nan"),
        ("SCENARIOKIT_SESSION_KEEPALIVE", "0"),
        ("SCENARIOKIT_SANDBOX", "docker"),
        ("SCENARIOKIT_RUN_MEMORY_MB", "lots"),
        ("SCENARIOKIT_RUN_MEMORY_MB", "8"),
        ("SCENARIOKIT_DRIVER_SNAPSHOT", "off"),
        ("SCENARIOKIT_DRIVER_ZYGOTE", "maybe"),
        ("SCENARIOKIT_BROWSER_ARGS", "--user-data-dir=/tmp/profile"),
        ("SCENARIOKIT_BROWSER_ARGS", "about:blank"),
        ("SCENARIOKIT_AUTHORING_MAX", "0"),
        ("SCENARIOKIT_AUTHORING_IDLE_SECONDS", "-5"),
    ],
)
def test_bad_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({variable: value})


def test_bad_keyword_values_are_refused() -> None:
    with pytest.raises(SettingsError, match="trace"):
        Settings(trace="never")  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match="port"):
        Settings(port=-1)


async def test_health_reports_ok(client: Client) -> None:
    response = await client.get("/health")
    assert response.status == 200
    body = await response.json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert body["browser"] in ("ok", "missing") and body["version"]
    assert body["sandbox"] in ("bubblewrap", "none")


#: this kind of machine: the service runs as root, and the memory controller is mounted (cgroup v1)
ROOT_ON_CGROUP_V1 = os.path.isdir("/sys/fs/cgroup/memory")


async def test_health_says_which_limits_each_runs_control_group_has(client: Client) -> None:
    from scenariokit.runner.confinement.cgroups import available_controllers

    body = await (await client.get("/health")).json()
    assert body["runGroups"] == list(available_controllers())
    assert set(body["runGroups"]) <= {"memory", "pids"}
    if os.geteuid() == 0 and ROOT_ON_CGROUP_V1:
        assert "memory" in body["runGroups"]


def test_browser_args_are_read_and_a_reserved_switch_stops_the_server_saying_why() -> None:
    settings = Settings.from_env({"SCENARIOKIT_BROWSER_ARGS": "--disable-software-rasterizer '--lang=de'"})
    assert settings.browser_args == ("--disable-software-rasterizer", "--lang=de")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"SCENARIOKIT_BROWSER_ARGS": "--remote-debugging-port=9222"})
    assert str(refused.value) == (
        "SCENARIOKIT_BROWSER_ARGS='--remote-debugging-port=9222' is invalid: --remote-debugging-port may not"
        " be given: it would open the browser to whoever reaches the port"
    )


def test_sandbox_settings_are_read() -> None:
    assert (Settings.from_env({}).sandbox, Settings.from_env({}).run_memory_mb) == ("auto", 2048)
    settings = Settings.from_env({"SCENARIOKIT_SANDBOX": "off", "SCENARIOKIT_RUN_MEMORY_MB": "512"})
    assert (settings.sandbox, settings.run_memory_mb) == ("off", 512)


async def test_health_says_which_sandbox_confines_the_workers(make_client: ClientFactory) -> None:
    from scenariokit.runner.confinement.sandbox import bubblewrap_works

    off = await (await make_client(sandbox="off")).get("/health")
    assert (await off.json())["sandbox"] == "none"
    auto = await (await make_client(sandbox="auto")).get("/health")
    assert (await auto.json())["sandbox"] == ("bubblewrap" if bubblewrap_works() else "none")


async def test_health_says_what_auto_left_out_without_bubblewrap(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    body = await (await (await make_client(sandbox="auto")).get("/health")).json()
    assert body["sandbox"] == "none"
    assert body["leftOut"] == [
        "bubblewrap: bwrap is not installed (not found on PATH); workers run without a sandbox "
        "(SCENARIOKIT_SANDBOX=auto)"
    ]
    off = await (await (await make_client(sandbox="off")).get("/health")).json()
    assert off["leftOut"] == []  # turned off is a choice, not something left out


@pytest.mark.browser
async def test_health_names_the_browser_build_runs_use(client: Client) -> None:
    body = await (await client.get("/health")).json()

    # this machine (and CI) has Debian's chromium-headless-shell, which discovery prefers
    assert body["browser"] == "ok"
    assert body["browserBuild"].startswith("chromium-headless-shell ")


async def test_health_reports_an_unreachable_database(make_client: ClientFactory, settings: Settings) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = await open_store(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/none", migrate=False)
    try:
        client = await make_client(create_app(settings, services=Services(store)))
        response = await client.get("/health")
        assert response.status == 503
        body = await response.json()
        assert (body["status"], body["database"]) == ("degraded", "unreachable")
    finally:
        await store.close()


async def test_app_opens_and_closes_its_own_store(aiohttp_client: object, tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/own.db", run_scheduler=False, secret_key="k")
    client = await aiohttp_client(create_app(settings))  # type: ignore[operator]
    assert (await client.post("/api/v1/environments", json={"name": "e"})).status == 201
    assert (tmp_path / "own.db").exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_run_server_serves_and_prints_its_url(tmp_path: Path) -> None:
    port = _free_port()
    code = (
        "from scenariokit_server import Settings, run_server;"
        f"run_server(Settings.from_env(port={port}, run_scheduler=False))"
    )
    environ = {**os.environ, "SCENARIOKIT_DATABASE_URL": f"sqlite:///{tmp_path}/serve.db"}
    server = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline() + server.stdout.readline()
        assert f"http://127.0.0.1:{port}" in banner
        # a liveness wait, not a speed check: CI may share the machine, and a loaded one took over 10 s
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_run_server_refuses_an_open_bind_without_tokens() -> None:
    with pytest.raises(UnsafeBindError, match="SCENARIOKIT_API_TOKENS"):
        run_server(Settings(host="0.0.0.0"))  # refused before anything binds


def test_authoring_limits_come_from_the_environment_to_the_services() -> None:
    settings = Settings.from_env(
        {"SCENARIOKIT_AUTHORING_MAX": "3", "SCENARIOKIT_AUTHORING_IDLE_SECONDS": "90"}
    )
    run = settings.run_settings()
    assert (run.authoring_max, run.authoring_idle_seconds) == (3, 90.0)
    assert (Settings().authoring_max, Settings().authoring_idle_seconds) == (2, 600.0)
