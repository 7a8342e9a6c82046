"""How workers are started: what they keep of the environment, what bubblewrap hides, when it is refused."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from scenariokit.runner.confinement import sandbox
from scenariokit.runner.confinement.sandbox import (
    NodeCache,
    NoWorkerUser,
    SandboxConfig,
    SandboxUnavailable,
    bubblewrap_argv,
    bubblewrap_works,
    lease_worker_user,
    resolve_sandbox,
    seal_node_cache,
    worker_command,
    worker_environment,
)
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.worker.browser import BrowserConfig


def test_a_worker_keeps_no_setting_of_the_service() -> None:
    environ = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "SCENARIOKIT_SECRET_KEY": "key",
        "SCENARIOKIT_DATABASE_URL": "postgresql+asyncpg://u:pw@db/sk",
        "DATABASE_URL": "postgres://u:pw@db/sk",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "HOME": "/root",
        "PYTHONPATH": "/srv/app",
        "MARK": "kept when named",
    }

    env = worker_environment("/private", environ=environ, extra=("MARK", "SCENARIOKIT_API_TOKENS"))

    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MARK": "kept when named",
        "HOME": "/private/home",
        "TMPDIR": "/private/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }


def test_bubblewrap_hides_the_store_and_puts_back_only_what_the_worker_imports(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code = store / "venv"
    code.mkdir(parents=True)
    (store / "app.db").write_text("")

    argv = bubblewrap_argv(tmp_path / "run", [store], [code])

    joined = " ".join(argv)
    assert f"--tmpfs {store}" in joined
    assert f"--ro-bind {code} {code}" in joined
    assert f"--bind {tmp_path / 'run'} {sandbox.SANDBOX_RUN_DIR}" in joined
    assert f"--tmpfs {Path.cwd().resolve()}" in joined, "the server's working directory is hidden"
    for flag in ("--unshare-pid", "--die-with-parent", "--ro-bind / /"):
        assert flag in joined


def test_tmp_hidden_stays_the_sandboxs_own_tmp_that_everyone_may_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store in /tmp (sqlite:////tmp/x.db) or a server started in /tmp hides /tmp: a second tmpfs of
    # mode 0755 over the sandbox's own /tmp left the worker no TMPDIR to write (every launch failed).
    checkout = Path("/tmp") / f"scenariokit-test-checkout-{os.getpid()}"
    try:
        checkout.mkdir()

        argv = bubblewrap_argv(tmp_path / "run", [Path("/tmp")], [checkout])

        joined = " ".join(argv)
        assert joined.count("--tmpfs /tmp ") == 1
        assert "--perms 01777 --tmpfs /tmp " in joined
        assert f"--ro-bind {checkout} {checkout}" in joined, "what the worker needs under /tmp comes back"
        # a needed folder that holds a hidden one under /tmp is not bound back: the hidden one stays hidden
        store = checkout / "data"
        store.mkdir()
        joined = " ".join(bubblewrap_argv(tmp_path / "run", [Path("/tmp"), store], [checkout]))
        assert f"--ro-bind {checkout} {checkout}" not in joined
        # the server started in /tmp: its working directory is hidden, the same way
        monkeypatch.chdir("/tmp")
        joined = " ".join(bubblewrap_argv(tmp_path / "run", [], []))
        assert joined.count("--tmpfs /tmp ") == 1 and "--perms 01777 --tmpfs /tmp " in joined
    finally:
        shutil.rmtree(checkout, ignore_errors=True)


def test_a_needed_tmp_itself_is_never_bound_back_over_the_sandboxs_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A script run from /tmp has /tmp first on its import path: bound back read-only, it hid the
    # sandbox's writable /tmp, and no worker could start (bwrap: Can't mkdir /tmp/scenariokit-run).
    monkeypatch.chdir("/")  # a working directory under /tmp would be hidden, and hide that
    joined = " ".join(bubblewrap_argv(tmp_path / "run", [], [Path("/tmp"), Path("/")]))
    assert "--ro-bind /tmp /tmp" not in joined
    assert "--perms 01777 --tmpfs /tmp " in joined
    assert joined.count("--ro-bind / /") == 1, "only the base flags' read-only root"


@pytest.mark.browser
def test_a_script_run_from_tmp_runs_its_scenario_in_the_sandbox(site: str) -> None:
    if not bubblewrap_works():
        pytest.skip("bubblewrap cannot make a sandbox here")
    script = Path("/tmp") / f"scenariokit-test-try-{os.getpid()}-{uuid.uuid4().hex[:8]}.py"
    script.write_text(_TRY_FROM_TMP)
    # the user's folder, with the store in it, is not under /tmp: hidden, it would hide /tmp with it
    folder = Path(tempfile.mkdtemp(prefix="scenariokit-test-", dir="/var/tmp"))
    try:
        done = subprocess.run(
            [sys.executable, str(script), site],
            cwd=folder,
            env={k: v for k, v in os.environ.items() if not k.startswith(("SCENARIOKIT_", "PYTEST_"))},
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        script.unlink()
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["bubblewrap", "pass"], done.stdout + done.stderr


_TRY_FROM_TMP = """
import asyncio, sys
import scenariokit

