"""The Playwright driver's start-up snapshot: its JavaScript loaded once by the pool, reused by every worker.

Each run's worker starts its own Playwright driver (Node running ``cli.js run-driver``), which loads
7 MB of bundled JavaScript first. The pool builds a V8 startup snapshot of that loaded state once
(``node --snapshot-blob driver.blob --build-snapshot driver_snapshot.js``, running only Playwright's
own code), seals it read-only, and gives workers a launcher that starts the driver from it: Playwright
starts the driver named by ``PLAYWRIGHT_NODEJS_PATH``, and the launcher is that executable. When the
build fails, workers start the driver as before (docs/deployment.md, "The driver's start-up snapshot").
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

#: the snapshot's entry script, shipped beside this module
SNAPSHOT_ENTRY = Path(__file__).with_name("driver_snapshot.js")
BLOB_NAME = "driver.blob"
#: the executable a worker's Playwright starts instead of Node: Node with the snapshot
LAUNCHER_NAME = "node"
#: the variable that tells Playwright which Node to start its driver with
NODE_PATH_ENV = "PLAYWRIGHT_NODEJS_PATH"
#: where a sandboxed worker finds the snapshot's folder (bound read-only)
SANDBOX_DRIVER_SNAPSHOT = "/tmp/scenariokit-driver-snapshot"
#: the exit code of a snapshot build whose warm-up failed (``driver_snapshot.js``)
WARM_UP_FAILED = 3
#: glibc's setting for the driver: its large allocations (the 30 MB blob is read into two of them)
#: are backed by transparent huge pages where the kernel offers them on request (``madvise``, the
#: usual default): a tenth of the page faults, about a third of the start's CPU. Appended to any
#: ``GLIBC_TUNABLES`` the worker was given; a glibc that does not know it ignores it.
DRIVER_TUNABLES = "glibc.malloc.hugetlb=1"
TUNABLES_ENV = "GLIBC_TUNABLES"
#: set to ``none`` in a worker's environment when nothing in it reads ``playwright.devices``: its driver,
#: forked by the driver zygote or started from the snapshot, then sends an empty device list
#: (``driver_devices.js``), not 70 KB of JSON that the client checks field by field in every run. Not
#: named ``SCENARIOKIT_*``: a process's ``/proc/<pid>/environ`` keeps what it was started with, and no
#: process in a sandbox shows a variable of the service's own (step code can read them all there)
DEVICES_ENV = "SK_DRIVER_DEVICES"


def bundled_driver() -> tuple[Path, Path] | None:
    """The Node executable shipped with Playwright and the driver package it runs (None: not shipped)."""
    import playwright

    driver = Path(playwright.__file__).parent / "driver"
    node, package = driver / "node", driver / "package"
    if not node.is_file() or not (package / "cli.js").is_file():
        return None
    return node, package


def driver_variables() -> dict[str, str]:
    """What Playwright's Python side adds to the environment of the driver it starts.

    The snapshot records the variables the driver read while loading; built with these, it matches
    the driver a worker starts. Without them (a Playwright that moved them), the driver notices the
    difference at start and loads the ordinary way.
    """
    try:
        from playwright._impl._driver import get_driver_env
    except ImportError:
        return {}
    return {name: value for name, value in get_driver_env().items() if os.environ.get(name) != value}


def launcher_script(node: Path, package: Path) -> str:
    """The launcher: Node started from the blob beside it, wherever the folder is bound.

    When the blob is gone, or older than Node or the driver's code (Playwright upgraded in place
    while the pool runs), it starts Node the ordinary way instead: a snapshot of other code is never
    run. Two ``stat`` calls of the shell's own ``test``, no other process. Either way Node starts
    with :data:`DRIVER_TUNABLES` (:func:`driver_tunables`, in shell).
    """
    node_path, bundle = shlex.quote(str(node)), shlex.quote(str(package / "lib" / "coreBundle.js"))
    return (
        "#!/bin/sh\n"
        f'export {TUNABLES_ENV}="${{{TUNABLES_ENV}:+${TUNABLES_ENV}:}}{DRIVER_TUNABLES}"\n'
        f'blob="${{0%/*}}/{BLOB_NAME}"\n'
        f'if [ "$blob" -nt {node_path} ] && [ "$blob" -nt {bundle} ]; then\n'
        f'    exec {node_path} --snapshot-blob "$blob" "$@"\n'
        "fi\n"
        f'exec {node_path} "$@"\n'
    )


def driver_tunables(env: Mapping[str, str]) -> str:
    """``GLIBC_TUNABLES`` as the launcher gives it to the driver it starts in ``env``."""
    given = env.get(TUNABLES_ENV)
    return f"{given}:{DRIVER_TUNABLES}" if given else DRIVER_TUNABLES


def warm_up_options(launch_options: Mapping[str, object], scratch: Path) -> dict[str, object]:
    """What the build's warm-up is given: the worker's browser launch (Python's keyword arguments of
    ``chromium.launch``, in the driver's own names) and a scratch folder for its profile."""
    names = {"executable_path": "executablePath"}
    launch = {names.get(key, key): value for key, value in launch_options.items() if value is not None}
    return {"launch": launch, "scratch": str(scratch)}


def snapshot_builder(
    folder: Path, worker_env: Mapping[str, str], warm_up: Mapping[str, object] | None = None
) -> tuple[list[str], dict[str, str]] | None:
    """The command (argv, environment) that builds the snapshot in ``folder``; None without a bundled Node.

    ``worker_env`` is the environment a worker started with this snapshot has (its ``HOME`` and
    ``TMPDIR`` may be a scratch folder); the build runs in it, plus what Playwright adds for its
    driver, so that what the driver read while loading is what a worker's driver would read. The
    launcher is written into ``folder`` here. With ``warm_up`` (:func:`warm_up_options`) the loaded
    driver launches that browser once and works a page before the snapshot is taken, so that what a
    run's driver does first is compiled already; a build whose warm-up failed exits with
    :data:`WARM_UP_FAILED`.
    """
    found = bundled_driver()
    if found is None:
        return None
    node, package = found
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)  # sealed later; a worker's user must be able to pass into it
    launcher = folder / LAUNCHER_NAME
    launcher.write_text(launcher_script(node, package))
    launcher.chmod(0o755)
    # the launcher is a shell script, and the shell sets PWD for the driver
    env = {**worker_env, **driver_variables(), "PWD": worker_env.get("PWD", str(folder))}
    env[TUNABLES_ENV] = driver_tunables(worker_env)  # as the launcher sets it
    argv = [
        str(node),
        "--snapshot-blob",
        str(folder / BLOB_NAME),
        "--build-snapshot",
        str(SNAPSHOT_ENTRY),
        str(package),
    ]
    if warm_up is not None:
        argv.append(json.dumps(warm_up))
    return argv, env


def seal_driver_snapshot(folder: Path) -> Path | None:
    """Make a built snapshot read-only (only the pool ever writes it); the folder, or None if no blob."""
    blob, launcher = folder / BLOB_NAME, folder / LAUNCHER_NAME
    if not blob.is_file() or blob.stat().st_size == 0 or not launcher.is_file():
        return None
    blob.chmod(0o444)
    launcher.chmod(0o555)
    folder.chmod(0o555)
    return folder
