"""How a worker process is started so that step code cannot reach the service (docs/security.md).

Every worker gets a minimal environment (no ``SCENARIOKIT_*`` variable, no database URL, no key), a
private directory that is its working directory, ``HOME`` and ``TMPDIR`` (Chromium's profile lands
there) and that is removed once the worker is gone, and per-run resource limits. With bubblewrap it
also gets its own PID namespace, a read-only view of the machine with the store's files and the
server's working directory hidden, a private ``/tmp``, and (when the service runs as root) a real
unprivileged user id of its own, which no other live worker has.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import pwd
import random
import re
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal, cast

import attrs

from scenariokit.domain.errors import ScenarioKitError
from scenariokit.runner.confinement.driver_snapshot import (
    LAUNCHER_NAME,
    NODE_PATH_ENV,
    SANDBOX_DRIVER_SNAPSHOT,
)
from scenariokit.runner.confinement.driver_zygote import (
    DRIVER_ZYGOTE_ENV,
    SANDBOX_DRIVER_ZYGOTE,
    ZYGOTE_LAUNCHER_NAME,
)
from scenariokit.runner.confinement.processes import namespace_inode, pid_alive

SandboxMode = Literal["auto", "bubblewrap", "off"]
SandboxKind = Literal["bubblewrap", "none"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("auto", "bubblewrap", "off")
SANDBOX_ENV = "SCENARIOKIT_SANDBOX"
MEMORY_ENV = "SCENARIOKIT_RUN_MEMORY_MB"
#: ``false`` (or ``0``, ``no``): workers start the Playwright driver without the pool's snapshot
DRIVER_SNAPSHOT_ENV = "SCENARIOKIT_DRIVER_SNAPSHOT"
DEFAULT_MEMORY_MB = 2048

#: The user ids workers run as when the service runs as root: each live worker leases one of its own
#: (:func:`lease_worker_user`), so no two runs share the per-user process limit (``RLIMIT_NPROC``
#: counts every task of a user) or may signal each other's processes. They are unnamed ids above the
#: ranges distributions and container managers hand out (systemd's "UIDS-GIDS" leaves
#: 0x70000000-0x7ffdffff unused); an id that has a name here, or any process, is skipped.
WORKER_UIDS = range(0x7000_0000, 0x7000_0000 + 4096)
#: where the pools of every scenariokit process on the host lock the worker user ids they hold
WORKER_UID_LOCKS = Path("/run/scenariokit-worker-uids")
#: where the worker's private directory appears inside the bubblewrap sandbox
SANDBOX_RUN_DIR = "/tmp/scenariokit-run"
#: variables a worker keeps from the service's environment (exact names, or prefixes ending in ``*``)
KEPT_VARIABLES = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "PLAYWRIGHT_BROWSERS_PATH",
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
)
POOL_DIR_PREFIX = "scenariokit-pool-"
#: a tmpfs where workers without a sandbox keep their temporary folder (:func:`memory_folder_base`)
MEMORY_FOLDER_BASE = Path("/dev/shm")
#: the room that tmpfs must have free for it (Docker gives containers 64 MiB, which Chromium needs)
MEMORY_FOLDER_MIN_MB = 512
#: the link, in the private directory of a worker without a sandbox, to its folder in memory
MEMORY_LINK = "memory"
X11_SOCKETS = "/tmp/.X11-unix"


class SandboxUnavailable(ScenarioKitError):
    """``SCENARIOKIT_SANDBOX=bubblewrap`` on a machine where bubblewrap cannot start a worker."""


def parse_sandbox_mode(raw: str) -> SandboxMode:
    """A ``SCENARIOKIT_SANDBOX`` value; ValueError naming the allowed ones."""
    if raw not in SANDBOX_MODES:
        raise ValueError(f"must be one of {', '.join(SANDBOX_MODES)}")
    return cast(SandboxMode, raw)


@attrs.frozen
class ResourceLimits:
    """Per-run limits set in the worker right before step code runs (``setrlimit``).

    ``memory_mb`` bounds how much the worker's address space may grow during the run (``RLIMIT_AS``
    on top of what it holds when the run starts), so it covers the step code's own allocations and
    every process it starts; Chromium and the Playwright driver were started before and keep their
    own (unbounded) limits. ``processes`` is ``RLIMIT_NPROC`` on top of the tasks the worker's user
    already has; it binds only an unprivileged user (the kernel exempts root).
    """

    memory_mb: int = DEFAULT_MEMORY_MB
    processes: int = 512
    file_size_mb: int = 1024
    open_files: int = 1024


@attrs.frozen
class SandboxConfig:
    """How workers are confined: the mode asked for, the limits, and what must stay hidden."""

    mode: SandboxMode = "auto"
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    #: files and folders of the service (database, key, artifacts) hidden from the worker
    hidden: tuple[Path, ...] = ()
    #: extra environment variables a worker keeps (``SCENARIOKIT_*`` never pass)
    pass_env: tuple[str, ...] = ()
    #: whether the pool builds the driver's start-up snapshot for its workers
    driver_snapshot: bool = True
    #: whether each run's driver is forked from the process's driver zygote where this Node.js can run
    #: one (``runner/confinement/driver_zygote.py``); it needs the snapshot, whose launcher is its fallback
    driver_zygote: bool = True
    #: whether workers are forked from the pool's zygote where it can (:mod:`.zygote`); else by exec
    zygote: bool = True

    @classmethod
    def from_settings(
        cls,
        *,
        sandbox: SandboxMode = "auto",
        run_memory_mb: int = DEFAULT_MEMORY_MB,
        driver_snapshot: bool = True,
        driver_zygote: bool = True,
        **fields: Any,
    ) -> SandboxConfig:
        """The config the settings of :data:`SANDBOX_SETTINGS` make, given by their names; ``fields`` set
        the rest (``hidden``, ``pass_env``, ``zygote``). The service's ``Settings.sandbox_config`` and
        :meth:`from_env` both make theirs here."""
        return cls(
            mode=sandbox,
            limits=ResourceLimits(memory_mb=run_memory_mb),
            driver_snapshot=driver_snapshot,
            driver_zygote=driver_zygote,
            **fields,
        )

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] = os.environ, *, hidden: Iterable[Path] = (), **fields: Any
    ) -> SandboxConfig:
        """The config of the variables of :data:`SANDBOX_SETTINGS` (an unset or empty one keeps its
        default); ``fields`` set the rest, and win over a variable where they name the same setting.

        The service checked the variables' values when it started (``settings.py``); here a bad one
        raises ValueError naming its variable (:func:`read_variables`).
        """
        values = read_variables(SANDBOX_SETTINGS, environ)
        for name in SANDBOX_SETTINGS.keys() & fields.keys():  # given, a setting wins over its variable
            values[name] = fields.pop(name)
        return cls.from_settings(**values, hidden=tuple(hidden), **fields)


def read_variables(
    table: Mapping[str, tuple[str, Callable[[str], Any]]],
    environ: Mapping[str, str],
    error: Callable[[str], Exception] = ValueError,
) -> dict[str, Any]:
    """The values of the settings ``table`` names (setting → its variable and its parser), read from
    ``environ``: an unset or blank variable is left out, a set one is parsed with its spaces trimmed.

    A value its parser refuses raises ``error`` with ``SCENARIOKIT_X='value' is invalid: why``, so the
    library, the pytest plugin and the server (whose :class:`~scenariokit.settings.SettingsError` is
    ``error``) all name the variable to mend.
    """
    values: dict[str, Any] = {}
    for name, (variable, parse) in table.items():
        raw = environ.get(variable)
        if raw is None or not raw.strip():
            continue
        try:
            values[name] = parse(raw.strip())
        except (TypeError, ValueError) as exc:
            raise error(f"{variable}={raw!r} is invalid: {exc}") from None
    return values


def parse_flag(raw: str) -> bool:
    """A yes/no setting's value: ``true``, ``1``, ``yes`` or ``false``, ``0``, ``no`` (any case)."""
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(raw.lower())
    if value is None:
        raise ValueError("must be one of true, false, 1, 0, yes, no")
    return value


