"""The zygote's own process: a Python with the worker's modules imported, forking workers on request.

It is started by the pool (:mod:`.zygote`) with a worker's minimal environment, as the service's
user, outside any sandbox, and holds nothing but imported modules: it never receives a job, a secret
or step code, and starts no thread and no event loop. For each request it forks the worker, under
bubblewrap straight into the PID namespace of the sandbox the pool started for it; the worker joins
the sandbox's mount and IPC namespaces and the run's control group, takes its descriptors,
environment, directory and user exactly as a worker started by exec does
(:data:`.sandbox.BOOTSTRAP`), then runs :func:`.worker.worker_entry`. The zygote, its parent, reports
its exit status to the pool. docs/security.md says why a worker forked so is confined as one started
by exec is.

A request is one datagram on the control socket: a :class:`.protocol.ForkRequest` frame (``env``,
``cwd``, ``uid``, ``sandbox``, ``groups``; anything else is refused) and the descriptors of the
worker's channel, standard output and error, the status pipe (where ``pid N``, ``started`` or
``error …`` and ``exit N`` lines go to the pool), under bubblewrap a pidfd of the sandbox's first
process, and the ``cgroup.procs`` files of the run's control group.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import gc
import os
import select
import socket
import sys
import threading
import traceback
from typing import Any, NoReturn

from scenariokit.runner.confinement.processes import namespace_inode
from scenariokit.runner.protocol import ForkRequest, decode_frame, prepare_frames

#: the largest request (its environment is the largest part)
MAX_REQUEST_BYTES = 256 * 1024
#: channel, stdout, stderr, status, the sandbox's pidfd, and the run's control group files
MAX_REQUEST_FDS = 8
#: the descriptor numbers a forked worker finds its channel and status pipe on
CHANNEL_FD = 3
STATUS_FD = 4

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: the namespaces bubblewrap makes for a worker (joined) and those it shares with the host (kept)
SANDBOX_NAMESPACES = ("mnt", "pid", "ipc")
SHARED_NAMESPACES = ("user", "net", "uts", "cgroup")


#: What the zygote imports for its workers: the worker and what it pulls in, and the modules it
#: imports lazily once started (its plugin manager, the entry points it reads, Playwright's
#: connection). The installed plugins are loaded after these (:func:`_preload_plugins`).
PRELOADED = (
    "scenariokit.runner.worker.process",
    "scenariokit.plugins",
    "scenariokit.plugins.builtin",
    "importlib.metadata",
    "urllib.request",
    "playwright._impl.json_pipe",
    "playwright._impl.local_utils",
    "playwright._impl.protocol_channels",
)


def serve(control_fd: int) -> None:
    """Import the worker's modules, say ready, and fork a worker for each request until the pool leaves.

    The zygote is its workers' parent: it reports each one's exit on its status pipe and reaps it only
    once the pool has stopped listening there (:class:`_Workers`). Once the pool is gone it serves no
    more requests, and ends when the workers it still reports on have.
    """
    import importlib

    for name in PRELOADED:
        with contextlib.suppress(ImportError):  # a module gone in another version is imported late
            importlib.import_module(name)
    _preload_plugins()
    prepare_frames()  # the code reading and writing the frames of a run, made once for every worker
    # What the imports made is never garbage: the collector of every worker forked from here leaves
    # it alone, and so does not write into (and copy) every page of it at its first collection.
    gc.freeze()
    control = socket.socket(fileno=control_fd)
    running = [thread.name for thread in threading.enumerate() if thread is not threading.main_thread()]
    if running:  # a thread is never copied by a fork, and the locks it holds stay held in the child
        control.send(f"a plugin started a thread while it was imported ({', '.join(running)})".encode())
        return
    own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    shared = {name: namespace_inode(name) for name in SHARED_NAMESPACES}
    workers = _Workers()
    workers.listen(control.fileno())
    control.send(b"ready")
    listening = True
    while listening or workers:
        for fd in workers.ready():
            if fd != control.fileno():
                workers.attend(fd)
                continue
            try:
                data, fds, _, _ = socket.recv_fds(control, MAX_REQUEST_BYTES, MAX_REQUEST_FDS)
            except OSError:
                data, fds = b"", []
            if not data:  # the pool is gone (or closed us)
                workers.stop_listening(control.fileno())
                listening = False
                continue
            try:
                request = decode_frame(data, (ForkRequest,))
                _fork_worker(control, own_pid_namespace, shared, request, fds, workers)
            except Exception as exc:  # the pool sees the status pipe close without a pid: it starts by exec
                print(f"scenariokit zygote: request refused: {type(exc).__name__}: {exc}", file=sys.stderr)
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)


class _Workers:
    """The workers the zygote forked, until each has ended and the pool has stopped listening.

    A worker's end shows on its pidfd: its exit status is written to its status pipe (``exit N``),
    and it is left unreaped, so that its pid, which is also the id of the process group the pool
    kills its processes by, cannot be taken by another process while the pool may still use it. It
    is reaped once the pool has closed its end of the status pipe (which the write end then shows as
    an error), or at once when the pool closed it before the worker ended.
    """

    def __init__(self) -> None:
        self._poll = select.poll()
        #: a worker's pidfd (until it ended), then its status pipe → (pidfd, status pipe)
        self._watched: dict[int, tuple[int, int]] = {}

    def __bool__(self) -> bool:
        return bool(self._watched)

    def listen(self, fd: int) -> None:
        self._poll.register(fd, select.POLLIN)

    def stop_listening(self, fd: int) -> None:
        self._poll.unregister(fd)

    def ready(self) -> list[int]:
        """The descriptors that have something to attend to (blocking until one has)."""
        try:
            return [fd for fd, _ in self._poll.poll()]
        except InterruptedError:
            return []

    def add(self, pid: int, status: int) -> None:
        """Report on ``pid``, whose status pipe is ``status`` (a descriptor the zygote keeps from now)."""
        pidfd = os.pidfd_open(pid)
        self._watched[pidfd] = (pidfd, status)
        self._poll.register(pidfd, select.POLLIN)

    def attend(self, fd: int) -> None:
        """A worker ended (``fd`` is its pidfd), or the pool stopped listening to an ended one."""
        watched = self._watched.pop(fd, None)
        if watched is None:
            return
        self._poll.unregister(fd)
        pidfd, status = watched
        if fd == status:
            self._reap(pidfd, status)
            return
        try:
            ended = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOWAIT)
            if ended is None:  # only with WNOHANG
                raise ChildProcessError("waitid returned nothing")
            signalled = ended.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
            _write(status, f"exit {-ended.si_status if signalled else ended.si_status}")
        except OSError:  # the pool stopped listening already (or there is no status to give it)
            self._reap(pidfd, status)
            return
        self._watched[status] = watched
        self._poll.register(status, select.POLLERR)  # shown once the pool closes its end

    @staticmethod
    def _reap(pidfd: int, status: int) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
        os.close(pidfd)
        os.close(status)


def _fork_worker(
    control: socket.socket,
    own_pid_namespace: int,
    shared: dict[str, int],
    request: ForkRequest,
    fds: list[int],
    workers: _Workers,
) -> None:
    """Fork the worker a request asks for, under bubblewrap straight into its sandbox's PID namespace.

    ``setns`` on a PID namespace moves none of the zygote's own processes, only where its next child
    is born; the zygote moves that back right after the fork, and exits if it cannot (no later
    worker may be born in this one's sandbox). The worker joins the sandbox's mount and IPC
    namespaces itself (:func:`_become_worker`).
    """
    sandbox = request.sandbox
    if len(fds) < 4 + (sandbox is not None) + request.groups:
        raise ValueError(f"{len(fds)} descriptors are not a request's")
    if threading.active_count() != 1:  # a forked thread's locks would be held forever
        raise RuntimeError("the zygote runs a thread")
    expected: dict[str, int] = {}
    if sandbox is not None:
        expected = {**shared, **{name: getattr(sandbox, name) for name in SANDBOX_NAMESPACES}}
    if sandbox is not None and sandbox.user is not None:
        worker = _fork_through_user_namespace(control, request, fds, {**expected, "user": sandbox.user})
    else:
        worker = _fork_from_host(control, own_pid_namespace, request, fds, expected)
    workers.add(worker, os.dup(fds[3]))  # the request's descriptors are closed once it is served
    with contextlib.suppress(OSError):  # a pool that stopped listening: the worker is reaped as it ends
        _write(fds[3], f"pid {worker}")


def _fork_from_host(
    control: socket.socket,
    own_pid_namespace: int,
    request: ForkRequest,
    fds: list[int],
    expected: dict[str, int],
) -> int:
    """Fork the worker, into its sandbox's PID namespace where it has one; its pid."""
    sandbox = request.sandbox
    if sandbox is not None:
        _check(_libc().setns(fds[4], CLONE_NEWPID), "setns")
    try:
        worker = os.fork()
    except BaseException:
        _back_to(own_pid_namespace, sandbox)
        raise
    if worker == 0:
        try:
            _become_worker(control, request, fds, expected)
        finally:  # whatever happens there, a fork never goes back to serving requests
            os._exit(1)
    _back_to(own_pid_namespace, sandbox)
    return worker


def _fork_through_user_namespace(
    control: socket.socket, request: ForkRequest, fds: list[int], expected: dict[str, int]
) -> int:
    """Fork the worker into a sandbox in a user namespace of its own (an ordinary user's bubblewrap
    makes one); its pid on this host, the zygote's own unreaped child.

    The zygote cannot join that namespace itself: a process never joins its own user namespace back,
    and every later request needs the host's. So a go-between forked for the request joins the
    sandbox's user, PID, mount and IPC namespaces (its user owns that user namespace, which gives it
    every capability there, and so the right to join the others) and forks the worker, which is born
    in the sandbox's PID namespace. The go-between exits as soon as it said the worker's pid, and the
    zygote, a child subreaper while it waits for that, becomes the worker's parent, as it is every
    worker's. The worker gives up every capability entering the namespace gave before it runs
    anything of its own (:func:`_drop_capabilities`).
    """
    read_end, write_end = os.pipe()
    libc = _libc()
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    try:
        go_between = os.fork()
        if go_between == 0:
            try:
                os.close(read_end)
                control.close()
                flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC
                _check(libc.setns(fds[4], flags), "setns")
                worker = os.fork()
                if worker == 0:
                    os.close(write_end)
                    _become_worker(control, request, fds, expected, joined=True)
                os.write(write_end, str(worker).encode())
                os._exit(0)
            except BaseException as exc:
                with contextlib.suppress(BaseException):
                    _write(fds[3], f"error {type(exc).__name__}: {exc}")
            finally:  # whatever happens there, a fork never goes back to serving requests
                os._exit(1)
        os.close(write_end)
        write_end = -1
        said = b""
        while chunk := os.read(read_end, 64):
            said += chunk
        os.waitpid(go_between, 0)  # its orphan, the worker, is the zygote's child from here
    finally:
        _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), "subreaper")
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
    if not said:
        raise RuntimeError("the go-between forked no worker (see the status pipe)")
    return int(said)


