"""The pool's fork server ("zygote"): workers start with their imports already done.

A worker started by exec spends most of its start-up importing Python modules (Playwright, asyncio,
the worker's own). The zygote is one process per pool that has done those imports once and forks a
worker on request (:mod:`.zygote_process`). It holds imported modules only: no job, no secret, no
step code ever passes through it. Under bubblewrap the pool still starts each worker's own sandbox
(the same ``bwrap`` command, :func:`.sandbox.sandbox_command`, running a waiter instead of Python)
and the zygote forks the worker straight into it; the zygote is each worker's parent and reports
how it ended. When the zygote cannot start, dies, or refuses a worker,
that worker is started by exec as before and the zygote is started again (docs/security.md).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from scenariokit.domain.errors import ScenarioKitError
from scenariokit.runner.confinement.processes import proc_problem, wait_readable
from scenariokit.runner.confinement.sandbox import SandboxKind, bubblewrap_path, sandbox_entry_problem
from scenariokit.runner.protocol import ForkRequest, encode_frame

logger = logging.getLogger(__name__)

#: seconds the zygote gets to import the worker's modules and say it is ready
ZYGOTE_START_SECONDS = 60.0
#: seconds a fork request gets until the worker says it is set up in its sandbox
FORK_SECONDS = 20.0
#: seconds between two attempts to start a zygote that died or never came up
RESTART_DELAY_SECONDS = 5.0
#: workers the zygote could not set up in a row before the pool starts all its workers by exec (a
#: kernel without ``setns`` on a pidfd, say): each such attempt costs a sandbox started for nothing
GIVE_UP_AFTER = 3

#: Runs in the zygote's interpreter: the pool's import path, then the fork server on its socket.
ZYGOTE_BOOTSTRAP = (
    "import sys,json\n"
    "sys.path[:]=json.loads(sys.argv[1])\n"
    "from scenariokit.runner.confinement.zygote_process import serve;serve(int(sys.argv[2]))"
)


class ZygoteUnavailable(ScenarioKitError):
    """The zygote could not fork this worker: the pool starts it by exec instead."""


class _Overdue(ZygoteUnavailable):
    """The zygote did not answer a request in time."""


def zygote_supported(kind: SandboxKind) -> bool:
    """Whether workers under ``kind`` can be forked by a zygote here (:func:`zygote_problem` says why not)."""
    return zygote_problem(kind) is None


def zygote_problem(kind: SandboxKind) -> str | None:
    """Why a zygote cannot fork workers under ``kind`` here, or None: each capability it needs is tried.

    It watches its workers by pidfd (Linux 5.4) and reads ``/proc``; under bubblewrap it joins each
    worker's sandbox, which needs ``CAP_SYS_ADMIN`` over the sandbox's namespaces: a service running as
    root has it; an ordinary user's bubblewrap makes a user namespace of its own, which a go-between
    enters first. Where neither can, workers start by exec.
    """
    why = pidfd_problem() or proc_problem()
    if why is None and kind == "bubblewrap":
        bwrap = bubblewrap_path()
        if bwrap is None:
            return "bwrap is not installed"
        why = sandbox_entry_problem(bwrap)
    return why


@functools.cache
def pidfd_problem() -> str | None:
    """Why this process cannot watch a process by pidfd (``pidfd_open`` and ``waitid(P_PIDFD)``), or None."""
    if not hasattr(os, "pidfd_open") or not hasattr(os, "P_PIDFD"):
        return "this Python has no pidfd_open or P_PIDFD"
    try:
        pidfd = os.pidfd_open(os.getpid())
    except OSError as exc:
        return f"pidfd_open: {exc.strerror or exc}"
    try:
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
    except ChildProcessError:  # the call is there: this process is just not its own child
        pass
    except OSError as exc:
        return f"waitid(P_PIDFD): {exc.strerror or exc}"
    finally:
        os.close(pidfd)
    return None


class ForkedWorker:
    """A worker the zygote forked: its pid on this host (also its process group) and how it ended."""

    def __init__(self, pid: int, status: int, pending: str = "") -> None:
        self.pid = pid
        self._status: int | None = status
        self._pending = pending
        self._lock = threading.Lock()
        self._exit: int | None = None
        self._ended = False

    def wait(self, timeout: float) -> int | None:
        """Its exit code (``-n`` for signal ``n``) once it ended, waiting up to ``timeout`` seconds.

        None when it has not ended by then, or when the zygote that reports it is gone without saying
        (it was killed: the worker itself lives on until it is stopped).
        """
        with self._lock:
            deadline = time.monotonic() + timeout
            while not self._ended:
                *lines, self._pending = self._pending.split("\n")
                for line in lines:
                    if line.startswith("exit "):
                        with contextlib.suppress(ValueError):
                            self._exit = int(line[5:])
                        self._ended = True
                if self._ended or self._status is None:
                    break
                left = deadline - time.monotonic()
                if left < 0 or not wait_readable(self._status, left):
                    return None
                data = os.read(self._status, 4096)
                if not data:  # the zygote is gone: it has said all it will
                    self._close()
                    self._ended = True
                self._pending += data.decode("utf-8", "replace")
            return self._exit

    def close(self) -> None:
        """Stop listening: the zygote reaps it once it ended (until then its pid is not reused)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._status is not None:
            os.close(self._status)
            self._status = None


