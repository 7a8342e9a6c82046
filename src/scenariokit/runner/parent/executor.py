"""The parent side of execution: a pool of worker processes, each executing exactly one run.

The pool keeps ``size`` workers warm (Python imported, Playwright started, browser launched), plus
:data:`WARM_SPARES`, and bounds concurrency to ``size`` runs. A run takes a warm worker and a new one
starts at once, so the next run does not wait; after its run a worker exits (or stays while it holds
the run's saved session), so nothing one run does to its interpreter reaches another. The pool
forwards each run's events as they arrive, masked here with the run's secrets (the worker's own
masking is step code's to undo), with whatever the worker writes to its standard output and error
added to the run log, and copies the files the run recorded from the worker's private directory into
the artifacts folder. It enforces the time limits itself, so even step code that never yields
(``while True: pass``) is stopped: the worker's whole process tree is killed and the run fails with kind
``timeout``. A worker that dies fails its run: kind ``worker_lost`` when it was killed (SIGKILL), else
``error`` (``os._exit``, a segfault).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import re
import signal
import stat
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs

from scenariokit.domain.code import nothing_to_run
from scenariokit.domain.job import (
    ArtifactSaved,
    BrowserClosed,
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    SessionSaved,
)
from scenariokit.domain.model import RunError, RunErrorKind, utcnow
from scenariokit.runner.confinement.cgroups import RunGroups, open_run_groups
from scenariokit.runner.confinement.driver_snapshot import (
    BLOB_NAME,
    LAUNCHER_NAME,
    SANDBOX_DRIVER_SNAPSHOT,
    WARM_UP_FAILED,
    driver_variables,
    seal_driver_snapshot,
    snapshot_builder,
    warm_up_options,
)
from scenariokit.runner.confinement.driver_zygote import DriverZygote
from scenariokit.runner.confinement.processes import kill_process_tree, proc_problem
from scenariokit.runner.confinement.sandbox import (
    POOL_DIR_PREFIX,
    SANDBOX_RUN_DIR,
    NodeCache,
    SandboxConfig,
    SandboxKind,
    bubblewrap_path,
    make_memory_pool_dir,
    make_pool_dir,
    node_cache_filler,
    remove_dir,
    resolve_sandbox,
    sandbox_entry_problem,
    sandbox_fallback,
    sandbox_user_depth,
    seal_node_cache,
    worker_command,
    worker_tmp,
)
from scenariokit.runner.confinement.zygote import (
    Zygote,
    ZygoteUnavailable,
    zygote_environment,
    zygote_problem,
    zygote_supported,
)
from scenariokit.runner.parent.run_watch import RunWatch
from scenariokit.runner.parent.worker_handle import (
    Stream,
    WorkerGone,
    WorkerHandle,
    WorkerLaunch,
    group_limit_reached,
)
from scenariokit.runner.protocol import (
    CancelRun,
    ReleaseSession,
    Report,
    RunReport,
    StartRun,
    WorkerOptions,
    failed_run,
    finished_run,
    mask_event,
    step_label,
    syntax_failure,
)
from scenariokit.runner.worker.browser import BrowserConfig, discover_browser
from scenariokit.runner.worker.masking import LogMasker, mask_text
from scenariokit.runner.worker.stepcode import check_syntax

logger = logging.getLogger(__name__)

EventCallback = Callable[[RunEvent], Awaitable[None]]
SessionCallback = Callable[[SessionReleased], Awaitable[None]]
ClosedCallback = Callable[[BrowserClosed], Awaitable[None]]

#: seconds a worker gets to close its browsers on shutdown before it is killed
SHUTDOWN_GRACE_SECONDS = 5.0
#: seconds a released session's worker gets to confirm the browser is closed
RELEASE_WAIT_SECONDS = 10.0
#: seconds before a failed replacement worker is started again
RESPAWN_DELAY_SECONDS = 1.0
#: seconds the pool gives the filling of the driver's compile cache
NODE_CACHE_SECONDS = 120.0
#: seconds the pool waits, once a run's outcome came, for the lines its worker wrote before it
OUTPUT_DRAIN_SECONDS = 2.0
#: warm workers kept beyond ``size``: when runs queue up, the next one finds a worker up more often
#: (a worker starts in about as long as a short run takes; ``bench/runs.py`` measured this on 2 cores)
WARM_SPARES = 1
#: the Playwright driver's compile cache this process filled: every pool's workers read the one
_node_cache: Path | None = None
#: the driver's start-up snapshots this process built, by sandbox and the variables its workers keep
#: (``SandboxConfig.pass_env``): the snapshot is of a driver in exactly a worker's environment
_driver_snapshots: dict[tuple[SandboxKind, tuple[str, ...]], Path] = {}
#: the driver zygotes this process runs, by the same key: one serves every pool of the process whose
#: workers have that environment (started by the first, stopped when the process exits)
_driver_zygotes: dict[tuple[SandboxKind, tuple[str, ...]], DriverZygote] = {}
_ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _made_compile_cache() -> Path | None:
    """The driver's compile cache this process filled, while its folder is there (blocking)."""
    known = _node_cache
    return known if known is not None and known.is_dir() else None


def _made_snapshot(key: tuple[SandboxKind, tuple[str, ...]]) -> Path | None:
    """The driver's start-up snapshot this process built for workers like ``key``'s, while its blob is
    there (blocking)."""
    snapshot = _driver_snapshots.get(key)
    return snapshot if snapshot is not None and (snapshot / BLOB_NAME).is_file() else None


def _running_zygote(key: tuple[SandboxKind, tuple[str, ...]]) -> DriverZygote | None:
    """The driver zygote this process runs for workers like ``key``'s, while it runs."""
    zygote = _driver_zygotes.get(key)
    return zygote if zygote is not None and zygote.running else None