def parse_memory_mb(raw: str) -> int:
    """A ``SCENARIOKIT_RUN_MEMORY_MB`` value: a whole number of MiB, at least 64."""
    if not raw.isdigit() or int(raw) < 64:
        raise ValueError("must be a whole number of MiB, at least 64")
    return int(raw)


#: The settings a pool's confinement is made of, by name (``Settings``' own): the ``SCENARIOKIT_*``
#: variable each is read from and how its value is read. ``settings.py`` reads the service's through
#: this table, and :meth:`SandboxConfig.from_env` the library's and the pytest plugin's; both make
#: their config with :meth:`SandboxConfig.from_settings`.
SANDBOX_SETTINGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "sandbox": (SANDBOX_ENV, parse_sandbox_mode),
    "run_memory_mb": (MEMORY_ENV, parse_memory_mb),
    "driver_snapshot": (DRIVER_SNAPSHOT_ENV, parse_flag),
    "driver_zygote": (DRIVER_ZYGOTE_ENV, parse_flag),
}


def store_paths(database_url: str | None, artifacts_dir: Path | None) -> tuple[Path, ...]:
    """What a worker must not see of a store: a SQLite file's folder (the key lives beside it), artifacts."""
    from scenariokit.storage.sqlalchemy import sqlite_path

    hidden = []
    path = sqlite_path(database_url) if database_url else None
    if path is not None:
        hidden.append(path.resolve().parent)
    if artifacts_dir is not None:
        hidden.append(Path(artifacts_dir).resolve())
    return tuple(hidden)


# --- bubblewrap ------------------------------------------------------------------------------------


def bubblewrap_path() -> str | None:
    """The ``bwrap`` executable on ``PATH``, if any."""
    return shutil.which("bwrap")


def bubblewrap_works() -> bool:
    """Whether the ``bwrap`` on ``PATH`` starts a process here with the flags workers use."""
    return bubblewrap_problem() is None


