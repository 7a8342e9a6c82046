"""The Playwright driver's start-up snapshot: how it is built, sealed, given to workers, and left aside.

The launcher and the worker's command are checked as they are written; the snapshot itself is built by
the real Node shipped with Playwright and started the way a worker's Playwright starts its driver.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from scenariokit.domain.job import LogEvent, RunEvent, RunFinished, RunJob
from scenariokit.runner.confinement import driver_snapshot, sandbox
from scenariokit.runner.confinement.driver_snapshot import (
    BLOB_NAME,
    DEVICES_ENV,
    DRIVER_TUNABLES,
    LAUNCHER_NAME,
    NODE_PATH_ENV,
    SANDBOX_DRIVER_SNAPSHOT,
    WARM_UP_FAILED,
    bundled_driver,
    driver_tunables,
    launcher_script,
    seal_driver_snapshot,
    snapshot_builder,
    warm_up_options,
)
from scenariokit.runner.confinement.sandbox import (
    NodeCache,
    SandboxConfig,
    SandboxMode,
    bubblewrap_works,
    worker_command,
)
from scenariokit.runner.parent import executor
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.worker.browser import discover_browser

TEST_UID = 0x7000_0000 + 4000


def test_a_worker_starts_the_driver_through_the_launcher_of_a_snapshot_bound_read_only(
    tmp_path: Path,
) -> None:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    user = TEST_UID if os.geteuid() == 0 else None
    cache = NodeCache(snapshot=snapshot)

    boxed = worker_command("bubblewrap", tmp_path, SandboxConfig(), None, 3, "/usr/bin/bwrap", user, cache)
    plain = worker_command("none", tmp_path, SandboxConfig(), None, 3, node_cache=cache)

    joined = " ".join(boxed.argv)
    assert f"--ro-bind {snapshot} {SANDBOX_DRIVER_SNAPSHOT} " in joined
    assert boxed.env[NODE_PATH_ENV] == f"{SANDBOX_DRIVER_SNAPSHOT}/{LAUNCHER_NAME}"
    assert plain.env[NODE_PATH_ENV] == str(snapshot / LAUNCHER_NAME)
    assert sandbox.NODE_CACHE_ENV not in plain.env  # no compile cache given, none named
    assert NODE_PATH_ENV not in worker_command("none", tmp_path, SandboxConfig(), None, 3).env
    assert (
        NODE_PATH_ENV
        not in worker_command("none", tmp_path, SandboxConfig(), None, 3, node_cache=NodeCache()).env
    )


def test_a_sealed_snapshot_is_read_only_and_a_build_that_wrote_no_blob_is_none(tmp_path: Path) -> None:
    folder = tmp_path / "snapshot"
    folder.mkdir()
    (folder / LAUNCHER_NAME).write_text("#!/bin/sh\n")
    assert seal_driver_snapshot(folder) is None  # no blob
    (folder / BLOB_NAME).write_bytes(b"")
    assert seal_driver_snapshot(folder) is None  # an empty one

    (folder / BLOB_NAME).write_bytes(b"blob")
    assert seal_driver_snapshot(folder) == folder
    assert (folder / BLOB_NAME).stat().st_mode & 0o777 == 0o444
    assert (folder / LAUNCHER_NAME).stat().st_mode & 0o777 == 0o555
    assert folder.stat().st_mode & 0o777 == 0o555
    sandbox.remove_dir(folder)  # the pool removes it, read-only or not
    assert not folder.exists()


def _fake_driver(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A "Node" that prints its arguments, a driver package, and a launcher folder for them."""
    node = tmp_path / "bin" / "node"
    node.parent.mkdir()
    node.write_text('#!/bin/sh\necho "$@"\n')
    node.chmod(0o755)
    package = tmp_path / "package"
    (package / "lib").mkdir(parents=True)
    (package / "lib" / "coreBundle.js").write_text("")
    folder = tmp_path / "snapshot"
    folder.mkdir()
    launcher = folder / LAUNCHER_NAME
    launcher.write_text(launcher_script(node, package))
    launcher.chmod(0o755)
    return node, package, launcher


