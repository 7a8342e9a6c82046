"""Where a run's files go: under bubblewrap, its temporary folder (and Chromium's profile in it) is the
sandbox's own ``/tmp``, a tmpfs that ends with the sandbox; the browser's downloads and a trace being
recorded go to the worker's private directory on disk all the same (docs/architecture.md, "Where a
run's files go"). Without a sandbox, everything stays in the private directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from scenariokit.domain.job import LogEvent, RunEvent, RunJob
from scenariokit.runner.confinement.sandbox import (
    PRIVATE_TMP,
    SANDBOX_RUN_DIR,
    SandboxConfig,
    SandboxMode,
    bubblewrap_works,
    worker_environment,
    worker_plan,
    worker_tmp,
)
from scenariokit.runner.parent.executor import WorkerPool

#: step code that reports its temporary folder, the file system under it and under its working
#: directory, where its browser's profile is, and where a download it accepts lands and on what
WHERE_FILES_GO = """
import os
def file_system(path):
    best, kind = '', '?'
    for line in open('/proc/self/mountinfo'):
        fields = line.split()
        point, rest = fields[4], fields[fields.index('-') + 1:]
        if (path == point or path.startswith(point.rstrip('/') + '/')) and len(point) >= len(best):
            best, kind = point, rest[0]
    return kind
tmp = os.environ['TMPDIR']
print('tmpdir', tmp, file_system(tmp))
print('cwd', os.getcwd(), file_system(os.getcwd()))
parents, commands = {}, {}
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:  # both or neither: a process may end between the two reads
        parent = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
        args = open(f'/proc/{pid}/cmdline', 'rb').read().decode('utf-8', 'replace').split('\\0')
    except OSError:
        continue
    parents[int(pid)], commands[int(pid)] = parent, args
def mine(pid):  # this worker's browser, not another worker's (all are seen without a sandbox)
    while pid > 1 and pid != os.getpid():
        pid = parents.get(pid, 0)
    return pid == os.getpid()
profiles = [
    arg.split('=', 1)[1] for pid, args in commands.items() if mine(pid)
    and not any(a.startswith('--type=') for a in args) for arg in args if arg.startswith('--user-data-dir=')
]
print('profile in tmpdir', [p.startswith(tmp.rstrip('/') + '/') for p in profiles], profiles)
await page.set_content('<a download="report.txt" href="data:text/plain,figures">get</a>')
async with page.expect_download() as waited:
    await page.click('a')
download = await waited.value
path = str(await download.path())
print('download', os.path.dirname(path), file_system(path), open(path).read())
"""


def printed(events: list[RunEvent], prefix: str) -> list[str]:
    lines = [event.message for event in events if isinstance(event, LogEvent)]
    return [line[len(prefix) :] for line in lines if line.startswith(prefix)]


def test_a_sandboxed_workers_temporary_folder_is_the_sandboxs_own_tmp(tmp_path: Path) -> None:
    assert worker_tmp("bubblewrap") == str(PRIVATE_TMP) == "/tmp"
    assert worker_tmp("none") is None
    assert worker_environment("/private", environ={}, tmp="/tmp")["TMPDIR"] == "/tmp"
    assert worker_environment("/private", environ={})["TMPDIR"] == "/private/tmp"

    config = SandboxConfig(mode="off")
    plain = worker_plan("none", tmp_path, config, None)
    assert plain.env["TMPDIR"] == f"{tmp_path}/tmp" and plain.env["HOME"] == f"{tmp_path}/home"
    if bubblewrap_works():
        user = None if os.geteuid() != 0 else 0x7000_0000
        sandboxed = worker_plan("bubblewrap", tmp_path, config, None, user=user)
        assert sandboxed.env["TMPDIR"] == "/tmp" and sandboxed.env["HOME"] == f"{SANDBOX_RUN_DIR}/home"


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(
    ("mode", "hidden"),
    [
        ("bubblewrap", ()),
        # the store in /tmp (or the server started there) hides /tmp: it must stay the worker's to write
        ("bubblewrap", (PRIVATE_TMP,)),
        ("off", ()),
    ],
    ids=["bubblewrap", "bubblewrap-store-in-tmp", "off"],
)
async def test_the_profile_is_made_in_the_temporary_folder_and_downloads_and_traces_land_on_disk(
    mode: SandboxMode,
    hidden: tuple[Path, ...],
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
    tmp_path: Path,
) -> None:
    if mode == "bubblewrap" and not bubblewrap_works():
        pytest.skip("bubblewrap does not work here")
    events: list[RunEvent] = []

    async def collect(event: RunEvent) -> None:
        events.append(event)

    job = make_job(WHERE_FILES_GO, step_timeout=30.0, trace="always", artifacts_dir=tmp_path / "artifacts")
    async with WorkerPool(1, sandbox=marked_sandbox_with(mode=mode, hidden=hidden)) as pool:
        outcome = await pool.execute(job, collect)

    assert outcome.status == "pass", outcome.error
    ((tmp, tmp_fs),) = [line.split() for line in printed(events, "tmpdir ")]
    ((cwd, disk),) = [line.split() for line in printed(events, "cwd ")]
    ((profile,),) = [line.split(" ", 1)[:1] for line in printed(events, "profile in tmpdir ")]
    assert profile == "[True]", printed(events, "profile in tmpdir ")
    ((downloads, download_fs, content),) = [line.split() for line in printed(events, "download ")]
    assert content == "figures"
    # downloads and traces: in the private directory's tmp/, on its file system, whatever TMPDIR is
    assert downloads == f"{cwd}/tmp" and download_fs == disk
    assert (tmp_path / "artifacts" / "trace.zip").read_bytes()[:2] == b"PK"
    if mode == "bubblewrap":
        assert cwd == SANDBOX_RUN_DIR
        assert (tmp, tmp_fs) == ("/tmp", "tmpfs")
    else:
        assert tmp == f"{cwd}/tmp"