def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot confine workers here (in words naming what is missing), or None: found by
    starting a sandbox, never guessed from the system or the user."""
    found = bubblewrap_path()
    if found is None:
        return "bwrap is not installed (not found on PATH)"
    return _probe(found)


@cache
def _probe(bwrap: str) -> str | None:
    """Start ``true`` under ``bwrap`` (once per executable: the answer does not change while we run)."""
    argv = [bwrap, *_base_flags(), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, env={"PATH": os.defpath})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap} cannot start a sandbox here: {type(exc).__name__}: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{bwrap} cannot start a sandbox here: {said[-1] if said else f'exit {done.returncode}'}"
    return None


#: why a sandbox that shares the service's user namespace (root's) cannot be entered through its own
_NO_OWN_USER_NAMESPACE = "the sandbox has no user namespace of its own"

#: Run by :func:`_probed` in a fresh interpreter: join the namespaces of the process whose pid is its
#: first argument, as the zygotes join a worker's sandbox from the host's user namespace; or
#: (``user``) as the worker zygote's go-between joins a sandbox in a user namespace of its own: a
#: child enters it with the others and forks a process there
#: (``zygote_process._fork_through_user_namespace``).
_JOIN_PROBE = (
    "import ctypes,os,sys\n"
    "fd=os.pidfd_open(int(sys.argv[1]))\n"
    "libc=ctypes.CDLL(None,use_errno=True)\n"
    "def why(what):\n"
    "    os.write(2,(what+': '+os.strerror(ctypes.get_errno())+'\\n').encode());os._exit(1)\n"
    "if sys.argv[2]=='host':\n"
    "    libc.setns(fd,0x20000000|0x00020000|0x08000000)==0 or why('setns')\n"
    "    sys.exit(0)\n"
    "if os.stat(f'/proc/{sys.argv[1]}/ns/user').st_ino==os.stat('/proc/self/ns/user').st_ino:\n"
    f"    sys.exit({_NO_OWN_USER_NAMESPACE!r})\n"
    "between=os.fork()\n"
    "if between==0:\n"
    "    libc.setns(fd,0x10000000|0x20000000|0x00020000|0x08000000)==0 or why('setns')\n"
    "    os._exit(os.waitstatus_to_exitcode(os.waitpid(os.fork() or os._exit(0),0)[1]))\n"
    "sys.exit(os.waitstatus_to_exitcode(os.waitpid(between,0)[1]))\n"
)


def sandbox_join_problem(bwrap: str, *, own_user_namespace: bool = False) -> str | None:
    """Why a process of this service cannot join a bubblewrap sandbox's PID, mount and IPC namespaces
    (what both zygotes do to start a worker or a driver in one), or None: found by starting a sandbox
    and joining it, once per process (:func:`_probed`).

    A service running as root can; an ordinary user's bubblewrap puts the sandbox in a user namespace
    of its own, and joining namespaces owned by it needs ``CAP_SYS_ADMIN`` in the service's own user
    namespace too, which such a user does not have (docs/deployment.md). With ``own_user_namespace``
    the question is whether a child can enter such a sandbox's user namespace with the others and
    start a worker there as the worker zygote's go-between does; None only where the sandbox has a
    user namespace of its own.
    """
    probe = _probed(bwrap)
    return probe.through_own if own_user_namespace else probe.from_host


@attrs.frozen
class _SandboxProbe:
    """What one probe sandbox told (:func:`_probed`)."""

    #: why its namespaces cannot be joined from the service's user namespace, or None
    from_host: str | None
    #: why it cannot be entered through a user namespace of its own, or None
    through_own: str | None
    #: how many user namespaces below the service's its processes are (None: not known)
    user_depth: int | None


@cache
def _probed(bwrap: str) -> _SandboxProbe:
    """Start one sandbox and find in it all that the zygotes ask of it, once per process: whether it can
    be joined either way, and how deep its user namespace is."""
    try:
        with _probe_sandbox(bwrap) as child:
            try:
                depth = user_namespace_depth(child)
            except OSError:
                depth = None
            from_host = _join_problem(child, "host")
            if depth == 0:  # it shares the service's user namespace: known without asking
                through_own: str | None = _cannot_join(_NO_OWN_USER_NAMESPACE)
            else:
                through_own = _join_problem(child, "user")
    except _NoSandbox as exc:
        return _SandboxProbe(from_host=str(exc), through_own=str(exc), user_depth=None)
    return _SandboxProbe(from_host=from_host, through_own=through_own, user_depth=depth)


def _join_problem(child: int, mode: str) -> str | None:
    """Run :data:`_JOIN_PROBE` on the probe sandbox's first process ``child`` in ``mode``."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _JOIN_PROBE, str(child), mode],
        capture_output=True,
        timeout=20,
        env={},
    )
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return _cannot_join(said[-1] if said else f"exit {done.returncode}")
    return None


def _cannot_join(why: str) -> str:
    return f"a sandbox's namespaces cannot be joined from outside it ({why})"


class _NoSandbox(Exception):
    """No sandbox could be started to probe (the message says why)."""


@contextlib.contextmanager
def _probe_sandbox(bwrap: str) -> Iterator[int]:
    """A bubblewrap sandbox with the workers' base flags holding a shell that waits: its first
    process's host pid once the sandbox is set up (the shell said so: bubblewrap names its first
    process before it has made every namespace), for as long as the block runs. Raises
    :class:`_NoSandbox`."""
    info_read, info_write = os.pipe()
    try:
        box = subprocess.Popen(
            [bwrap, *_base_flags(), "--info-fd", str(info_write), "--", *SANDBOX_WAITER],
            pass_fds=(info_write,),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.defpath},
        )
    except OSError as exc:
        os.close(info_read)
        raise _NoSandbox(f"{bwrap} did not start: {exc}") from None
    finally:
        os.close(info_write)
    try:
        try:
            with os.fdopen(info_read, "rb") as info:
                described = info.read()
            child = int(json.loads(described)["child-pid"])
            assert box.stdout is not None
            if box.stdout.readline() != b"ready\n":
                raise ValueError("the sandbox's shell did not start")
        except (OSError, ValueError, KeyError) as exc:
            raise _NoSandbox(f"no sandbox to join: {type(exc).__name__}: {exc}") from None
        yield child
    except subprocess.SubprocessError as exc:
        raise _NoSandbox(f"no sandbox to join: {type(exc).__name__}: {exc}") from None
    finally:
        assert box.stdin is not None and box.stdout is not None
        box.stdin.close()
        box.kill()
        box.wait()
        box.stdout.close()


#: ``ioctl`` on a namespace's file: the file of the user namespace that owns it (or is its parent)
NS_GET_PARENT = 0xB702


def sandbox_user_depth(bwrap: str) -> int | None:
    """How many user namespaces below the service's a bubblewrap sandbox's processes are, each made by
    the service's user; None when the sandbox shares the service's (root's) or cannot be probed.

    An ordinary user's bubblewrap makes one, then another inside it (so that the mounts made in the
    first are locked for the sandboxed process). The driver zygote serves a requester only at exactly
    that depth: a namespace step code makes inside its sandbox is deeper.
    """
    return _probed(bwrap).user_depth or None


def user_namespace_depth(pid: int) -> int | None:
    """How many user namespaces process ``pid``'s is below this process's (0: the same), or None when
    it is not below it (or cannot be read)."""
    own = namespace_inode("user")
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        for depth in range(33):  # the kernel nests user namespaces 32 deep at most
            if os.fstat(fd).st_ino == own:
                return depth
            parent = fcntl.ioctl(fd, NS_GET_PARENT)
            os.close(fd)
            fd = parent
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def sandbox_entry_problem(bwrap: str) -> str | None:
    """Why neither zygote can put what it forks into a bubblewrap sandbox here, or None.

    Root joins a sandbox from the host's user namespace; an ordinary user's sandbox has a user
    namespace of its own, which the zygotes' go-between enters first (docs/deployment.md). The reason
    given is the host's unless the sandbox has a user namespace of its own.
    """
    why = sandbox_join_problem(bwrap)
    if why is None:
        return None
    through = sandbox_join_problem(bwrap, own_user_namespace=True)
    if through is None or _NO_OWN_USER_NAMESPACE not in through:
        return through
    return why