def _back_to(own_pid_namespace: int, sandbox: object) -> None:
    """Have the zygote's next child born in its own PID namespace again (or end the zygote)."""
    if sandbox is None:
        return
    if _libc().setns(own_pid_namespace, CLONE_NEWPID) != 0:
        why = os.strerror(ctypes.get_errno())
        print(f"scenariokit zygote: cannot return to its own PID namespace: {why}", file=sys.stderr)
        os._exit(1)


def _preload_plugins() -> None:
    """Load the installed plugins once, here, instead of in every worker (about 10 ms of CPU each).

    They are the operator's code, which every worker loads before any step code runs and the
    service's own process loads too; loading them here gives them nothing a worker does not. One
    that fails to load is loaded, and its failure reported in the run log, by each worker instead.
    """
    from scenariokit.runner.worker.plugin_hooks import PluginHooks

    try:
        PluginHooks.preload()
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        print(f"scenariokit zygote: plugins are loaded by each worker: {why}", file=sys.stderr)


@functools.cache
def _libc() -> Any:
    """The C library, loaded once in the zygote (each worker inherits it, with its functions found)."""
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _become_worker(
    control: socket.socket,
    request: ForkRequest,
    fds: list[int],
    expected: dict[str, int],
    *,
    joined: bool = False,
) -> NoReturn:
    """The worker: in the run's control group and its sandbox, confined as one started by exec is,
    then :func:`.worker.worker_entry`. ``expected`` are the namespaces it must find itself in;
    ``joined``: its go-between joined them all already (a sandbox in a user namespace of its own)."""
    channel, out, err, status = fds[:4]
    try:
        control.close()  # nothing forked from here ever holds the zygote's control socket
        sandbox = request.sandbox
        groups = fds[5:] if sandbox is not None else fds[4:]
        for group in groups[: request.groups]:  # the run's control group: the worker
            os.write(group, b"0")  # is in it before it runs anything of its own, and so is all it starts
        for group in groups:
            os.close(group)
        if sandbox is not None:  # its PID namespace it was born in; setns here sets root and directory
            if not joined:
                _check(_libc().setns(fds[4], CLONE_NEWNS | CLONE_NEWIPC), "setns")
            os.close(fds[4])
        os.setpgid(0, 0)  # the pool stops the worker and what it starts by this group
        if expected:
            _check_sandbox(expected)
        _take_descriptors(channel, out, err, status)
        status = STATUS_FD
        import tempfile

        tempfile.tempdir = None  # found again from this worker's TMPDIR
        os.environ.clear()
        os.environ.update(request.env)
        os.chdir(request.cwd)
        if request.uid is not None:
            _drop_to(request.uid)
        if joined:
            _drop_capabilities()
        if expected:  # bubblewrap's own promise to what it runs: no way back to more privileges
            _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        sys.argv = ["-c"]
        os.write(STATUS_FD, b"started\n")
        os.close(STATUS_FD)  # step code never holds the pipe the pool reads the worker's end from
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            _write(status, f"error {type(exc).__name__}: {exc}")
        os._exit(127)
    code: int = 0
    try:
        from scenariokit.runner.worker.process import worker_entry

        worker_entry(CHANNEL_FD)
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(code)