def _started(launcher: Path) -> str:
    return subprocess.run(
        [launcher, "cli.js", "run-driver"], capture_output=True, text=True, check=True
    ).stdout


def test_the_launcher_starts_node_from_the_blob_beside_it_only_while_the_blob_is_newer_than_the_driver(
    tmp_path: Path,
) -> None:
    node, package, launcher = _fake_driver(tmp_path)
    blob = launcher.parent / BLOB_NAME
    assert _started(launcher) == "cli.js run-driver\n"  # no blob: the ordinary start

    blob.write_bytes(b"blob")
    past = blob.stat().st_mtime - 3600
    os.utime(node, (past, past))
    os.utime(package / "lib" / "coreBundle.js", (past, past))
    assert _started(launcher) == f"--snapshot-blob {blob} cli.js run-driver\n"

    os.utime(package / "lib" / "coreBundle.js", (past + 7200, past + 7200))  # the driver upgraded since
    assert _started(launcher) == "cli.js run-driver\n"
    os.utime(package / "lib" / "coreBundle.js", (past, past))
    os.utime(node, (past + 7200, past + 7200))  # Node upgraded since
    assert _started(launcher) == "cli.js run-driver\n"


@pytest.mark.parametrize("given", [None, "glibc.malloc.arena_max=2"])
def test_the_launcher_gives_node_huge_pages_for_large_allocations_after_any_tunables_it_was_given(
    tmp_path: Path, given: str | None
) -> None:
    node, _, launcher = _fake_driver(tmp_path)
    node.write_text('#!/bin/sh\necho "$GLIBC_TUNABLES"\n')
    env = {"PATH": os.defpath} | ({"GLIBC_TUNABLES": given} if given else {})
    printed = subprocess.run([launcher], env=env, capture_output=True, text=True, check=True).stdout
    assert printed == (f"{given}:{DRIVER_TUNABLES}" if given else DRIVER_TUNABLES) + "\n"
    assert printed == driver_tunables(env) + "\n"  # the snapshot is built with what the launcher gives


# --- with the real driver ------------------------------------------------------------------------------


def _build(
    base: Path, warm_up: dict[str, object] | None
) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, str]]:
    """Build a snapshot of the real driver in ``base`` as the pool does (with ``warm_up``, warmed up)."""
    folder, scratch = base / "snapshot", base / "scratch"
    for sub in ("home", "tmp", "warm-up"):
        (scratch / sub).mkdir(parents=True)
    env = worker_command("none", scratch, SandboxConfig(), None, 0, node_cache=NodeCache(snapshot=folder)).env
    command = snapshot_builder(folder, env, warm_up)
    assert command is not None
    argv, build_env = command
    done = subprocess.run(argv, env=build_env, cwd=scratch, capture_output=True, text=True, timeout=120)
    return folder, done, build_env


def _sealed(base: Path, warm_up: dict[str, object] | None) -> tuple[Path, dict[str, str]]:
    if bundled_driver() is None:
        pytest.skip("this Playwright ships no Node.js of its own")
    folder, done, env = _build(base, warm_up)
    assert done.returncode == 0, done.stderr[-2000:]
    assert seal_driver_snapshot(folder) == folder
    return folder, env


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A snapshot of the real driver, built as the pool builds it; and the environment it was built in."""
    return _sealed(tmp_path_factory.mktemp("driver-snapshot"), None)


@pytest.fixture(scope="module")
def warmed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A snapshot of the real driver warmed up with the browser the workers use."""
    base = tmp_path_factory.mktemp("warmed-snapshot")
    built = _sealed(base, warm_up_options(discover_browser().launch_options(), base / "scratch" / "warm-up"))
    assert not any((base / "scratch" / "warm-up").iterdir()), "the warm-up left its browser's profile"
    return built