def resolve_sandbox(mode: SandboxMode) -> SandboxKind:
    """What ``mode`` gives here; :class:`SandboxUnavailable` when bubblewrap is required and absent."""
    if mode == "off":
        return "none"
    why = bubblewrap_problem()
    if why is None:
        return "bubblewrap"
    if mode == "bubblewrap":
        raise SandboxUnavailable(
            f"{SANDBOX_ENV}=bubblewrap but {why}: install the bubblewrap package (apt-get install "
            f"bubblewrap) where user namespaces are allowed, or set {SANDBOX_ENV}=auto or off"
        )
    return "none"


def sandbox_fallback(mode: SandboxMode) -> str | None:
    """What ``auto`` left out here, in words for the start-up log and ``/health``; None when nothing."""
    if mode != "auto":
        return None
    why = bubblewrap_problem()
    if why is None:
        return None
    return f"bubblewrap: {why}; workers run without a sandbox ({SANDBOX_ENV}=auto)"


def sandbox_status(mode: SandboxMode) -> SandboxKind:
    """``"bubblewrap"`` or ``"none"`` (for ``/health`` and the start-up line); never raises."""
    try:
        return resolve_sandbox(mode)
    except SandboxUnavailable:
        return "none"


#: the worker's own empty /tmp (see :func:`_base_flags`)
PRIVATE_TMP = Path("/tmp")


def private_tmp(home: str | Path) -> str:
    """The ``tmp/`` of a worker's private directory ``home`` (as the worker sees it): on disk, unlike a
    sandbox's ``/tmp``; ``TMPDIR`` without a sandbox, the browser's downloads and traces with one."""
    return f"{home}/tmp"


def worker_tmp(kind: SandboxKind, run_dir: str | Path | None = None) -> str | None:
    """A worker's ``TMPDIR`` where it is not its private directory's ``tmp/``: under bubblewrap, the
    sandbox's own ``/tmp``; without a sandbox, the private directory ``run_dir``'s link to its folder
    in memory, where :func:`make_run_dir` made one (:func:`memory_folder_base`).

    Either is a tmpfs, so Chromium's profile (about fifty files a launch) is made in memory instead of
    on the disk: on ext4, making files where many were just deleted costs the kernel a scan of the
    recently freed inodes, and removing them costs the worker's stop (docs/architecture.md, "Where a
    run's files go"). What may grow large goes to the private directory on disk all the same: the
    browser's downloads and traces (``WorkerOptions.files_dir``), screenshots and videos (the
    artifacts folder). Pages written to the tmpfs count against the run's memory limit, like the rest
    of its memory (its control group's, where the pool makes one).
    """
    if kind == "bubblewrap":
        return str(PRIVATE_TMP)
    if run_dir is not None and os.path.islink(link := os.path.join(run_dir, MEMORY_LINK)):
        return link
    return None


def _base_flags() -> list[str]:
    return [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--perms", "01777", "--tmpfs", str(PRIVATE_TMP),
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
    ]  # fmt: skip


def _under(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both absolute and normalized).

    Compared as text: ``Path.parents`` builds a path per level, and a worker's start asks this a
    few hundred times.
    """
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def _existing(paths: Iterable[str | Path]) -> list[Path]:
    found = []
    for raw in paths:
        if not raw:
            continue
        with contextlib.suppress(OSError):
            path = Path(raw).resolve()
            if path.exists():
                found.append(path)
    return found


def needed_paths(browser_executable: str | None) -> list[Path]:
    """What the worker must read: the interpreter, the import path, the browser's folder."""
    return list(_needed_paths(browser_executable, tuple(sys.path), os.getcwd()))


@lru_cache(maxsize=16)
def _needed_paths(browser_executable: str | None, path: tuple[str, ...], cwd: str) -> tuple[Path, ...]:
    """:func:`needed_paths` for an import path and working directory (resolved once: every worker asks)."""
    import scenariokit

    interpreter: list[str | Path] = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        Path(sys.executable).parent,
    ]
    package = Path(scenariokit.__file__).resolve().parent.parent
    browser = [Path(browser_executable).resolve().parent] if browser_executable else []
    return tuple(_existing([*interpreter, Path(sys.executable).resolve().parent, *path, package, *browser]))


def hidden_folders(hidden: Sequence[Path]) -> list[Path]:
    """The folders the sandbox covers: the given ones, the server's working directory, root's home."""
    folders = [*(Path(p) for p in hidden), Path.cwd().resolve(), Path.home().resolve()]
    if os.geteuid() == 0:
        folders.append(Path("/root"))
    unique: list[Path] = []
    for folder in folders:
        if folder != Path("/") and folder not in unique:
            unique.append(folder)
    return unique