class Zygote:
    """One pool's zygote process: started, asked for workers, started again when it died."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = threading.Lock()
        self._last_start = 0.0
        self._closed = False
        #: workers it could not set up in a row, and why it was given up on (then all start by exec)
        self._refused = 0
        self._gave_up: str | None = None

    @property
    def pid(self) -> int | None:
        """The zygote's pid while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> None:
        """Start the zygote and wait until it has imported the worker's modules (blocking).

        Raises :class:`ZygoteUnavailable` when it does not come up.
        """
        with self._lock:
            self._start()

    def ensure_running(self) -> None:
        """Raise :class:`ZygoteUnavailable` unless the zygote runs (a dead one is started again first,
        at most every :data:`RESTART_DELAY_SECONDS`); blocking while it starts."""
        if self._closed:
            raise ZygoteUnavailable("the pool is closing")
        if self._gave_up is not None:
            raise ZygoteUnavailable(f"the zygote could not set workers up: {self._gave_up}")
        if self.pid is None:
            self._restart()

    def _restart(self) -> None:
        """Start a zygote that is gone again, at most every :data:`RESTART_DELAY_SECONDS`."""
        with self._lock:
            if self._closed:
                raise ZygoteUnavailable("the pool is closing")
            if self.pid is not None:  # another worker's start got here first
                return
            if time.monotonic() - self._last_start < RESTART_DELAY_SECONDS:
                raise ZygoteUnavailable("the zygote is not running")
            logger.warning("the zygote is gone; starting it again")
            self._start()

    def _start(self) -> None:
        from scenariokit.runner.confinement.sandbox import worker_import_path

        self._stop()
        self._last_start = time.monotonic()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [sys.executable, "-I", "-c", ZYGOTE_BOOTSTRAP, json.dumps(worker_import_path())]
            self._process = subprocess.Popen(
                [*argv, str(theirs.fileno())],
                env=self._env,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,  # no terminal: a Ctrl-C meant for the server never reaches it
            )
        except OSError as exc:
            ours.close()
            raise ZygoteUnavailable(f"the zygote did not start: {exc}") from exc
        finally:
            theirs.close()
        self._control = ours
        ours.settimeout(ZYGOTE_START_SECONDS)
        try:
            said = ours.recv(1024)
        except OSError as exc:
            said = f"{type(exc).__name__}: {exc}".encode()
        ours.settimeout(None)
        if said != b"ready":
            self._stop()
            raise ZygoteUnavailable(f"the zygote did not come up: {said.decode('utf-8', 'replace')}")

    def fork(self, request: ForkRequest, fds: Sequence[int]) -> ForkedWorker:
        """Have the zygote fork a worker (blocking): ``fds`` are its channel, stdout, stderr (and pidfd).

        Raises :class:`ZygoteUnavailable` when it cannot; a dead zygote is started again first (at
        most every :data:`RESTART_DELAY_SECONDS`).
        """
        self.ensure_running()
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                control = self._control
                if control is None:
                    raise ZygoteUnavailable("the zygote is not running")
                socket.send_fds(control, [encode_frame(request)], [*fds[:3], write_end, *fds[3:]])
        except OSError as exc:
            os.close(read_end)
            raise ZygoteUnavailable(f"the zygote took no request: {exc}") from exc
        finally:
            os.close(write_end)
        try:
            forked = self._forked(read_end)
        except _Overdue:  # a zygote that stopped answering (stopped, stuck) is replaced
            process = self._process
            if process is not None:
                process.kill()
            os.close(read_end)
            raise
        except ZygoteUnavailable as exc:
            os.close(read_end)
            self._refused += 1
            if self._refused >= GIVE_UP_AFTER:  # this kernel or machine will not let it: stop trying
                logger.warning(
                    "the zygote could not set %d workers up in a row: all start by exec", GIVE_UP_AFTER
                )
                self._gave_up = str(exc)
            raise
        except BaseException:
            os.close(read_end)
            raise
        self._refused = 0
        return forked

    @staticmethod
    def _forked(status: int) -> ForkedWorker:
        """Read ``pid N`` and ``started`` (or why not) from a new worker's status pipe."""
        pid: int | None = None
        started = False
        deadline = time.monotonic() + FORK_SECONDS
        pending = ""
        while pid is None or not started:
            left = deadline - time.monotonic()
            if left <= 0 or not wait_readable(status, left):
                raise _Overdue(f"the forked worker did not start within {FORK_SECONDS:g} s")
            data = os.read(status, 4096)
            if not data:
                raise ZygoteUnavailable("the zygote refused the worker (see its output)")
            pending += data.decode("utf-8", "replace")
            while "\n" in pending and (pid is None or not started):
                line, pending = pending.split("\n", 1)
                if line.startswith("pid "):
                    pid = int(line[4:])
                elif line == "started":
                    started = True
                elif line.startswith("error "):
                    raise ZygoteUnavailable(f"the zygote could not set the worker up: {line[6:]}")
        return ForkedWorker(pid, status, pending)  # what follows (its exit, already) is the worker's

    def close(self) -> None:
        """Stop the zygote for good (blocking); the workers it forked live on until they are stopped."""
        self._closed = True
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        control, self._control = self._control, None
        if control is not None:
            control.close()  # the zygote's end reads nothing more: it exits
        process, self._process = self._process, None
        if process is not None:
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def zygote_environment(kind: SandboxKind, pool_dir: Path, pass_env: Sequence[str]) -> dict[str, str]:
    """The zygote's own environment: a worker's minimal one (each worker it forks takes its own)."""
    from scenariokit.runner.confinement.sandbox import SANDBOX_RUN_DIR, worker_environment, worker_tmp

    home = SANDBOX_RUN_DIR if kind == "bubblewrap" else str(pool_dir)
    return worker_environment(home, extra=pass_env, tmp=worker_tmp(kind))