def _being_cancelled() -> bool:
    """Whether the task running this is being cancelled (its finally blocks run for the cancel)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _node_failure(code: int | None, stderr: str) -> str:
    """What a failed Node said: the error it threw or V8's failed check, not its warnings and stack."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = next(
        (line for line in lines if re.match(r"[A-Za-z]*Error\b", line) or re.match(r"# .* failed$", line)),
        lines[-1] if lines else "no message",
    )
    return f"node exited with {code}: {said.lstrip('# ')[:500]}"


@attrs.frozen
class OutputEnd:
    """The worker's stdout or stderr has given everything it wrote before its run's outcome."""

    stream: Stream


@attrs.define
class _ActiveRun:
    job: RunJob
    inbox: asyncio.Queue[RunEvent | WorkerGone | OutputEnd | None] = attrs.field(factory=asyncio.Queue)
    #: the worker's streams whose end mark has come
    ended: set[Stream] = attrs.field(factory=set)
    cancelled: asyncio.Event = attrs.field(factory=asyncio.Event)
    worker: WorkerHandle | None = None
    holds_slot: bool = False
    masker: LogMasker = attrs.field(
        default=attrs.Factory(lambda self: LogMasker(self.job.secrets), takes_self=True)
    )


class WorkerPool:
    """Runs jobs in worker processes, at most ``size`` at a time."""

    def __init__(
        self,
        size: int | None = None,
        *,
        browser: BrowserConfig | None = None,
        browser_args: tuple[str, ...] | None = None,
        session_keepalive: float = 600.0,
        on_session_released: SessionCallback | None = None,
        sandbox: SandboxConfig | None = None,
        on_browser_closed: ClosedCallback | None = None,
    ) -> None:
        self.size = max(1, size if size is not None else (os.cpu_count() or 1))
        self._browser = browser
        #: the switches a discovered browser's launches add (None: ``SCENARIOKIT_BROWSER_ARGS``'s)
        self._browser_args = browser_args
        self._session_keepalive = session_keepalive
        self._on_session_released = on_session_released
        self._sandbox = sandbox if sandbox is not None else SandboxConfig.from_env()
        #: what confines the workers once started: ``"bubblewrap"`` or ``"none"``
        self.sandbox_kind: SandboxKind | None = None
        #: what this machine could not give the workers, each in words (the start-up log, ``/health``)
        self.left_out: list[str] = []
        self._pool_dir: Path | None = None
        #: its workers' folders in memory, where they have no sandbox and the machine has room
        self._memory_dir: Path | None = None
        self._on_browser_closed = on_browser_closed
        self._workers: set[WorkerHandle] = set()
        self._idle: asyncio.Queue[WorkerHandle] | None = None
        self._slots = asyncio.Semaphore(self.size)
        self._active: dict[uuid.UUID, _ActiveRun] = {}
        self._session_owner: dict[uuid.UUID, WorkerHandle] = {}
        self._releases: dict[uuid.UUID, asyncio.Future[None]] = {}
        self._replacements: set[asyncio.Task[None]] = set()
        #: on_session_released calls under way
        self._callbacks: set[asyncio.Task[None]] = set()
        #: workers being stopped after their run
        self._retiring: set[asyncio.Task[None]] = set()
        self._closed = False
        self._node_cache_task: asyncio.Task[None] | None = None
        #: whether that task has made (or given up on) all it makes: from then on, no worker is made
        #: without it, and one that was is replaced while it is warm
        self._drivers_prepared = False
        #: the control groups of its workers' runs (None: this machine gives this process none)
        self.run_groups: RunGroups | None = None
        self._zygote: Zygote | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Find the browser (BrowserUnavailable) and the sandbox (SandboxUnavailable); start the workers."""
        if self._idle is not None:
            raise RuntimeError("the pool is already started")
        browser = self._browser or discover_browser(args=self._browser_args)
        kind = await asyncio.to_thread(resolve_sandbox, self._sandbox.mode)
        self.sandbox_kind = kind
        if kind == "none" and (fallback := await asyncio.to_thread(sandbox_fallback, self._sandbox.mode)):
            self._leave_out(fallback)
        self._pool_dir = await asyncio.to_thread(make_pool_dir)
        if kind == "none":  # Chromium's profile in memory, as a sandbox's own /tmp has it
            self._memory_dir = await asyncio.to_thread(make_memory_pool_dir)
        limits = self._sandbox.limits
        self.run_groups = await asyncio.to_thread(
            open_run_groups, limits.memory_mb, limits.processes, tag=self._pool_dir.name
        )
        if self.run_groups is None:
            self._leave_out(
                f"control groups: this process may make none here; each run's memory limit "
                f"({limits.memory_mb} MiB) binds its worker's Python by rlimits alone, "
                "not its browser and driver"
            )
        if (why := await asyncio.to_thread(proc_problem)) is not None:
            self._leave_out(f"/proc: {why}; a run's processes are found with ps")
        options = WorkerOptions(
            browser=browser, session_keepalive=self._session_keepalive, limits=self._sandbox.limits
        )
        self._zygote = await self._start_zygote(kind, self._pool_dir)
        self._launch = WorkerLaunch(
            kind=kind,
            config=self._sandbox,
            pool_dir=self._pool_dir,
            memory_dir=self._memory_dir,
            options=options,
            bwrap=bubblewrap_path() if kind == "bubblewrap" else None,
            groups=self.run_groups,
            zygote=self._zygote,
        )
        # what earlier pools of this process prepared, when it is all there, serves the first workers too
        prepared = await asyncio.to_thread(self._prepared_before)
        if prepared is not None:
            self._launch = attrs.evolve(self._launch, node_cache=prepared)
        self._idle = asyncio.Queue()
        self._node_cache_task = asyncio.ensure_future(self._prepare_drivers(browser))
        started = await asyncio.gather(
            *(self._start_worker() for _ in range(self.size + WARM_SPARES)), return_exceptions=True
        )
        failures = [result for result in started if isinstance(result, BaseException)]
        if failures:
            await self.close()
            raise failures[0]

    async def _start_zygote(self, kind: SandboxKind, pool_dir: Path) -> Zygote | None:
        """The fork server the workers start from, where it can serve; None: they start by exec."""
        if not self._sandbox.zygote:
            return None
        if not await asyncio.to_thread(zygote_supported, kind):
            why = await asyncio.to_thread(zygote_problem, kind)
            self._leave_out(f"the worker zygote: {why or 'not supported here'}; workers start by exec")
            return None
        zygote = Zygote(zygote_environment(kind, pool_dir, self._sandbox.pass_env))
        try:
            await asyncio.to_thread(zygote.start)
        except ZygoteUnavailable as exc:
            self._leave_out(f"the worker zygote: {exc}; workers start by exec")
            return None
        return zygote

    def _leave_out(self, what: str) -> None:
        """Say (in the log, and in ``/health``) that this machine could not give the workers ``what``."""
        logger.warning("left out: %s", what)
        self.left_out.append(what)

    @property
    def zygote(self) -> Zygote | None:
        """The pool's fork server, when its workers start from one."""
        return self._zygote

    def _prepared_before(self) -> NodeCache | None:
        """All :meth:`_fill_node_cache` would give this pool's workers, when earlier pools of this
        process made it already (blocking: it looks at their files and zygote); else None."""
        known = _made_compile_cache()
        if known is None:
            return None
        if not self._sandbox.driver_snapshot:
            return NodeCache(compile_cache=known)
        key = (self._launch.kind, self._sandbox.pass_env)
        snapshot = _made_snapshot(key)
        if snapshot is None:
            return None
        if not self._sandbox.driver_zygote:
            return NodeCache(compile_cache=known, snapshot=snapshot)
        zygote = _running_zygote(key)
        if zygote is None:
            return None
        return NodeCache(compile_cache=known, snapshot=snapshot, zygote=zygote.folder)

    async def _prepare_drivers(self, browser: BrowserConfig) -> None:
        """Make what the drivers start with (:meth:`_fill_node_cache`), then have the warm workers
        started before it was made replaced by workers that start with it."""
        try:
            await self._fill_node_cache(browser)
        finally:  # what could be made serves the warm workers even when the rest could not
            self._drivers_prepared = True
            self._refresh_warm_workers()

    def _refresh_warm_workers(self) -> None:
        """Replace each warm worker made before the drivers' preparations were (see :meth:`_stale`).

        A pool's first workers start at once, while it prepares the drivers' compile cache, snapshot
        and zygote in the background: they load Playwright's driver the ordinary way, which costs a
        run more memory (an unshared Node.js, the browser's network service in a process of its own)
        and more CPU than a driver the zygote forks. The idle ones are stopped and replaced as soon as
        the preparations are made, so that a service's first runs are as its later ones; a worker
        that already took a run keeps it. Nothing is awaited: no run can take a worker meanwhile.
        """
        if self._closed or self._idle is None or _being_cancelled():
            # cancelled, the preparations end with the loop (asyncio.run's end, the pool left open): a
            # replacement started now would never run, and be destroyed pending with the loop
            return
        waiting = [self._idle.get_nowait() for _ in range(self._idle.qsize())]
        for worker in waiting:
            if self._stale(worker):
                self._retire(worker)
                self._replenish()
            else:
                self._idle.put_nowait(worker)

    def _stale(self, worker: WorkerHandle) -> bool:
        """Whether ``worker`` is warm and was made before the pool's drivers' preparations were all made."""
        return (
            self._drivers_prepared
            and worker.ready
            and not worker.used
            and worker.node_cache != self._launch.node_cache
        )

    async def _fill_node_cache(self, browser: BrowserConfig) -> None:
        """Give the workers started from now on the driver's compile cache and start-up snapshot.

        Each is made once and serves every pool of this process (made by the first, in the
        background: the first pool's first workers start without them, and are replaced once they
        are made); a failure only means workers load the driver's code themselves, as they did before.
        """
        global _node_cache
        known = await asyncio.to_thread(_made_compile_cache)
        if known is None:
            known = _node_cache = await self._filled_node_cache(browser)
        if known is not None and not self._closed:
            self._launch = attrs.evolve(self._launch, node_cache=NodeCache(compile_cache=known))
        if not self._sandbox.driver_snapshot or self._closed:
            return
        key = (self._launch.kind, self._sandbox.pass_env)
        snapshot = await asyncio.to_thread(_made_snapshot, key)
        if snapshot is None:
            snapshot = await self._built_driver_snapshot(self._launch.kind, known, browser)
            if snapshot is None:
                return
            _driver_snapshots[key] = snapshot
        if not self._closed:
            self._launch = attrs.evolve(
                self._launch, node_cache=NodeCache(compile_cache=known, snapshot=snapshot)
            )
        if not self._sandbox.driver_zygote or self._closed:
            return
        zygote = _running_zygote(key)
        if zygote is None:
            zygote = await self._started_driver_zygote(self._launch.kind, known, snapshot, browser)
            if zygote is None:
                return
            running = _running_zygote(key)
            if running is not None:  # another pool's start won: its zygote serves
                await asyncio.to_thread(_stop_driver_zygote, zygote)
                zygote = running
            else:
                _driver_zygotes[key] = zygote
        if not self._closed:
            cache = NodeCache(compile_cache=known, snapshot=snapshot, zygote=zygote.folder)
            self._launch = attrs.evolve(self._launch, node_cache=cache)

    def _workers_driver_environment(
        self, kind: SandboxKind, home: Path, node_cache: NodeCache
    ) -> dict[str, str]:
        """The environment this pool's workers give their Playwright driver, for a Node the pool starts
        for them outside any sandbox (the snapshot's build, the driver zygote), so that what the
        driver reads of it while loading is what a worker's driver would read.

        Under bubblewrap every worker's folders are at one path, which this names, and its temporary
        folder is the sandbox's own ``/tmp``; without it each run has folders of its own, so this has
        an empty home under ``home`` and the system's temporary folder, as a run's driver finds none of
        its own there either.
        """
        inner = Path(SANDBOX_RUN_DIR) if kind == "bubblewrap" else home
        env = worker_command("none", inner, self._sandbox, None, 0, node_cache=node_cache).env
        env["TMPDIR"] = worker_tmp(kind) or tempfile.gettempdir()
        return env

    async def _started_driver_zygote(
        self, kind: SandboxKind, compile_cache: Path | None, snapshot: Path, browser: BrowserConfig
    ) -> DriverZygote | None:
        """A driver zygote for this process's pools, started in their workers' environment; None (logged)
        if it cannot run. Stopped when the process exits (or, killed, when the zygote sees it gone).

        It warms its driver up as the snapshot's build does (with the workers' browser, not a remote
        one, in a scratch folder removed once it is ready).
        """
        prefix = f"{POOL_DIR_PREFIX}{os.getpid()}-driver-zygote-"
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix))
        scratch = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix + "warming-"))
        sandboxed = kind == "bubblewrap"
        try:
            bwrap = bubblewrap_path()
            if (
                sandboxed
                and bwrap is not None
                and (why := await asyncio.to_thread(sandbox_entry_problem, bwrap))
            ):
                raise RuntimeError(f"it cannot start a driver in a worker's sandbox: {why}")
            # an ordinary user's sandboxes are in user namespaces of their own, this deep
            depth = await asyncio.to_thread(sandbox_user_depth, bwrap) if sandboxed and bwrap else None
            as_worker = NodeCache(compile_cache=compile_cache, snapshot=snapshot, zygote=folder)
            env = {**self._workers_driver_environment(kind, folder, as_worker), **driver_variables()}
            fallback = f"{SANDBOX_DRIVER_SNAPSHOT if sandboxed else snapshot}/{LAUNCHER_NAME}"
            warm = _warm_up(browser, scratch)
            try:
                zygote = await DriverZygote.start(
                    folder, env, sandboxed=sandboxed, fallback=fallback, warm_up=warm, user_depth=depth
                )
            finally:
                await asyncio.to_thread(remove_dir, scratch)
            if zygote is None:
                raise RuntimeError("this Node.js cannot fork (no node:ffi, or older than 26.1)")
            atexit.register(_stop_driver_zygote, zygote)
            logger.info("Playwright driver zygote started: each run's driver is forked from it")
            return zygote
        except Exception as exc:  # workers start their drivers as before
            self._leave_out(
                f"the Playwright driver zygote: {type(exc).__name__}: {exc}; "
                "each run's worker starts its driver"
            )
            await asyncio.to_thread(remove_dir, folder)
            return None
        except BaseException:
            await asyncio.to_thread(remove_dir, folder)
            raise

    @staticmethod
    async def _filled_node_cache(browser: BrowserConfig) -> Path | None:
        """A compile cache filled by starting the driver (and the browser) once; None if that failed.

        It lives in a folder of its own named like the pools' (``make_pool_dir`` removes it once this
        process is gone), made read-only once filled.
        """
        prefix = f"{POOL_DIR_PREFIX}{os.getpid()}-node-cache-"
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix))
        scratch = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix + "filling-"))
        launch = None if browser.ws_endpoint else browser.launch_options()
        try:
            argv, env = await asyncio.to_thread(node_cache_filler, folder, scratch, launch)
            await _prepare(argv, env, scratch, lambda _, err: err.strip()[-500:])
            filled = await asyncio.to_thread(seal_node_cache, folder)
            if filled is None:
                raise RuntimeError("the driver left no cache")
            atexit.register(remove_dir, folder)  # else the next pool's start removes it
            return filled
        except Exception as exc:  # workers go without it
            logger.info("no compile cache for the Playwright driver: %s: %s", type(exc).__name__, exc)
            await asyncio.to_thread(remove_dir, folder)
            return None
        except BaseException:
            await asyncio.to_thread(remove_dir, folder)
            raise
        finally:
            await asyncio.to_thread(remove_dir, scratch)

    async def _built_driver_snapshot(
        self, kind: SandboxKind, compile_cache: Path | None, browser: BrowserConfig
    ) -> Path | None:
        """The driver's start-up snapshot, built by Node running only Playwright's code; None if that failed.

        It is built in the environment a worker has, in a folder of its own named like the pools'
        (``make_pool_dir`` removes it once this process is gone), made read-only once built. A
        failure is logged: workers start the driver as before. The build warms the driver up with
        the workers' browser (not a remote one), in a scratch folder; when that fails it is logged
        and the snapshot is built again without.

        Playwright names a few folders from ``HOME`` and ``TMPDIR`` while loading: the build runs in
        :meth:`_workers_driver_environment`.
        """
        prefix = f"{POOL_DIR_PREFIX}{os.getpid()}-driver-snapshot-"
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix))
        scratch = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix=prefix + "building-"))
        try:
            for sub in ("home", "tmp"):
                await asyncio.to_thread((scratch / sub).mkdir)
            as_worker = NodeCache(compile_cache=compile_cache, snapshot=folder)
            env = self._workers_driver_environment(kind, scratch, as_worker)
            warm = _warm_up(browser, scratch / "warm-up")
            if warm is not None:
                await asyncio.to_thread((scratch / "warm-up").mkdir)
            command = await asyncio.to_thread(snapshot_builder, folder, env, warm)
            if command is None:
                raise RuntimeError("this Playwright ships no Node.js of its own")
            try:
                await _prepare(*command, scratch, _node_failure)
            except PreparationFailed as exc:
                if warm is None or exc.code != WARM_UP_FAILED:
                    raise
                logger.warning("the Playwright driver's snapshot is built without its warm-up: %s", exc)
                command = await asyncio.to_thread(snapshot_builder, folder, env)
                assert command is not None
                await _prepare(*command, scratch, _node_failure)
            built = await asyncio.to_thread(seal_driver_snapshot, folder)
            if built is None:
                raise RuntimeError("Node wrote no snapshot")
            atexit.register(remove_dir, folder)  # else the next pool's start removes it
            logger.info("Playwright driver snapshot built: workers start the driver from %s", built)
            return built
        except Exception as exc:  # workers go without it
            logger.warning(
                "no start-up snapshot of the Playwright driver, workers load it as before: %s: %s",
                type(exc).__name__,
                exc,
            )
            await asyncio.to_thread(remove_dir, folder)
            return None
        except BaseException:
            await asyncio.to_thread(remove_dir, folder)
            raise
        finally:
            await asyncio.to_thread(remove_dir, scratch)

    async def close(self) -> None:
        """Stop every worker and every browser it started; held sessions are reported released."""
        self._closed = True
        if self._node_cache_task is not None:
            self._node_cache_task.cancel()
            await asyncio.gather(self._node_cache_task, return_exceptions=True)
        for task in list(self._replacements):
            task.cancel()
        workers = list(self._workers)
        self._workers.clear()
        # only a worker with a run under way is asked to stop (its run is cancelled and reported); one
        # that is warm or holds a saved session has nothing to close in order: it is killed, as a run's
        # worker is once its run is over (worker/process.py, POOL_KILL_WAIT_SECONDS, says why)
        await asyncio.gather(
            *(
                worker.shutdown(SHUTDOWN_GRACE_SECONDS)
                if worker.current_run is not None
                else asyncio.to_thread(worker.kill)
                for worker in workers
            )
        )
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
        for run_id in list(self._session_owner):
            await self._session_closed(SessionReleased(run_id=run_id, reason="worker stopped"))
        if self._callbacks:
            await asyncio.gather(*self._callbacks, return_exceptions=True)
        if self._zygote is not None:
            await asyncio.to_thread(self._zygote.close)
        if self._pool_dir is not None:
            await asyncio.to_thread(remove_dir, self._pool_dir)
        if self._memory_dir is not None:
            await asyncio.to_thread(remove_dir, self._memory_dir)
        if self.run_groups is not None:
            await asyncio.to_thread(self.run_groups.close)

    async def __aenter__(self) -> WorkerPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def retired(self) -> None:
        """Wait until every worker whose run ended (or was abandoned) has been killed."""
        while self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    @property
    def busy_workers(self) -> int:
        """How many workers execute a run now."""
        return sum(1 for run in self._active.values() if run.worker is not None)

    @property
    def session_workers(self) -> int:
        """How many workers only hold a saved session's browser open (their run finished)."""
        return len({worker for worker in self._session_owner.values() if worker.current_run is None})

    @property
    def ready_workers(self) -> int:
        """How many warm workers wait for a run (``size`` plus the spares once all are up)."""
        return sum(1 for worker in self._workers if worker.ready and not worker.used)

    @property
    def launch(self) -> WorkerLaunch | None:
        """How this pool starts its workers (sandbox, directories, options); None until it started.

        An authoring session's worker is started the same way (:mod:`.authoring_host`).
        """
        launch: WorkerLaunch | None = getattr(self, "_launch", None)
        return launch if self._idle is not None else None

    async def node_cache_made(self) -> NodeCache | None:
        """Wait until the pool has made (or given up) the driver's compile cache and snapshot: what it has."""
        if self._node_cache_task is not None:
            await asyncio.shield(self._node_cache_task)
        return self.node_cache

    @property
    def node_cache(self) -> NodeCache | None:
        """The driver's compile cache and start-up snapshot new workers get, once the pool made them."""
        launch: WorkerLaunch | None = getattr(self, "_launch", None)
        return launch.node_cache if launch is not None else None

    def worker_pids(self) -> list[int]:
        """The pids (and process group ids) of the live workers: warm, running or holding a session."""
        return [worker.pid for worker in self._workers if worker.pid is not None and worker.ready]

    async def _start_worker(self) -> None:
        worker = WorkerHandle(self._launch)
        self._workers.add(worker)
        try:
            await worker.start(self._route, self._output, self._output_end)
        except BaseException:
            self._workers.discard(worker)
            raise
        assert self._idle is not None
        if self._stale(worker):  # started before the drivers' preparations were made, ready after them
            self._retire(worker)
            self._replenish()
            return
        self._idle.put_nowait(worker)

    def _replenish(self) -> None:
        """Start a warm worker in the background (one run took one, or an unused one died)."""
        if self._closed:
            return
        task = asyncio.ensure_future(self._start_replacement())
        self._replacements.add(task)
        task.add_done_callback(self._replacements.discard)

    async def _start_replacement(self) -> None:
        while not self._closed:
            try:
                await self._start_worker()
                return
            except Exception:
                logger.exception("could not start a worker; retrying")
                await asyncio.sleep(RESPAWN_DELAY_SECONDS)

    def _retire(
        self, worker: WorkerHandle, run_id: uuid.UUID | None = None, released: SessionReleased | None = None
    ) -> None:
        """Stop a worker whose run is over (once): it exits, its processes die, its directory goes.

        With ``run_id``, the run it executed finished normally: the kill is that run's browser close.
        With ``released``, the worker let go of the session it held: the kill is that browser's close,
        and the release is reported once it is done.
        """
        if worker not in self._workers:
            return
        self._workers.discard(worker)
        task = asyncio.ensure_future(self._stop(worker, run_id, released))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _stop(
        self, worker: WorkerHandle, run_id: uuid.UUID | None = None, released: SessionReleased | None = None
    ) -> None:
        # Its run is over and reported, or the session it held released: nothing is left to close in
        # order, and a graceful browser and driver shutdown costs the CPU the next run's worker is
        # starting on. The kill takes the whole process tree, so it is the run's browser close in its
        # timings (or the session's).
        closing = utcnow()
        await asyncio.to_thread(worker.kill)
        if run_id is not None and self._on_browser_closed is not None:
            try:
                await self._on_browser_closed(
                    BrowserClosed(run_id=run_id, started_at=closing, finished_at=utcnow())
                )
            except Exception:
                logger.exception("on_browser_closed failed for run %s", run_id)
        if released is not None:
            await self._session_closed(released)
        for run_id in list(worker.sessions):
            await self._session_closed(SessionReleased(run_id=run_id, reason="worker stopped"))

    # --- reports from workers --------------------------------------------------------------------

    def _route(self, worker: WorkerHandle, report: Report | WorkerGone) -> None:
        """Called on the loop for every report a worker sends."""
        if isinstance(report, RunReport):
            run = self._active.get(report.run_id)
            if run is not None and run.worker is worker:
                run.inbox.put_nowait(report.event)
        elif isinstance(report, SessionReleased):
            if report.run_id not in worker.sessions:
                return  # a worker speaks only for the sessions it holds
            if worker.sessions == {report.run_id} and worker.current_run is None:
                # what it held last: the worker waits for its kill to close the browser, as after a run
                self._retire(worker, released=report)
                return
            task = asyncio.ensure_future(self._session_closed(report))
            self._callbacks.add(task)
            task.add_done_callback(self._callbacks.discard)
        elif isinstance(report, WorkerGone):
            run = self._active.get(worker.current_run) if worker.current_run else None
            if run is not None and run.worker is worker:
                run.inbox.put_nowait(report)
                return
            if worker in self._workers and not worker.used:
                self._replenish()  # a warm worker died before it got a run
            self._retire(worker)

    def _output(self, worker: WorkerHandle, stream: Stream, text: str) -> None:
        """A line the worker wrote to its stdout or stderr: the run's log, else the server's, masked."""
        run = self._active.get(worker.current_run) if worker.current_run else None
        if run is not None and run.worker is worker:
            level = "info" if stream == "stdout" else "warning"
            run.inbox.put_nowait(LogEvent(at=utcnow(), level=level, message=text, step_id=None))
            return
        logger.info("worker %s %s: %s", worker.pid, stream, mask_text(text, worker.secrets))

    def _output_end(self, worker: WorkerHandle, stream: Stream) -> None:
        """A worker's stream gave every line it wrote before its run's outcome (see :meth:`_drain`)."""
        run = self._active.get(worker.current_run) if worker.current_run else None
        if run is not None and run.worker is worker:
            run.inbox.put_nowait(OutputEnd(stream))

    async def _session_closed(self, released: SessionReleased) -> None:
        owner = self._session_owner.pop(released.run_id, None)
        if owner is None:
            return
        owner.sessions.discard(released.run_id)
        waiter = self._releases.pop(released.run_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._on_session_released is not None:
            try:
                await self._on_session_released(released)
            except Exception:
                logger.exception("on_session_released failed for run %s", released.run_id)

    # --- runs ------------------------------------------------------------------------------------

    async def execute(self, job: RunJob, on_event: EventCallback) -> RunFinished:
        """Run ``job`` on the next free worker, forwarding its events; return how it finished.

        The returned outcome is also the last event passed to ``on_event``. If ``on_event`` raises, or
        the caller is cancelled, the run is abandoned: its worker is replaced and the exception propagates.
        """
        if self._idle is None or self._closed:
            raise RuntimeError("the pool is not running")
        problems = check_syntax(job.steps)
        if problems:  # found before any browser starts
            return await self._finish_here(job, syntax_failure(job, problems[0], utcnow()), on_event)
        nothing = nothing_to_run([step.exec_code for step in job.steps])
        if nothing is not None:  # never a pass: a check that ran nothing checked nothing
            error = RunError(kind=RunErrorKind.ERROR, message=nothing)
            return await self._finish_here(job, finished_run(job, [], utcnow(), error), on_event)
        run = _ActiveRun(job)
        self._active[job.run_id] = run
        try:
            worker = await self._claim_worker(run)
            if worker is None:
                return await self._finish_here(job, self._cancelled_before_start(job), on_event)
            return await self._run_on(worker, run, on_event)
        finally:
            self._active.pop(job.run_id, None)
            if run.holds_slot:
                self._slots.release()

    async def _claim_worker(self, run: _ActiveRun) -> WorkerHandle | None:
        """A run slot, then the next warm worker; None when the run is cancelled while it waits.

        Warm workers may outnumber the slots (a new one starts as soon as a run takes one), so the
        slots, not the workers, bound how many runs execute at once.
        """
        assert self._idle is not None
        # What is free is taken at once: waiting (a task, a wait) costs turns of the event loop, and on
        # a busy server each turn waits behind the requests it serves meanwhile.
        if not self._slots.locked():
            await self._slots.acquire()  # does not wait
        elif not await self._until_cancelled(run, self._slots.acquire()):
            return None
        run.holds_slot = True
        while not run.cancelled.is_set():
            if not self._idle.empty():
                worker = self._idle.get_nowait()
            else:
                getter = asyncio.ensure_future(self._idle.get())
                if not await self._until_cancelled(run, getter):
                    return None
                worker = getter.result()
            if not worker.ready:  # it died while idle; its replacement will queue up
                continue
            if run.cancelled.is_set():
                self._idle.put_nowait(worker)
                return None
            worker.used = True
            worker.secrets = run.job.secrets
            self._replenish()  # the next run's worker warms up while this one executes
            return worker
        return None

    @staticmethod
    async def _until_cancelled(run: _ActiveRun, waiting: Awaitable[object]) -> bool:
        """Await ``waiting`` unless the run is cancelled first; True when it completed."""
        task = asyncio.ensure_future(waiting)
        cancelled = asyncio.ensure_future(run.cancelled.wait())
        try:
            await asyncio.wait({task, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not task.done():
                task.cancel()
        return task.done() and not task.cancelled()

    def _cancelled_before_start(self, job: RunJob) -> RunFinished:
        if not job.steps:
            return finished_run(job, [], utcnow())
        first = min(job.steps, key=lambda s: s.order)
        message = f"run cancelled before {step_label(first)}"
        return failed_run(job, [], first, RunErrorKind.CANCELLED, message, started_at=utcnow())

    async def _finish_here(
        self, job: RunJob, outcome: RunFinished, on_event: EventCallback, masker: LogMasker | None = None
    ) -> RunFinished:
        """Report an outcome the pool decided without a worker (or after killing one)."""
        held = masker.flush() if masker is not None else []
        for line in held:
            await on_event(line)
        if outcome.error is not None:
            log = LogEvent(
                at=utcnow(), level="error", message=outcome.error.message, step_id=outcome.error.step_id
            )
            await on_event(mask_event(log, job.secrets))
        masked = mask_event(outcome, job.secrets)
        assert isinstance(masked, RunFinished)
        await on_event(masked)
        return masked

    async def _run_on(self, worker: WorkerHandle, run: _ActiveRun, on_event: EventCallback) -> RunFinished:
        job = run.job
        run.worker = worker
        worker.current_run = job.run_id
        finished = False
        inside = attrs.evolve(job, artifacts_dir=Path(f"{worker.inner_dir}/artifacts"))
        try:
            if not await worker.send(StartRun(inside)):
                run.inbox.put_nowait(WorkerGone(None))
            outcome = await self._follow(worker, run, on_event)
            finished = True
            return outcome
        finally:
            worker.current_run = None
            if not (finished and worker.ready and job.run_id in worker.sessions):
                # one run per worker; one holding a session stays until released
                self._retire(worker, job.run_id if finished else None)

    async def _follow(self, worker: WorkerHandle, run: _ActiveRun, on_event: EventCallback) -> RunFinished:
        """Forward the run's events until it finishes, killing the worker when a limit passes."""
        job = run.job
        watch = RunWatch(job)
        masker = run.masker
        while True:
            left = watch.seconds_left()
            if left > 0 and not run.inbox.empty():
                # what has come is taken as it is: a timer for each of a loud step's lines cost more
                # than the line (the timer is only for the wait, and the deadline has not passed)
                item = run.inbox.get_nowait()
            else:
                try:
                    # not wait_for: on Python 3.11 it swallows a cancel that comes as an item arrives,
                    # and a run its scheduler abandons (a drain cut short) would go on to its end
                    async with asyncio.timeout(left):
                        item = await run.inbox.get()
                except TimeoutError:
                    kind, message = watch.overrun()
                    await asyncio.to_thread(worker.kill)
                    return await self._finish_here(job, watch.outcome(kind, message), on_event, masker)
            if item is None:  # a cancel request: only the deadlines change
                watch.cancel_requested()
                continue
            if isinstance(item, OutputEnd):
                run.ended.add(item.stream)
                continue
            if isinstance(item, WorkerGone):
                killed = item.exitcode == -signal.SIGKILL
                kind = RunErrorKind.WORKER_LOST if killed else RunErrorKind.ERROR
                message = f"worker process {item.describe()} {watch.where()}"
                limit = await asyncio.to_thread(group_limit_reached, worker)
                if limit is not None:  # the kernel killed it for its run's limit: the run's own doing
                    kind, message = RunErrorKind.ERROR, f"{limit}; the {message}"
                return await self._finish_here(job, watch.outcome(kind, message), on_event, masker)
            watch.observe(item)
            if isinstance(item, LogEvent):
                for line in masker.push(item):
                    await on_event(line)
                continue
            if isinstance(item, ArtifactSaved) and not await self._collect(worker, run, item.name, on_event):
                continue
            if isinstance(item, SessionSaved):
                worker.sessions.add(job.run_id)
                self._session_owner[job.run_id] = worker
            if isinstance(item, RunFinished):
                await self._drain(worker, run, on_event)
                for line in masker.flush():
                    await on_event(line)
                if item.status == "fail":
                    item = _naming_the_limit(item, await asyncio.to_thread(group_limit_reached, worker))
            item = mask_event(item, job.secrets)
            await on_event(item)
            if isinstance(item, RunFinished):
                return item

    async def _drain(self, worker: WorkerHandle, run: _ActiveRun, on_event: EventCallback) -> None:
        """Forward the lines the worker wrote to its stdout and stderr before its outcome.

        Each stream is read on a thread of its own, apart from the reports, so a line can reach the
        pool after the outcome. The worker marks each stream's end before it reports the outcome; this
        waits for the marks (at most :data:`OUTPUT_DRAIN_SECONDS`: step code may have closed a stream,
        or written a line longer than the pool reads at once), forwarding the lines before them.
        """
        waiting = set(worker.read_streams) - run.ended
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(OUTPUT_DRAIN_SECONDS):
                while waiting:
                    item = await run.inbox.get()
                    if isinstance(item, OutputEnd):
                        waiting.discard(item.stream)
                    elif isinstance(item, LogEvent):
                        for line in run.masker.push(item):
                            await on_event(line)
                    # anything else (a cancel request, the worker's exit) changes nothing now
        if waiting:
            streams = " and ".join(sorted(waiting))
            logger.debug("run %s: no end mark on the worker's %s", run.job.run_id, streams)

    async def _collect(
        self, worker: WorkerHandle, run: _ActiveRun, name: str, on_event: EventCallback
    ) -> bool:
        """Copy a file the run recorded from the worker's directory to the run's artifacts folder.

        The worker's directory is step code's to fill: only a plain name, a regular file and no link
        is taken (the copy runs with the service's rights).
        """
        problem = None
        if not _ARTIFACT_NAME.match(name) or worker.run_dir is None:
            problem = "not a plain file name"
        else:
            try:
                await asyncio.to_thread(
                    _copy_artifact, worker.run_dir / "artifacts", name, run.job.artifacts_dir
                )
            except OSError as exc:
                problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            return True
        line = LogEvent(at=utcnow(), level="warning", message=f"artifact {name!r} not kept: {problem}")
        for masked in run.masker.push(line):
            await on_event(masked)
        return False

    async def cancel(self, run_id: uuid.UUID) -> bool:
        """Stop a queued or running run (it fails with kind ``cancelled``); False if it is not running."""
        run = self._active.get(run_id)
        if run is None:
            return False
        run.cancelled.set()
        if run.worker is not None:
            await run.worker.send(CancelRun(run_id))
            run.inbox.put_nowait(None)
        return True

    async def release_session(self, run_id: uuid.UUID) -> bool:
        """Close the browser held for a run's saved session; False if no session is held for it."""
        owner = self._session_owner.get(run_id)
        if owner is None:
            return False
        waiter = self._releases.setdefault(run_id, asyncio.get_running_loop().create_future())
        if not await owner.send(ReleaseSession(run_id)):
            await self._session_closed(SessionReleased(run_id=run_id, reason="worker stopped"))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RELEASE_WAIT_SECONDS):
                await asyncio.shield(waiter)
        return True

    def held_sessions(self) -> list[uuid.UUID]:
        """Run ids whose saved session is held open."""
        return list(self._session_owner)


def _warm_up(browser: BrowserConfig, scratch: Path) -> dict[str, object] | None:
    """What a Node preparing the workers' drivers (snapshot build, driver zygote) warms up with: the
    workers' browser, its profile in ``scratch``; None for a remote browser, which it never launches."""
    return None if browser.ws_endpoint else warm_up_options(browser.launch_options(), scratch)


def _stop_driver_zygote(zygote: DriverZygote) -> None:
    """Stop a driver zygote and remove its folder (blocking; also run at the process's exit)."""
    zygote.close()
    remove_dir(zygote.folder)


async def _prepare(
    argv: list[str], env: dict[str, str], cwd: Path, failure: Callable[[int | None, str], str]
) -> None:
    """Run one of the pool's preparations (Playwright's own code, never step code) to its end within
    :data:`NODE_CACHE_SECONDS`; :class:`PreparationFailed` with ``failure(exit code, its stderr)``
    when it fails.
    Whatever it started is killed when it did not end (a time-out, a cancelled pool start).
    """
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        async with asyncio.timeout(NODE_CACHE_SECONDS):
            _, err = await process.communicate()
    finally:
        if process.returncode is None:
            await asyncio.to_thread(kill_process_tree, process.pid)
            await process.wait()
    if process.returncode != 0:
        said = err.decode("utf-8", "replace")
        raise PreparationFailed(process.returncode, failure(process.returncode, said))


class PreparationFailed(RuntimeError):
    """One of the pool's preparations exited with ``code``; the message says what it said."""

    def __init__(self, code: int | None, message: str) -> None:
        super().__init__(message)
        self.code = code


def _naming_the_limit(outcome: RunFinished, limit: str | None) -> RunFinished:
    """A failed outcome whose error (and failed step's) says which limit of its group the run reached.

    The kernel's kill of a browser or driver over the memory limit reaches the step only as a closed
    page or browser: this is what tells the user why.
    """
    error = outcome.error
    if limit is None or error is None or "limit" in error.message:
        return outcome
    steps = tuple(
        attrs.evolve(result, error=f"{limit}: {result.error}") if result.step_id == error.step_id else result
        for result in outcome.step_results
    )
    error = attrs.evolve(error, message=f"{limit}: {error.message}")
    return attrs.evolve(outcome, error=error, step_results=steps)


def _copy_artifact(source_dir: Path, name: str, target_dir: Path) -> None:
    """Copy ``source_dir/name`` to ``target_dir/name`` without following a link anywhere on the way."""
    directory = os.open(source_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
    finally:
        os.close(directory)
    with os.fdopen(source, "rb") as reader:
        if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
            raise OSError(f"{name} is not a regular file")
        target_dir.mkdir(parents=True, exist_ok=True)
        with open(target_dir / name, "wb") as writer:
            while chunk := reader.read(1024 * 1024):
                writer.write(chunk)