async def main() -> None:
    async with scenariokit.open_kit("sqlite:///checks.db") as kit:
        env = await kit.environments.create({"name": "site", "data": {"url": sys.argv[1]}})
        scenario = await kit.scenarios.create(
            {"name": "home", "steps": [{"execCode": "await page.goto(helpers.getEnvUrl())"}]}
        )
        result = await kit.run(scenario.id, environment_id=env.id)
        print(kit._scheduler.pool.sandbox_kind, result.run.status.value)  # the library's own pool
        if result.run.error:
            print(result.run.error.message, file=sys.stderr)

asyncio.run(main())
"""


def test_what_a_worker_needs_under_tmp_is_bound_back_into_its_private_tmp(tmp_path: Path) -> None:
    # A CI clone and its virtualenv may live in /tmp, which the sandbox replaces by an empty tmpfs.
    checkout = Path("/tmp") / f"scenariokit-test-checkout-{os.getpid()}"
    venv = checkout / ".nox" / "tests"
    try:
        venv.mkdir(parents=True)

        argv = bubblewrap_argv(tmp_path / "run", [], [venv])

        joined = " ".join(argv)
        assert "--tmpfs /tmp" in joined
        assert f"--ro-bind {venv} {venv}" in joined
        assert f"--perms 0755 --dir {checkout}" in joined, "its folders stay passable for the worker's user"
    finally:
        shutil.rmtree(checkout, ignore_errors=True)


async def test_bubblewrap_required_but_missing_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="SCENARIOKIT_SANDBOX=bubblewrap but bwrap is not installed"):
        resolve_sandbox("bubblewrap")
    assert resolve_sandbox("auto") == "none"
    pool = WorkerPool(
        1, browser=BrowserConfig(executable="/bin/true"), sandbox=SandboxConfig(mode="bubblewrap")
    )
    with pytest.raises(SandboxUnavailable):
        await pool.start()
    assert pool.worker_pids() == []


def test_off_never_uses_bubblewrap() -> None:
    assert resolve_sandbox("off") == "none"
    assert SandboxConfig.from_env({"SCENARIOKIT_SANDBOX": "off", "SCENARIOKIT_RUN_MEMORY_MB": "512"}) == (
        SandboxConfig(mode="off", limits=sandbox.ResourceLimits(memory_mb=512))
    )
    assert os.environ.get("SCENARIOKIT_SANDBOX", "auto") in sandbox.SANDBOX_MODES


def test_serve_refuses_to_start_when_bubblewrap_is_required_and_missing(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {
        "PATH": str(tmp_path),  # no bwrap there
        "SCENARIOKIT_SANDBOX": "bubblewrap",
        "SCENARIOKIT_BROWSER_PATH": sys.executable,  # any executable: the sandbox is checked first
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "SCENARIOKIT_SECRET_KEY": "sandbox-test-key",
    }
    done = subprocess.run(
        [sys.executable, "-m", "scenariokit.cli", "serve", "--port", "0", "--database-url",
         f"sqlite:///{tmp_path / 'refused.db'}"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert "SCENARIOKIT_SANDBOX=bubblewrap but bwrap is not installed" in done.stderr
    assert "Running on" not in done.stdout


@pytest.mark.browser
def test_serve_with_auto_and_no_bubblewrap_starts_and_says_what_it_left_out(tmp_path: Path) -> None:
    import subprocess
    import sys

    from scenariokit.runner.worker.browser import discover_browser

    env = {
        "PATH": str(tmp_path),  # no bwrap there
        "SCENARIOKIT_SANDBOX": "auto",
        "SCENARIOKIT_BROWSER_PATH": str(discover_browser().executable),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "SCENARIOKIT_SECRET_KEY": "sandbox-test-key",
        "SCENARIOKIT_WORKERS": "1",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "scenariokit.cli", "serve", "--port", "0", "--database-url",
         f"sqlite:///{tmp_path / 'fallback.db'}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        said = []
        while (line := server.stdout.readline()) and "Press CTRL+C" not in line:
            said.append(line.rstrip("\n"))
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=60)
    assert "Sandbox: none" in said, (said, errors)
    note = (
        "bubblewrap: bwrap is not installed (not found on PATH); workers run without a sandbox "
        "(SCENARIOKIT_SANDBOX=auto)"
    )
    assert f"Left out: {note}" in said, (said, errors)
    assert f"left out: {note}" in errors  # the pool's warning in the log


# --- a user id of its own per worker -----------------------------------------------------------------

#: ids far into the range, so these tests never meet the leases of a pool running beside them
TEST_UIDS = range(sandbox.WORKER_UIDS.stop - 3, sandbox.WORKER_UIDS.stop)


def test_two_live_workers_never_share_a_user_id_and_a_released_one_comes_back(tmp_path: Path) -> None:
    first = lease_worker_user(TEST_UIDS[:2], tmp_path)
    second = lease_worker_user(TEST_UIDS[:2], tmp_path)
    try:
        assert first.uid != second.uid
        with pytest.raises(NoWorkerUser, match="all 2 worker user ids"):
            lease_worker_user(TEST_UIDS[:2], tmp_path)
        first.release()
        again = lease_worker_user(TEST_UIDS[:2], tmp_path)
        assert again.uid == first.uid
        again.release()
    finally:
        first.release()
        second.release()


def test_a_user_id_held_by_another_process_is_skipped(tmp_path: Path) -> None:
    import subprocess
    import sys

    held = TEST_UIDS[0]
    holder = subprocess.Popen(  # another pool's process holding the lease of ``held``
        [sys.executable, "-c",
         "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
         str(tmp_path / str(held))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        lease = lease_worker_user(range(held, held + 2), tmp_path)
        assert lease.uid == held + 1
        lease.release()
    finally:
        holder.kill()
        holder.wait()
    lease = lease_worker_user(range(held, held + 1), tmp_path)  # its process is gone: so is its lease
    assert lease.uid == held
    lease.release()


def test_a_user_id_with_a_name_or_a_process_is_never_leased(tmp_path: Path) -> None:
    with pytest.raises(NoWorkerUser):  # root: named, and running processes
        lease_worker_user(range(0, 1), tmp_path)
    own = os.getuid()
    with pytest.raises(NoWorkerUser):
        lease_worker_user(range(own, own + 1), tmp_path)


def test_the_lock_folder_must_be_a_folder_nobody_else_may_write(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="nobody else may write"):
        lease_worker_user(TEST_UIDS, shared)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    with pytest.raises(PermissionError):
        lease_worker_user(TEST_UIDS, link)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root drops users")
def test_a_sandboxed_worker_of_a_root_service_is_never_started_without_a_user(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="user id of its own"):
        worker_command("bubblewrap", tmp_path, SandboxConfig(), None, 3, bwrap="/usr/bin/bwrap")
    command = worker_command("bubblewrap", tmp_path, SandboxConfig(), None, 3, "/usr/bin/bwrap", TEST_UIDS[0])
    assert command.user == TEST_UIDS[0] and command.argv[-1] == str(TEST_UIDS[0])


# --- the driver's compile cache ----------------------------------------------------------------------


def test_a_sealed_compile_cache_is_read_only_and_given_as_nodes_own_folder(tmp_path: Path) -> None:
    cache = tmp_path / "node-cache"
    filled = cache / "v26.0.0-x64-abcd-0"
    (filled / "sub").mkdir(parents=True)
    (filled / "sub" / "entry").write_bytes(b"compiled")

    assert seal_node_cache(cache) == filled
    assert (filled / "sub" / "entry").stat().st_mode & 0o777 == 0o444
    assert filled.stat().st_mode & 0o777 == 0o555 and cache.stat().st_mode & 0o777 == 0o555
    sandbox.remove_dir(cache)  # the pool removes it with its folder, read-only or not
    assert not cache.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert seal_node_cache(empty) is None


def test_a_worker_reads_the_compile_cache_where_node_looks_for_its_own_user(tmp_path: Path) -> None:
    filled = tmp_path / "node-cache" / "v26.0.0-x64-abcd-0"
    filled.mkdir(parents=True)
    user = TEST_UIDS[0] if os.geteuid() == 0 else None

    cache = NodeCache(compile_cache=filled)
    boxed = worker_command("bubblewrap", tmp_path, SandboxConfig(), None, 3, "/usr/bin/bwrap", user, cache)
    plain = worker_command("off", tmp_path, SandboxConfig(), None, 3, node_cache=cache)

    inner_uid = user if user is not None else os.getuid()
    joined = " ".join(boxed.argv)
    assert f"--ro-bind {filled} {sandbox.SANDBOX_NODE_CACHE}/v26.0.0-x64-abcd-{inner_uid}" in joined
    assert boxed.env[sandbox.NODE_CACHE_ENV] == sandbox.SANDBOX_NODE_CACHE
    assert plain.env[sandbox.NODE_CACHE_ENV] == str(filled.parent)  # the same user filled it
    assert sandbox.NODE_CACHE_ENV not in worker_command("off", tmp_path, SandboxConfig(), None, 3).env


def test_where_run_cannot_hold_the_locks_they_go_to_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("")
    name = f"scenariokit-test-uids-{os.getpid()}"
    monkeypatch.setattr(sandbox, "WORKER_UID_LOCKS", blocked / name)  # cannot be made: a file's child
    fallback = Path("/tmp") / name
    try:
        lease = lease_worker_user(TEST_UIDS)
        assert (fallback / str(lease.uid)).is_file()
        lease.release()
    finally:
        sandbox.remove_dir(fallback)


def test_removing_a_folder_another_cleaner_empties_meanwhile_raises_nothing(tmp_path: Path) -> None:
    """Two pools starting at once may both clean a dead pool's folder: what vanished is not an error."""
    gone = tmp_path / "gone" / "Default" / "PersistentOriginTrials"
    root = str(tmp_path / "gone")
    # what rmtree reports when a file it listed was removed by someone else before it got there
    sandbox.writable_and_again(os.open, str(gone), FileNotFoundError(2, "No such file or directory"), root)
    sandbox.writable_and_again(os.unlink, str(gone), FileNotFoundError(2, "No such file or directory"), root)

    unreadable = tmp_path / "unreadable"
    (unreadable / "inside").mkdir(parents=True)
    denied = PermissionError(13, "Permission denied")
    sandbox.writable_and_again(os.open, str(unreadable), denied, str(unreadable))
    assert not unreadable.exists()  # a folder it could not enter is made readable and removed whole