def bubblewrap_argv(
    run_dir: Path, hidden: Sequence[Path], needed: Sequence[Path], bwrap: str | None = None
) -> list[str]:
    """The ``bwrap`` command line for one worker (the Python command follows ``--``).

    Hidden folders become empty ``tmpfs`` mounts; whatever the worker needs inside them (the
    interpreter under ``/root/.pyenv``, the source folder under the server's working directory) is
    bound back read-only; the private run directory is the one writable place that outlives ``/tmp``.
    """
    bwrap = bwrap or bubblewrap_path()
    if bwrap is None:
        raise SandboxUnavailable("bwrap is not installed")
    argv = [bwrap, *_base_flags()]
    folders = [f for f in hidden_folders(hidden) if f.is_dir()]
    for folder in sorted(folders, key=lambda p: len(p.parts)):
        # /tmp itself (the store's folder or the server's working directory may be it) is hidden
        # already: the sandbox's own empty /tmp, which everyone may write (the base flags). A second
        # tmpfs of mode 0755 over it would leave the worker's user no TMPDIR to write, and every
        # launch would fail. It stays among the folders, so nothing that holds it is bound back.
        if folder != PRIVATE_TMP:
            argv += ["--perms", "0755", "--tmpfs", str(folder)]
    # /tmp is a private tmpfs too (the base flags): what the worker needs under it (a checkout and its
    # virtualenv in /tmp, as a CI clone may be) is bound back like what the hidden folders cover.
    covers = [*folders, PRIVATE_TMP]
    made: set[Path] = set()
    bound: list[Path] = []
    for path in sorted(set(needed), key=lambda p: len(p.parts)):
        covering = [folder for folder in covers if _under(path, folder)]
        # Never a needed folder that is (or holds) a covered one, /tmp included: bound back read-only,
        # /tmp itself (the folder of a script run from there, first on its import path) left the
        # worker no /tmp to write, and no run could start. What it holds directly stays hidden.
        if not covering or any(_under(folder, path) for folder in covers):
            continue
        if any(_under(path, done) for done in bound):
            continue
        top = max(covering, key=lambda p: len(p.parts))
        for ancestor in reversed(path.parents):  # bwrap would make them 0700: unreadable for the worker
            if _under(ancestor, top) and ancestor != top and ancestor not in made:
                argv += ["--perms", "0755", "--dir", str(ancestor)]
                made.add(ancestor)
        argv += ["--ro-bind", str(path), str(path)]
        bound.append(path)
    for file in (Path(p) for p in hidden):
        if file.is_file():
            argv += ["--ro-bind", "/dev/null", str(file)]
    if os.environ.get("DISPLAY") and Path(X11_SOCKETS).is_dir():  # a headed run draws on the host's X server
        argv += ["--ro-bind", X11_SOCKETS, X11_SOCKETS]
    argv += ["--bind", str(run_dir), SANDBOX_RUN_DIR, "--chdir", SANDBOX_RUN_DIR]
    return argv


# --- the worker's process ----------------------------------------------------------------------------


def _kept(name: str, extra: Iterable[str]) -> bool:
    if name.startswith("SCENARIOKIT_"):
        return False
    for pattern in (*KEPT_VARIABLES, *extra):
        if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return True
    return False


def worker_environment(
    home: str,
    *,
    environ: Mapping[str, str] = os.environ,
    extra: Iterable[str] = (),
    tmp: str | None = None,
) -> dict[str, str]:
    """The whole environment of a worker: a few harmless variables, and ``HOME``/``TMPDIR`` private.

    ``TMPDIR`` is ``tmp`` when given (a sandbox's own ``/tmp``: see :func:`worker_tmp`), else the
    private directory's ``tmp/``.
    """
    extra = tuple(extra)
    env = {name: value for name, value in environ.items() if _kept(name, extra)}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env["HOME"] = f"{home}/home"
    env["TMPDIR"] = tmp or private_tmp(home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


#: Runs in the new interpreter before anything else: the drop to the unprivileged user (argv[3], when
#: given) comes before a single module is imported, then the parent's import path, then the worker.
#: bubblewrap sets ``PWD``, which a worker forked by the zygote does not have: taken out, a worker's
#: environment is the same however it was started, and the driver zygote, which checks a run's list
#: of variables against the one its driver read while loading, serves it.
BOOTSTRAP = (
    "import os,sys,json\n"
    "os.environ.pop('PWD',None)\n"
    "if sys.argv[3]:os.setgroups([]);os.setgid(int(sys.argv[3]));os.setuid(int(sys.argv[3]))\n"
    "sys.path[:]=json.loads(sys.argv[1])\n"
    "from scenariokit.runner.worker.process import worker_entry;worker_entry(int(sys.argv[2]))"
)


#: Node reads the code V8 compiled for the Playwright driver's modules from here instead of compiling
#: them again in every worker (about a fifth of the driver's start-up CPU).
NODE_CACHE_ENV = "NODE_COMPILE_CACHE"
#: where a sandboxed worker finds the compile cache (Node looks in ``<dir>/<version>-<arch>-<tag>-<uid>``:
#: the one folder the pool filled is bound there under the worker's own uid)
SANDBOX_NODE_CACHE = "/tmp/scenariokit-node-cache"

#: What fills the compile cache: the Playwright driver started (and, with ``argv[1]``'s launch options,
#: a browser launched and a page opened) by the pool itself, never by a worker: workers only read it.
NODE_CACHE_FILLER = (
    "import asyncio,json,sys\n"
    "from playwright.async_api import async_playwright\n"
    "async def fill(options):\n"
    "    async with async_playwright() as playwright:\n"
    "        if options:\n"
    "            browser = await playwright.chromium.launch(**options)\n"
    "            await (await browser.new_context()).new_page()\n"
    "            await browser.close()\n"
    "asyncio.run(fill(json.loads(sys.argv[1])))\n"
)


def node_cache_filler(
    folder: Path, scratch: Path, launch_options: Mapping[str, object] | None
) -> tuple[list[str], dict[str, str]]:
    """The command (argv, environment) that fills ``folder`` with the driver's compile cache.

    It runs as the service's user outside any sandbox, but executes only Playwright's own code (no
    step code), with a worker's minimal environment and ``scratch`` as its home and temporary folder.
    """
    for sub in ("home", "tmp"):
        (scratch / sub).mkdir(parents=True, exist_ok=True)
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)  # sealed later; a worker's user must be able to pass into it
    env = worker_environment(str(scratch))
    env[NODE_CACHE_ENV] = str(folder)
    argv = [sys.executable, "-I", "-c", NODE_CACHE_FILLER, json.dumps(dict(launch_options or {}))]
    return argv, env


def seal_node_cache(folder: Path) -> Path | None:
    """Make a filled compile cache read-only (only the pool ever writes it); the folder Node filled.

    Node keeps its cache in a subfolder named after its version and the user id that wrote it; that
    subfolder is what a worker is given (None when the filling left none, or more than one).
    """
    for path in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)
    filled = [path for path in folder.iterdir() if path.is_dir() and any(path.iterdir())]
    return filled[0] if len(filled) == 1 else None