def _check_sandbox(expected: dict[str, int]) -> None:
    """Refuse to run unless this process is in the sandbox's namespaces and under its root."""
    for name, inode in expected.items():
        if namespace_inode(name) != inode:
            raise RuntimeError(f"the worker is not in the sandbox's {name} namespace")
    root, sandbox_root = os.stat("/"), os.stat("/proc/1/root/")
    if (root.st_dev, root.st_ino) != (sandbox_root.st_dev, sandbox_root.st_ino):
        raise RuntimeError("the worker's root is not the sandbox's")


def _take_descriptors(channel: int, out: int, err: int, status: int) -> None:
    """Standard input from /dev/null, output and error to the pool, the channel and status; nothing else."""
    devnull = os.open("/dev/null", os.O_RDWR)
    # copied out of the way first: a descriptor given may sit on a number another one goes to
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in (devnull, out, err, channel, status)]
    for target, fd in enumerate(moved):
        os.dup2(fd, target)
    os.closerange(STATUS_FD + 1, _max_fd())


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return os.sysconf("SC_OPEN_MAX")


def _drop_to(uid: int) -> None:
    """Become ``uid`` for good, with no capability left, not even one an exec could bring back."""
    _drop_bounding_set()
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != uid:
        raise RuntimeError("the worker did not become its own user")


def _drop_bounding_set() -> None:
    """Take every capability out of this process's bounding set: no exec can bring one back."""
    libc = _libc()
    with open("/proc/sys/kernel/cap_last_cap") as last:
        for cap in range(int(last.read()) + 1):
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop capability")


def _drop_capabilities() -> None:
    """Give up every capability, as bubblewrap does for what it runs: a worker that entered its
    sandbox's user namespace holds them all there (the sandbox's mounts are locked against them, made
    in the outer of bubblewrap's two user namespaces, but nothing rests on that alone). None is left
    in any set, the bounding set included, so no exec brings one back; the check reads what the
    kernel says this process holds."""
    libc = _libc()
    _drop_bounding_set()
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    _check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")
    with open("/proc/self/status") as status:
        held = [line.split(":")[1] for line in status if line.startswith("Cap")]
    if len(held) < 5 or any(int(value, 16) for value in held):
        raise RuntimeError("the worker kept a capability")


def _write(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode())
