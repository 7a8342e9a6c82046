"""Where a run's files go: under bubblewrap, its temporary folder (and Chromium's profile in it) is the
sandbox's own ``/tmp``, a tmpfs that ends with the sandbox; the browser's downloads and a trace being
recorded go to the worker's private directory on disk all the same (docs/architecture.md, "Where a
run's files go"). Without a sandbox, its temporary folder is a folder of its own in ``/dev/shm`` where
that is a tmpfs with room (else the private directory's ``tmp/``), removed with the worker."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from scenariokit.domain.job import LogEvent, RunEvent, RunJob
from scenariokit.runner.confinement.sandbox import (
    MEMORY_LINK,
    POOL_DIR_PREFIX,
    PRIVATE_TMP,
    SANDBOX_RUN_DIR,
    SandboxConfig,
    SandboxMode,
    bubblewrap_works,
    file_system_type,
    make_memory_pool_dir,
    make_pool_dir,
    make_run_dir,
    memory_folder_base,
    remove_run_dir,
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
    path, best, kind = os.path.realpath(path), '', '?'
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
def groups(pid):
    try:
        return open(f'/proc/{pid}/cgroup').read()
    except OSError:
        return None
own = groups(os.getpid())
def mine(pid):  # this worker's browser, not another worker's (all are seen without a sandbox)
    if own and '/scenariokit-' in own and groups(pid) == own:  # its run's group: a forked driver's too
        return True
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
    elif memory_folder_base() is not None:  # /dev/shm, a tmpfs with room, and /tmp on a disk
        assert (tmp, tmp_fs) == (f"{cwd}/{MEMORY_LINK}", "tmpfs")
    else:
        assert tmp == f"{cwd}/tmp"


def test_file_system_types_come_from_the_mount_table(tmp_path: Path) -> None:
    assert file_system_type("/proc/self") == "proc"
    assert file_system_type("/") is not None
    # a path below a mount point is on that mount's file system, found through links
    link = tmp_path / "to-proc"
    link.symlink_to("/proc/self")
    assert file_system_type(link) == "proc"


def test_memory_folders_go_only_to_a_tmpfs_with_room_when_tmp_is_on_a_disk(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if file_system_type(shm) != "tmpfs":
        pytest.skip("/dev/shm is no tmpfs here")
    on_disk = str(tmp_path) if file_system_type(tmp_path) != "tmpfs" else None
    if on_disk is not None:
        assert memory_folder_base(shm, temporary=on_disk, least_mb=1) == shm
        # a container's small /dev/shm is Chromium's own: asked for more room than it has, none
        assert memory_folder_base(shm, temporary=on_disk, least_mb=10**9) is None
        # a base that is no tmpfs is never used
        assert memory_folder_base(tmp_path, temporary=on_disk, least_mb=1) is None
    # the system's temporary folder in memory already: the private directory's tmp/ is memory too
    assert memory_folder_base(shm, temporary=str(shm), least_mb=1) is None


def test_a_run_directory_links_its_folder_in_memory_and_both_go_together(tmp_path: Path) -> None:
    pool_dir, memory_base = tmp_path / "disk", tmp_path / "memory"
    pool_dir.mkdir()
    memory_base.mkdir()
    memory_dir = make_memory_pool_dir(base=memory_base)
    assert memory_dir is not None and memory_dir.parent == memory_base
    assert memory_dir.name.startswith(f"{POOL_DIR_PREFIX}{os.getpid()}-")
    run_dir = make_run_dir(pool_dir, None, memory_dir)
    link = run_dir / MEMORY_LINK
    assert link.is_symlink() and link.resolve() == memory_dir / run_dir.name
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(["artifacts", "home", MEMORY_LINK, "tmp"])
    assert worker_plan("none", run_dir, SandboxConfig(mode="off"), None).env["TMPDIR"] == str(link)
    # the browser's profile, written there, is gone with the worker's private directory
    (link / "playwright_chromiumdev_profile-x").mkdir()
    (link / "playwright_chromiumdev_profile-x" / "Cookies").write_bytes(b"\0" * 4096)
    (link / "playwright_chromiumdev_profile-x").chmod(0o500)  # as a browser may leave it
    remove_run_dir(run_dir)
    assert not run_dir.exists() and list(memory_dir.iterdir()) == []
    # the pool's folder in memory gone (systemd's RemoveIPC, someone cleaning /dev/shm): on disk
    memory_dir.rmdir()
    orphan = make_run_dir(pool_dir, None, memory_dir)
    assert not os.path.lexists(orphan / MEMORY_LINK)
    assert worker_plan("none", orphan, SandboxConfig(mode="off"), None).env["TMPDIR"] == f"{orphan}/tmp"
    remove_run_dir(orphan)
    # a run directory made without one keeps TMPDIR on disk, and removes as before
    plain = make_run_dir(pool_dir, None)
    assert not (plain / MEMORY_LINK).exists()
    assert worker_plan("none", plain, SandboxConfig(mode="off"), None).env["TMPDIR"] == f"{plain}/tmp"
    remove_run_dir(plain)
    assert not plain.exists()


def test_a_pool_in_memory_whose_process_died_is_removed_by_the_next_pool(tmp_path: Path) -> None:
    base = tmp_path / "memory"
    base.mkdir()
    dead = base / f"{POOL_DIR_PREFIX}{2**22 + 12345}-abc"  # above pid_max: no such process
    (dead / "run-1").mkdir(parents=True)
    alive = base / f"{POOL_DIR_PREFIX}{os.getppid()}-def"
    alive.mkdir()
    made = make_pool_dir(base)
    assert not dead.exists() and alive.exists() and made.exists()
    shutil.rmtree(made)
    # no room for one: the pool keeps its workers' temporary folders on disk
    assert make_memory_pool_dir(base=tmp_path / "missing") is None


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")
async def test_a_pool_without_a_sandbox_removes_each_workers_folder_in_memory_and_its_own(
    browser_marker: str,
    make_job: Callable[..., RunJob],
    marked_sandbox_with: Callable[..., SandboxConfig],
    tmp_path: Path,
) -> None:
    if memory_folder_base() is None:
        pytest.skip("here /dev/shm is no tmpfs with room, or the temporary folder is one already")
    job = make_job(
        "import os\nprint('memory', os.path.realpath(os.environ['TMPDIR']))\nos._exit(3)",
        step_timeout=30.0,
        artifacts_dir=tmp_path / "artifacts",
    )
    events: list[RunEvent] = []

    async def collect(event: RunEvent) -> None:
        events.append(event)

    async with WorkerPool(1, sandbox=marked_sandbox_with(mode="off")) as pool:
        memory_dir = pool._memory_dir
        assert memory_dir is not None and memory_dir.parent == Path("/dev/shm")
        outcome = await pool.execute(job, collect)
        assert outcome.status == "fail", outcome.error  # the step ended its own worker
        (folder,) = printed(events, "memory ")
        assert Path(folder).parent == memory_dir
        for _ in range(100):  # the killed worker's folders go as it is replaced
            if not await asyncio.to_thread(os.path.exists, folder):
                break
            await asyncio.sleep(0.05)
        assert not await asyncio.to_thread(os.path.exists, folder)
    assert not memory_dir.exists()