@attrs.frozen
class NodeCache:
    """What the pool prepared once so that every worker's Playwright driver starts with less work."""

    #: the folder of the driver's compile cache Node filled (:func:`seal_node_cache`)
    compile_cache: Path | None = None
    #: the folder of the driver's start-up snapshot (``runner/confinement/driver_snapshot.py``)
    snapshot: Path | None = None
    #: the folder of the pool's driver zygote: its socket and the launcher that asks it for a driver
    zygote: Path | None = None


@attrs.frozen
class WorkerCommand:
    """How to start one worker: argv, environment, where its private directory is on each side."""

    argv: list[str]
    env: dict[str, str]
    run_dir: Path
    #: the private directory as the worker sees it
    inner_dir: str
    #: whether the process started is bubblewrap (its exit code carries a signal as 128 + n)
    bubblewrap: bool
    #: the user the worker runs as (None: the service's own)
    user: int | None


def drops_user(kind: SandboxKind) -> bool:
    """Whether workers started under ``kind`` run as a user of their own (bubblewrap, service as root)."""
    return kind == "bubblewrap" and hasattr(os, "geteuid") and os.geteuid() == 0


def worker_command(
    kind: SandboxKind,
    run_dir: Path,
    config: SandboxConfig,
    browser_executable: str | None,
    fd: int,
    bwrap: str | None = None,
    user: int | None = None,
    node_cache: NodeCache | None = None,
) -> WorkerCommand:
    """The command that starts a worker in ``run_dir`` under the ``kind`` of sandbox, its pipe on ``fd``.

    ``user`` is the id the worker switches to before it imports anything (its lease,
    :func:`lease_worker_user`, when :func:`drops_user`); it is only taken under bubblewrap.
    ``node_cache`` is what the pool prepared for the driver: the compile cache (under bubblewrap
    bound read-only where Node looks for the worker's own user id) and the start-up snapshot (bound
    read-only, its launcher named by ``PLAYWRIGHT_NODEJS_PATH``).
    """
    plan = worker_plan(kind, run_dir, config, browser_executable, bwrap, user, node_cache)
    python = [sys.executable, "-I", "-c", BOOTSTRAP, json.dumps(worker_import_path())]
    argv = [*plan.argv, "--", *python] if plan.bubblewrap else python
    argv += [str(fd), str(plan.user) if plan.user is not None else ""]
    return attrs.evolve(plan, argv=argv)


#: What a sandbox started for a worker forked by the zygote (:mod:`.zygote`) runs: a shell that says
#: the sandbox is set up (its first line, written once every mount is in place), then waits on its
#: standard input, which only the pool holds, until it is killed with the sandbox.
SANDBOX_WAITER = ("/bin/sh", "-c", "echo ready; read _")


def sandbox_command(
    run_dir: Path,
    config: SandboxConfig,
    browser_executable: str | None,
    info_fd: int,
    bwrap: str | None = None,
    user: int | None = None,
    node_cache: NodeCache | None = None,
) -> WorkerCommand:
    """The bubblewrap sandbox of a worker the zygote forks (the same one :func:`worker_command` makes).

    It runs :data:`SANDBOX_WAITER` instead of Python and writes its first process's host pid and
    namespaces to ``info_fd``; ``env`` is what the worker forked into it takes as its environment.
    """
    plan = worker_plan("bubblewrap", run_dir, config, browser_executable, bwrap, user, node_cache)
    argv = [*plan.argv, "--info-fd", str(info_fd), "--", *SANDBOX_WAITER]
    return attrs.evolve(plan, argv=argv)


def worker_import_path() -> list[str]:
    """The import path a worker starts with: the service's, without its working directory."""
    return [entry for entry in sys.path if entry and Path(entry).resolve() != Path.cwd().resolve()]


def worker_plan(
    kind: SandboxKind,
    run_dir: Path,
    config: SandboxConfig,
    browser_executable: str | None,
    bwrap: str | None = None,
    user: int | None = None,
    node_cache: NodeCache | None = None,
) -> WorkerCommand:
    """What every way of starting a worker shares: environment, directories, user, and (under
    bubblewrap) the ``bwrap`` options up to the command, in ``argv`` (empty without a sandbox)."""
    compile_cache = node_cache.compile_cache if node_cache is not None else None
    snapshot = node_cache.snapshot if node_cache is not None else None
    zygote = node_cache.zygote if node_cache is not None else None
    argv: list[str] = []
    if kind == "bubblewrap":
        if user is None and drops_user(kind):  # never a sandboxed root by omission
            raise ValueError("a sandboxed worker of a service running as root needs a user id of its own")
        needed = needed_paths(browser_executable)
        argv = bubblewrap_argv(run_dir, config.hidden, needed, bwrap)
        if compile_cache is not None:
            prefix = compile_cache.name.rpartition("-")[0]
            inner_uid = user if user is not None else os.getuid()
            bound = f"{SANDBOX_NODE_CACHE}/{prefix}-{inner_uid}"
            argv += ["--perms", "0755", "--dir", SANDBOX_NODE_CACHE, "--ro-bind", str(compile_cache), bound]
        if snapshot is not None:
            argv += ["--ro-bind", str(snapshot), SANDBOX_DRIVER_SNAPSHOT]
        if zygote is not None:  # a socket in a read-only mount still takes connections
            argv += ["--ro-bind", str(zygote), SANDBOX_DRIVER_ZYGOTE]
        inner, cache, snapshot_dir = SANDBOX_RUN_DIR, SANDBOX_NODE_CACHE, SANDBOX_DRIVER_SNAPSHOT
        zygote_dir = SANDBOX_DRIVER_ZYGOTE
    else:  # the service's own user filled it: Node finds its folder where it is
        inner, user = str(run_dir), None
        cache = str(compile_cache.parent) if compile_cache is not None else ""
        snapshot_dir = str(snapshot) if snapshot is not None else ""
        zygote_dir = str(zygote) if zygote is not None else ""
    env = worker_environment(inner, extra=config.pass_env, tmp=worker_tmp(kind, run_dir))
    if compile_cache is not None:
        env[NODE_CACHE_ENV] = cache
    if snapshot is not None:
        env[NODE_PATH_ENV] = f"{snapshot_dir}/{LAUNCHER_NAME}"
    if zygote is not None:  # its launcher falls back to the snapshot's (or Node) by itself
        env[NODE_PATH_ENV] = f"{zygote_dir}/{ZYGOTE_LAUNCHER_NAME}"
    return WorkerCommand(
        argv=argv, env=env, run_dir=run_dir, inner_dir=inner, bubblewrap=kind == "bubblewrap", user=user
    )