def test_a_folder_that_cannot_be_removed_leaves_the_mode_of_its_parent_alone(tmp_path: Path) -> None:
    """A pool's folder lies in /tmp: a failure removing it must never close /tmp (it once did, as root)."""
    shared = tmp_path / "tmp"
    folder = shared / "scenariokit-pool-1-x"
    (folder / "run").mkdir(parents=True)
    shared.chmod(0o1777)
    busy = OSError(39, "Directory not empty")
    # rmtree's last call, removing the folder itself, failed (something wrote into it meanwhile)
    sandbox.writable_and_again(os.rmdir, str(folder), busy, str(folder))
    sandbox.writable_and_again(os.open, str(folder), PermissionError(13, "Permission denied"), str(folder))
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    # and a whole removal whose root vanished under it changes nothing either
    sandbox.remove_dir(folder)
    assert not folder.exists() and stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_a_folder_is_under_another_by_whole_path_parts() -> None:
    under = sandbox._under
    assert under(Path("/srv/store/venv"), Path("/srv/store"))
    assert under(Path("/srv/store"), Path("/srv/store"))
    assert under(Path("/srv/store"), Path("/"))
    assert not under(Path("/srv/store-code"), Path("/srv/store")), "a sibling sharing a prefix"
    assert not under(Path("/srv"), Path("/srv/store"))


def _uids_read_line_by_line() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("Uid:"):
                        found.add(int(line.split()[1]))
    return found


def test_the_user_id_scan_finds_the_real_user_of_every_process() -> None:
    # processes come and go: compared while the machine's set of users stays the same around the scan
    for _ in range(10):
        before = _uids_read_line_by_line()
        found = sandbox._uids_in_use()
        if before == _uids_read_line_by_line():
            assert found == before
            assert os.getuid() in found
            return
    pytest.skip("the users of this machine's processes kept changing")