@pytest.mark.browser
def test_a_build_whose_warm_up_fails_says_so_with_its_own_exit_code(tmp_path: Path) -> None:
    if bundled_driver() is None:
        pytest.skip("this Playwright ships no Node.js of its own")
    options = warm_up_options(
        {"executable_path": str(tmp_path / "no-browser")}, tmp_path / "scratch" / "warm-up"
    )
    _, done, _ = _build(tmp_path, options)
    assert done.returncode == WARM_UP_FAILED
    assert "the driver's warm-up failed" in done.stderr


def _driver_version(launcher: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    found = bundled_driver()
    assert found is not None
    cli = found[1] / "cli.js"
    return subprocess.run(
        [launcher, cli, "--version"], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("snapshot", ["built", pytest.param("warmed", marks=pytest.mark.browser)])
def test_the_driver_starts_from_its_snapshot_in_the_environment_it_was_built_in(
    snapshot: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Warmed up, the build read the environment too (the browser's launch) and moved TMPDIR and HOME
    # for the browser's profile, then put them back: none of that is what the driver checks at start.
    folder, env = request.getfixturevalue(snapshot)
    started = _driver_version(folder / LAUNCHER_NAME, env, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("Version ")
    assert "without its start-up snapshot" not in started.stderr


def test_a_driver_whose_variable_read_while_loading_changed_loads_the_ordinary_way(
    built: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    # DEBUG decides, while the driver loads, which of its debug logs are on: a snapshot built
    # without it would keep them off. The driver starts again without the snapshot and says why.
    folder, env = built
    started = _driver_version(folder / LAUNCHER_NAME, {**env, "DEBUG": "pw:protocol"}, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("Version ")
    assert "loads without its start-up snapshot: DEBUG changed since it was built" in started.stderr


def test_a_driver_whose_snapshot_is_gone_starts_the_ordinary_way(
    built: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, env = built
    alone = tmp_path / "no-blob"
    alone.mkdir()
    (alone / LAUNCHER_NAME).write_text((folder / LAUNCHER_NAME).read_text())
    (alone / LAUNCHER_NAME).chmod(0o755)
    started = _driver_version(alone / LAUNCHER_NAME, env, tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("Version ")


# --- in a pool's workers --------------------------------------------------------------------------------

#: step code making HTTP requests from its Playwright's driver itself (the modules a snapshot cannot
#: hold, loaded on first use; test_driver_zygote.py uses it for a forked driver): the API request
#: context, and a route that fetches the real response before fulfilling it
HTTP_FROM_THE_DRIVER = """
answer = await page.request.get(helpers.env['url'])
print('request', answer.status, 'Welcome' in await answer.text())
async def fetched(route):
    response = await route.fetch()
    await route.fulfill(response=response, body=f'fetched {response.status}')
await page.route('**/login', fetched)
await page.goto(helpers.env['loginUrl'])
print('route', await page.text_content('body'))
"""

#: step code that reports its browser's processes (the one whose profile is in the run's TMPDIR, and its
#: children; they started with it, before the step) and the browser's one --enable-features switch
BROWSER_PROCESSES = """
import os
parents, commands = {}, {}
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:  # both or neither: a process may end between the two reads
        parent = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
        command = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode('utf-8', 'replace')
    except OSError:
        continue
    parents[int(pid)], commands[int(pid)] = parent, command.split()
profile = f"--user-data-dir={os.environ['TMPDIR']}/"
(browser,) = [
    pid for pid, args in commands.items()
    if any(arg.startswith(profile) for arg in args) and not any(arg.startswith('--type=') for arg in args)
]
kinds = ['browser']
for pid in sorted(pid for pid, parent in parents.items() if parent == browser):
    typed = [arg.split('=')[1] for arg in commands[pid] if arg.startswith(('--type=', '--utility-sub-type='))]
    kinds += typed[-1:]
print('browser processes', sorted(set(kinds)))
features = [arg for arg in commands[browser] if arg.startswith('--enable-features=')]
print('features', len(features), sorted(features[-1].split('=', 1)[1].split(',')))
"""


def browser_runs_its_network_service_inside(events: list[RunEvent]) -> bool:
    """What :data:`BROWSER_PROCESSES` printed: whether the network service ran in the browser process.

    Either way the browser has a renderer and one --enable-features switch that holds Playwright's
    own features.
    """
    (kinds,) = printed(events, "browser processes ")
    assert "renderer" in kinds, kinds
    (features,) = printed(events, "features ")
    count, names = features.split(" ", 1)
    assert count == "1" and "CDPScreenshotNewSurface" in names, features
    inside = "NetworkServiceInProcess2" in names
    assert ("network.mojom.NetworkService" in kinds) is not inside, (kinds, features)
    return inside


#: step code that reports how many devices its worker's Playwright got from its driver (what
#: ``playwright.devices`` holds; step code has no Playwright object, so it is read off the connection)
DEVICES_SENT = """
print('devices', len(page._impl_obj._connection.local_utils().devices))
"""


def devices_sent(events: list[RunEvent]) -> int:
    """What :data:`DEVICES_SENT` printed."""
    (count,) = printed(events, "devices ")
    return int(count)


#: step code that reports how its worker's driver was started, then makes HTTP requests from it
DRIVER_AND_HTTP = (
    """
import os
me = os.getpid()
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        cmdline = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')
        parent = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
    except OSError:
        continue
    if parent == me and b'run-driver' in cmdline:
        print('snapshot', b'--snapshot-blob' in cmdline)
        environ = open(f'/proc/{pid}/environ', 'rb').read().split(b'\\0')
        print('tunables', [v for v in environ if v.startswith(b'GLIBC_TUNABLES=')])
"""
    + BROWSER_PROCESSES
    + DEVICES_SENT
    + HTTP_FROM_THE_DRIVER
)


def printed(events: list[RunEvent], prefix: str) -> list[str]:
    """The log lines of a run that start with ``prefix``, without it."""
    lines = [event.message for event in events if isinstance(event, LogEvent)]
    return [line[len(prefix) :] for line in lines if line.startswith(prefix)]


async def run_collecting(pool: WorkerPool, job: RunJob) -> tuple[RunFinished, list[RunEvent]]:
    """Execute ``job`` on ``pool``: its outcome and every event it sent."""
    events: list[RunEvent] = []

    async def collect(event: RunEvent) -> None:
        events.append(event)

    return await pool.execute(job, collect), events


async def _runs_until_started_from_snapshot(
    pool: WorkerPool, make_job: Callable[..., RunJob], *, expected: bool
) -> list[object]:
    """Run the step on fresh workers until one started after the pool made its cache (the spares did not)."""
    events: list[object] = []
    for _ in range(pool.size + 2):
        outcome, events = await run_collecting(pool, make_job(DRIVER_AND_HTTP, step_timeout=30.0))
        assert outcome.status == "pass", outcome.error
        assert printed(events, "request ") == ["200 True"]
        assert printed(events, "route ") == ["fetched 200"]
        if printed(events, "snapshot ") == [str(expected)]:
            if expected:  # its large allocations on huge pages, as the snapshot was built
                assert printed(events, "tunables ") == [f"[b'GLIBC_TUNABLES={DRIVER_TUNABLES}']"]
            # from the snapshot, the browser's network service runs in its browser process; started
            # the ordinary way, the driver launches it as Playwright does
            assert browser_runs_its_network_service_inside(events) is expected
            # from the snapshot, the driver leaves out the device list the worker does not read (a
            # worker without plugins that launch browsers); started the ordinary way it sends it all
            assert (devices_sent(events) == 0) is expected, devices_sent(events)
            return events
    raise AssertionError(f"no worker's driver was started {'from' if expected else 'without'} the snapshot")


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("mode", ["bubblewrap", "off"])
async def test_workers_start_the_driver_from_the_pools_snapshot_and_it_speaks_http(
    mode: SandboxMode,
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
) -> None:
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap does not work here")
    config = marked_sandbox_with(mode=mode, driver_zygote=False)  # drivers started from it, not forked
    async with WorkerPool(1, sandbox=config) as pool:
        made = await pool.node_cache_made()
        assert made is not None and made.snapshot is not None, "the pool built no snapshot"
        await _runs_until_started_from_snapshot(pool, make_job, expected=True)


async def _pool_warnings(
    config: SandboxConfig,
    make_job: Callable[..., RunJob],
    caplog: pytest.LogCaptureFixture,
    *,
    from_snapshot: bool,
) -> tuple[NodeCache | None, list[str]]:
    """What a pool made for its drivers, once one of its workers started one from the snapshot (or
    not, as asked), and what the pool warned of meanwhile."""
    with caplog.at_level(logging.WARNING, logger="scenariokit.runner.parent.executor"):
        async with WorkerPool(1, sandbox=config) as pool:
            made = await pool.node_cache_made()
            await _runs_until_started_from_snapshot(pool, make_job, expected=from_snapshot)
    return made, [record.getMessage() for record in caplog.records]


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_pool_whose_snapshot_build_fails_says_so_and_its_workers_start_the_driver_as_before(
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Loading `http` while building is what a snapshot cannot hold (Node aborts): a Playwright whose
    # loading did that again would fail the same way.
    entry = tmp_path / "entry.js"
    entry.write_text(
        "require('http');\nrequire('v8').startupSnapshot.setDeserializeMainFunction(() => {});\n"
    )
    monkeypatch.setattr(driver_snapshot, "SNAPSHOT_ENTRY", entry)
    # a worker environment of its own: no snapshot this process built already is reused
    config = marked_sandbox_with("DRIVER_SNAPSHOT_TEST", driver_zygote=False)
    made, said = await _pool_warnings(config, make_job, caplog, from_snapshot=False)
    assert made is not None and made.compile_cache is not None and made.snapshot is None
    warned = [line for line in said if "no start-up snapshot of the Playwright driver, workers load" in line]
    assert warned and "CheckGlobalAndEternalHandles failed" in warned[0], said


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_pool_whose_warm_up_fails_builds_its_snapshot_without_one(
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a browser the warm-up cannot launch (the workers' own is fine): the snapshot comes all the same
    def no_browser(options: dict[str, object], scratch: Path) -> dict[str, object]:
        return warm_up_options({**options, "executable_path": str(tmp_path / "no-browser")}, scratch)

    monkeypatch.setattr(executor, "warm_up_options", no_browser)
    config = marked_sandbox_with(
        "DRIVER_SNAPSHOT_WARM_UP_TEST", driver_zygote=False
    )  # no snapshot built already is reused; drivers started from it
    made, said = await _pool_warnings(config, make_job, caplog, from_snapshot=True)
    assert made is not None and made.snapshot is not None, "the pool built no snapshot"
    retried = [line for line in said if "snapshot is built without its warm-up" in line]
    assert retried and "node exited with 3" in retried[0], said


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_pool_told_not_to_builds_no_snapshot(
    browser_marker: str, make_job: Callable[..., RunJob], marked_sandbox_with: Callable[..., SandboxConfig]
) -> None:
    assert not SandboxConfig.from_env({"SCENARIOKIT_DRIVER_SNAPSHOT": "false"}).driver_snapshot
    assert SandboxConfig.from_env({}).driver_snapshot
    assert SandboxConfig.from_env({"SCENARIOKIT_DRIVER_SNAPSHOT": "No"}).driver_snapshot is False
    with pytest.raises(ValueError, match="true, false"):  # the rule the service's settings check
        SandboxConfig.from_env({"SCENARIOKIT_DRIVER_SNAPSHOT": "off"})
    config = marked_sandbox_with(driver_snapshot=False)
    async with WorkerPool(1, sandbox=config) as pool:
        made = await pool.node_cache_made()
        assert made is None or made.snapshot is None
        await _runs_until_started_from_snapshot(pool, make_job, expected=False)


# --- how its driver launches Chromium ------------------------------------------------------------------

LAUNCH_FLAGS = Path(driver_snapshot.__file__).with_name("driver_launch_flags.js")
DEVICES = Path(driver_snapshot.__file__).with_name("driver_devices.js")


def _node(script: str, module: Path = LAUNCH_FLAGS) -> str:
    found = bundled_driver()
    if found is None:
        pytest.skip("this Playwright ships no Node.js of its own")
    done = subprocess.run(
        [str(found[0]), "-e", script, str(module), str(found[1])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize(
    ("args", "merged"),
    [
        (["--a", "--enable-features=X,Y", "--b"], ["--a", "--enable-features=X,Y,N", "--b"]),
        (["--enable-features=X", "--b", "--enable-features=Y,X"], ["--b", "--enable-features=X,Y,N"]),
        (["--a"], ["--a", "--enable-features=N"]),
        (["--enable-features=N,X"], ["--enable-features=N,X"]),
    ],
)
def test_every_enable_features_switch_is_merged_into_one_that_holds_the_added_feature(
    args: list[str], merged: list[str]
) -> None:
    # Chromium keeps only the last --enable-features: a second one would drop Playwright's own
    printed = _node(
        "const { withFeatures } = require(process.argv[1]);"
        f"process.stdout.write(JSON.stringify(withFeatures({json.dumps(args)}, ['N'])))"
    )
    assert json.loads(printed) == merged


def test_the_drivers_chromium_runs_its_network_service_in_process_and_keeps_playwrights_features() -> None:
    printed = _node(
        "const flags = require(process.argv[1]);"
        "const core = require(require('path').join(process.argv[2], 'lib', 'coreBundle.js'));"
        "const chromium = core.server.createPlaywright({ sdkLanguage: 'python' }).chromium;"
        "const before = chromium._innerDefaultArgs({ headless: true, args: ['--enable-features=Mine'] });"
        "const patched = flags.launchChromiumWith(core);"
        "const after = chromium._innerDefaultArgs({ headless: true, args: ['--enable-features=Mine'] });"
        "process.stdout.write(JSON.stringify({ patched, before, after, added: flags.IN_PROCESS_FEATURES }));"
    )
    answer = json.loads(printed)
    assert answer["patched"] is True
    switches = [arg for arg in answer["after"] if arg.startswith("--enable-features=")]
    assert len(switches) == 1
    names = switches[0].split("=", 1)[1].split(",")
    enabled = [arg for arg in answer["before"] if arg.startswith("--enable-features=")]
    playwrights = next(arg for arg in enabled if "Mine" not in arg)
    assert {*playwrights.split("=", 1)[1].split(","), "Mine", *answer["added"]} == set(names)
    assert [arg for arg in answer["after"] if not arg.startswith("--enable-features=")] == [
        arg for arg in answer["before"] if not arg.startswith("--enable-features=")
    ]


@pytest.mark.parametrize(("value", "asked"), [("none", True), ("all", False), (None, False)])
def test_a_driver_leaves_out_playwrights_devices_only_when_its_environment_says_none(
    value: str | None, asked: bool
) -> None:
    """The worker's word is taken out of the environment either way, from an object or a list of
    NAME=value (the zygote's request), before the environment is checked against the driver's load."""
    env = {"HOME": "/h"} if value is None else {"HOME": "/h", DEVICES_ENV: value}
    printed = _node(
        "const { VARIABLE, takeAsk, leaveOutDevices } = require(process.argv[1]);"
        "const core = require(require('path').join(process.argv[2], 'lib', 'coreBundle.js'));"
        "const before = Object.keys(core.server.deviceDescriptors).length;"
        f"const env = {json.dumps(env)};"
        "const entries = Object.entries(env).map(([name, value]) => `${name}=${value}`);"
        "const answers = [takeAsk(env), takeAsk(entries)];"
        "const emptied = answers[0] && leaveOutDevices(core);"
        "const after = Object.keys(core.server.deviceDescriptors).length;"
        "process.stdout.write(JSON.stringify({ VARIABLE, answers, emptied, before, after, env, entries }));",
        DEVICES,
    )
    answer = json.loads(printed)
    assert answer["VARIABLE"] == DEVICES_ENV
    assert answer["answers"] == [asked, asked]
    assert answer["emptied"] is asked
    assert answer["before"] > 100  # Playwright's list, as a worker that asks for nothing gets it
    assert answer["after"] == (0 if asked else answer["before"])
    assert answer["env"] == {"HOME": "/h"}  # the browser is started with the driver's own environment
    assert answer["entries"] == ["HOME=/h"]


def _enable_features(pid: int) -> list[str]:
    """The ``--enable-features`` switches of a Chromium process (which writes its arguments as one string)."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()
    return [arg for arg in args if arg.startswith("--enable-features=")]


@pytest.mark.browser
async def test_a_browser_its_driver_launches_runs_no_network_service_process_and_pages_look_the_same(
    tmp_path: Path, site: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process fewer per run, and a page served over the network looks exactly as it does without."""
    from playwright.async_api import async_playwright

    if bundled_driver() is None:
        pytest.skip("this Playwright ships no Node.js of its own")
    folder = tmp_path / "snapshot"
    monkeypatch.setenv(NODE_PATH_ENV, str(folder / LAUNCHER_NAME))
    command = snapshot_builder(folder, dict(os.environ))  # built where this test's driver starts
    assert command is not None
    done = await asyncio.to_thread(
        subprocess.run, command[0], env=command[1], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert seal_driver_snapshot(folder) == folder
    page_html = (
        "<body style='background:linear-gradient(90deg,#f00,#00f)'><h1>Hello</h1>"
        "<canvas id=c width=120 height=60></canvas><script>const g=document.getElementById('c')"
        ".getContext('2d');g.fillStyle='green';g.fillRect(10,10,50,30)</script></body>"
    )
    shots: list[bytes] = []
    kinds: list[set[str]] = []
    features: list[list[str]] = []
    for from_snapshot in (True, False):
        if not from_snapshot:
            monkeypatch.delenv(NODE_PATH_ENV)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**discover_browser().launch_options())
            try:
                page = await browser.new_page()
                await page.goto(f"{site}/login")
                shots.append(await page.screenshot())
                answer = await page.evaluate("fetch('/').then((r) => r.status)")
                await page.set_content(page_html)
                shots.append(await page.screenshot())
                # the browser's own account of its processes, and its command line
                session = await browser.new_browser_cdp_session()
                processes = (await session.send("SystemInfo.getProcessInfo"))["processInfo"]
                kinds.append({process["type"] for process in processes})
                (main,) = [process["id"] for process in processes if process["type"] == "browser"]
                features.append(_enable_features(main))
                assert answer == 200
            finally:
                await browser.close()
    assert kinds == [{"browser", "renderer"}, {"browser", "renderer", "network.mojom.NetworkService"}]
    assert [len(switches) for switches in features] == [1, 1]  # Chromium would keep only the last
    assert "NetworkServiceInProcess2" in features[0][0] and "CDPScreenshotNewSurface" in features[0][0]
    assert features[0][0].replace(",NetworkServiceInProcess2", "") == features[1][0]
    assert shots[:2] == shots[2:]