def make_run_dir(pool_dir: Path, user: int | None, memory_dir: Path | None = None) -> Path:
    """A private directory for a worker (``home/``, ``tmp/``, ``artifacts/`` inside), owned by ``user``.

    With ``memory_dir`` (a pool's folder in memory, :func:`make_memory_pool_dir`) it also holds
    :data:`MEMORY_LINK`, a link to a folder of its own there: the worker's ``TMPDIR``
    (:func:`worker_tmp`), unless that folder cannot be made. :func:`remove_run_dir` removes both.
    """
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=pool_dir))
    for sub in ("home", "tmp", "artifacts"):
        (run_dir / sub).mkdir(mode=0o700)
    if user is not None:
        for path in (run_dir, run_dir / "home", run_dir / "tmp", run_dir / "artifacts"):
            os.chown(path, user, user)
    if memory_dir is not None:
        _link_memory_folder(run_dir, memory_dir / run_dir.name, user)
    return run_dir


def _link_memory_folder(run_dir: Path, memory: Path, user: int | None) -> None:
    """Make ``memory`` and link it from ``run_dir``; where that fails (the tmpfs full, or the pool's
    folder there removed by someone else: systemd's ``RemoveIPC`` empties ``/dev/shm`` of a user who
    logged out), nothing is left of it and the worker's ``TMPDIR`` stays on disk."""
    try:
        memory.mkdir(mode=0o700)
        if user is not None:
            os.chown(memory, user, user)
        (run_dir / MEMORY_LINK).symlink_to(memory)
    except OSError:
        with contextlib.suppress(OSError):
            (run_dir / MEMORY_LINK).unlink()
        with contextlib.suppress(OSError):
            memory.rmdir()


def remove_run_dir(run_dir: Path) -> None:
    """Remove a worker's private directory and its folder in memory, if it has one (blocking)."""
    link = run_dir / MEMORY_LINK
    with contextlib.suppress(OSError):
        remove_dir(Path(os.readlink(link)))
    remove_dir(run_dir)


class WorkerUser:
    """A user id leased to one worker: no other worker of any pool on this host gets it until released.

    The lease is an exclusive ``flock`` on a file named after the id (:data:`WORKER_UID_LOCKS`), so
    it ends by itself when the pool's process dies; the descriptor is close-on-exec, so no worker
    inherits it.
    """

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._fd: int | None = fd

    def release(self) -> None:
        """End the lease (idempotent): call it once the worker's processes are gone."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def held(self) -> bool:
        """Whether the lease is still held."""
        return self._fd is not None


class NoWorkerUser(ScenarioKitError):
    """Every user id of :data:`WORKER_UIDS` is held by a live worker (or used on this host)."""


#: where the next lease starts looking (random per process: pools of several processes spread out)
_next_uid = [random.randrange(len(WORKER_UIDS))]


def lease_worker_user(uids: range = WORKER_UIDS, locks: Path | None = None) -> WorkerUser:
    """Lease a user id nobody on this host uses now: not named, no process, not held by another worker.

    Ids are tried in turn from where the last lease left off (a random start per process), so an id
    comes back only after the whole range was used. Blocking (it reads the process table once).
    """
    folder = _lock_folder(locks) if locks is not None else _host_lock_folder()
    busy = _uids_in_use()
    for _ in range(len(uids)):
        index = _next_uid[0] % len(uids)
        _next_uid[0] = index + 1
        uid = uids[index]
        if uid in busy or _named(uid):
            continue
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return WorkerUser(uid, fd)
    raise NoWorkerUser(
        f"all {len(uids)} worker user ids from {uids.start} are held by live workers or used on this host"
    )


def _host_lock_folder() -> Path:
    """:data:`WORKER_UID_LOCKS`, or (where ``/run`` cannot hold it: a read-only one) its twin in ``/tmp``.

    Every scheduler on the host picks the same one: ``/run`` is the same for all, and so is the answer.
    """
    try:
        return _lock_folder(WORKER_UID_LOCKS)
    except PermissionError:
        raise  # it exists and is not ours alone: refuse rather than lease from another folder
    except OSError:
        return _lock_folder(Path("/tmp") / WORKER_UID_LOCKS.name)


def _lock_folder(folder: Path) -> Path:
    """The lock folder, made if needed; refused unless it is a real folder only its owner (us) may write."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise PermissionError(f"{folder} must be a folder of uid {os.geteuid()} nobody else may write")
    return folder


def _named(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


#: how much of ``/proc/<pid>/status`` is read: its ``Uid:`` line comes within the first few hundred bytes
_STATUS_HEAD = 1024


def _uids_in_use() -> set[int]:
    """The real user ids of every process on the machine (threads share their process's).

    One ``read`` of the head of each process's ``status`` (no file object, no line iteration): a lease
    reads every process on the machine, once per worker started.
    """
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fd = os.open(f"/proc/{entry.name}/status", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    head = os.read(fd, _STATUS_HEAD)
                finally:
                    os.close(fd)
                at = head.index(b"\nUid:") + 5
                found.add(int(head[at : head.index(b"\n", at)].split()[0]))
    return found


def remove_dir(path: Path) -> None:
    """Remove a worker's private directory, whatever its files' modes (blocking).

    Only ``path`` and what lies inside it have their modes changed on the way: never its parent (a
    pool's folder lies in ``/tmp``, which a service run as root must not close to everyone else).
    """
    root = os.path.abspath(path)

    def again(function: Callable[..., object], failed: str, error: BaseException) -> None:
        writable_and_again(function, failed, error, root)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=again)
    else:
        shutil.rmtree(path, onerror=lambda call, failed, info: again(call, failed, info[1]))


def writable_and_again(function: Callable[..., object], failed: str, error: BaseException, root: str) -> None:
    """What :func:`remove_dir` does when removing ``failed`` (``root`` or inside it) with ``function``
    raised ``error``.

    Gone already (another pool cleaning the same stale folder got there first): nothing to do. A
    read-only folder (the sealed compile cache) keeps its files: make it writable and try again; a
    folder that could not be opened is made readable and removed whole. A mode is changed only on
    ``root`` and below it, never on ``root``'s parent: what fails there (``root`` itself cannot be
    removed) is left as it is. Whatever still fails is left for the next cleaning, never raised: a
    stale folder must not stop a pool from starting.
    """
    if isinstance(error, FileNotFoundError):
        return
    with contextlib.suppress(OSError):
        failed = os.path.abspath(failed)
        parent = os.path.dirname(failed)
        if _under(parent, root):
            os.chmod(parent, 0o700)
        if function in (os.rmdir, os.unlink, os.remove):
            function(failed)
        elif _under(failed, root):  # os.open, os.scandir, os.lstat: a folder it could not enter
            os.chmod(failed, 0o700)
            shutil.rmtree(failed, ignore_errors=True)


_POOL_DIR = re.compile(rf"^{POOL_DIR_PREFIX}(\d+)-")


def make_pool_dir(base: Path | None = None) -> Path:
    """A folder for one pool's run directories in ``base`` (default: the system's temporary folder);
    those of pools whose process died are removed first."""
    base = Path(tempfile.gettempdir()) if base is None else base
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            match = _POOL_DIR.match(entry.name)
            if match and not pid_alive(int(match.group(1))):
                remove_dir(entry)
    folder = Path(tempfile.mkdtemp(prefix=f"{POOL_DIR_PREFIX}{os.getpid()}-", dir=base))
    folder.chmod(0o711)  # an unprivileged worker must reach its own run directory inside
    return folder


def file_system_type(path: str | Path) -> str | None:
    """The type of the file system ``path`` lies on (``tmpfs``, ``ext4``, ...), from this process's
    mount table; None where there is none to read (not Linux)."""
    path = os.path.realpath(path)
    best, kind = "", None
    try:
        table = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in table:
        fields = line.split()
        if "-" not in fields:
            continue
        point = fields[4].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[fields.index("-") + 1]
    return kind


def memory_folder_base(
    base: Path = MEMORY_FOLDER_BASE, temporary: str | None = None, least_mb: int = MEMORY_FOLDER_MIN_MB
) -> Path | None:
    """Where workers without a sandbox keep their temporary folder (Chromium's profile) in memory, as
    a sandbox's own ``/tmp`` is: ``base`` (``/dev/shm``) when it is a tmpfs this process may write
    with at least ``least_mb`` MiB free, and the system's temporary folder (``temporary``) is not a
    tmpfs already. None otherwise: the private directory's ``tmp/`` it stays (not Linux; a container's
    small ``/dev/shm``, which Chromium's own shared memory needs).
    """
    temporary = tempfile.gettempdir() if temporary is None else temporary
    if file_system_type(temporary) == "tmpfs" or file_system_type(base) != "tmpfs":
        return None
    try:
        room = os.statvfs(base)
    except OSError:
        return None
    if room.f_bavail * room.f_frsize < least_mb * 1024 * 1024 or not os.access(base, os.W_OK | os.X_OK):
        return None
    return base


def make_memory_pool_dir(base: Path | None = None) -> Path | None:
    """The folder in memory for the workers of a pool without a sandbox, or None where there is no
    room for one (:func:`memory_folder_base`).

    ``base`` overrides where it goes (tests). Named like the pool's own folders, so a pool that starts
    here removes those of pools whose process died, as :func:`make_pool_dir` does on disk.
    """
    base = memory_folder_base() if base is None else base
    if base is None:
        return None
    try:
        return make_pool_dir(base)
    except OSError:
        return None


# --- inside the worker ----------------------------------------------------------------------------


def _own_tasks() -> int:
    """How many tasks (threads included) the current user has: what ``RLIMIT_NPROC`` counts."""
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid:
                count += len(os.listdir(entry / "task"))
    return count


def _address_space() -> int:
    """The process's current virtual size in bytes."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def apply_limits(limits: ResourceLimits) -> None:
    """Set the run's limits on this process (and so on every process step code starts)."""
    mib = 1024 * 1024
    _lower(resource.RLIMIT_AS, _address_space() + limits.memory_mb * mib)
    _lower(resource.RLIMIT_FSIZE, limits.file_size_mb * mib)
    _lower(resource.RLIMIT_NOFILE, limits.open_files)
    if sys.platform.startswith("linux") and os.getuid() != 0:
        _lower(resource.RLIMIT_NPROC, _own_tasks() + limits.processes)


def _lower(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def describe_limit(exc: BaseException, limits: ResourceLimits) -> str | None:
    """The limit an exception comes from, in words, or None when it is not a limit's."""
    if isinstance(exc, MemoryError):
        return f"the run's memory limit of {limits.memory_mb} MiB ({MEMORY_ENV}) was reached"
    if isinstance(exc, OSError):
        if exc.errno == errno.EFBIG:
            return f"the run's file size limit of {limits.file_size_mb} MiB per file was reached"
        if exc.errno == errno.EMFILE:
            return f"the run's open files limit of {limits.open_files} was reached"
        if exc.errno == errno.EAGAIN and isinstance(exc, BlockingIOError | PermissionError | OSError):
            return f"the run's process limit ({limits.processes} more processes) was reached"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return f"the run's process limit ({limits.processes} more processes) was reached"
    return None
