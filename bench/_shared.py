"""What the benchmarks share: the page under test, the bare Playwright baselines, memory and timelines.

Not a benchmark itself (``nox -s bench`` skips files starting with ``_``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import attrs
from aiohttp import web
from playwright.async_api import async_playwright, expect

from scenariokit.domain.model import RunTimings
from scenariokit.formats.convert import make_converter
from scenariokit.runner.confinement.cgroups import CGROUP_ROOT, own_groups, run_group_members
from scenariokit.runner.confinement.processes import process_table, process_tree
from scenariokit.runner.worker.browser import BrowserConfig, discover_browser

PAGE = """<!doctype html><title>bench</title>
<input id="name"><button id="go" onclick="document.getElementById('out').textContent='Hello '+
document.getElementById('name').value">Go</button><p id="out"></p>"""

#: The three steps of every benchmark scenario, as step code.
STEPS = [
    "await page.goto(helpers.getEnvUrl())",
    "await page.fill('#name', 'bench')\nawait page.click('#go')",
    "await expect(page.locator('#out')).to_have_text('Hello bench')",
]


async def serve_page(loaded: Callable[[web.Request], object] | None = None) -> tuple[web.AppRunner, str]:
    """The page under test on a free port of 127.0.0.1, and its URL; ``loaded`` hears every request."""

    async def page(request: web.Request) -> web.Response:
        if loaded is not None:
            loaded(request)
        return web.Response(text=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/"


async def _three_steps(page: object, url: str) -> None:
    await page.goto(url)  # type: ignore[attr-defined]
    await page.fill("#name", "bench")  # type: ignore[attr-defined]
    await page.click("#go")  # type: ignore[attr-defined]
    await expect(page.locator("#out")).to_have_text("Hello bench")  # type: ignore[attr-defined]


def plain_launch_options(config: BrowserConfig | None = None) -> dict[str, Any]:
    """How a plain Playwright script launches the headless shell: Playwright's own flags, nothing added.

    The one thing such a script names is the executable, which Playwright finds by itself where
    ``playwright install`` could download it; scenariokit's launch flags (``DEFAULT_ARGS``: no
    Chromium zygote, the GPU service in the browser process) are what using scenariokit brings.
    """
    config = config or discover_browser()
    return {"executable_path": config.executable, "headless": True}


async def bare_playwright(
    url: str, count: int, config: BrowserConfig | None = None, *, at_once: int = 1, plain: bool = False
) -> float:
    """Seconds for ``count`` runs of the hand-written script, each in a freshly launched browser.

    What a home-grown runner does: launch, context, page, the three steps, close; with ``at_once``
    above 1, that many such loops side by side in one script (``asyncio.gather`` over one Playwright
    driver), each taking the next run as soon as its browser closed: the same concurrency as
    scenariokit with ``at_once`` workers. The script launches with scenariokit's own flags
    (:meth:`BrowserConfig.launch_options`), the stricter baseline; ``plain`` launches as a plain
    Playwright script does (:func:`plain_launch_options`).
    """
    options = plain_launch_options(config) if plain else (config or discover_browser()).launch_options()
    left = iter(range(count))

    async def loop(playwright: Any) -> None:
        for _ in left:  # the loops share one iterator: each run is taken once
            browser = await playwright.chromium.launch(**options)
            page = await (await browser.new_context()).new_page()
            await _three_steps(page, url)
            await browser.close()

    began = time.perf_counter()
    async with async_playwright() as playwright:
        await asyncio.gather(*(loop(playwright) for _ in range(max(1, at_once))))
    return time.perf_counter() - began


async def fresh_context_floor(url: str, count: int, config: BrowserConfig | None = None) -> float:
    """Seconds for ``count`` runs in fresh contexts of one warm browser: no launch at all, the floor."""
    config = config or discover_browser()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(**config.launch_options())
        began = time.perf_counter()
        for _ in range(count):
            context = await browser.new_context()
            await _three_steps(await context.new_page(), url)
            await context.close()
        took = time.perf_counter() - began
        await browser.close()
    return took


async def until_warm(pool: Any) -> None:
    """Wait (up to 30 s) until ``pool`` has ``size`` warm workers and none it is still stopping."""
    for _ in range(600):
        if pool.ready_workers >= pool.size and not getattr(pool, "_retiring", ()):
            return
        await asyncio.sleep(0.05)


def tree_environment(tree: Path) -> dict[str, str]:
    """This process's environment for a child running the scenariokit of the checkout ``tree``.

    The installed plugin distributions are this tree's, and import what only this tree has: loaded by
    an older release, they fail, and its workers run without any plugin. So the checkout's own
    plugins (``plugins/*/src``) come on ``PYTHONPATH`` after its ``src``, ahead of the installed
    ones, and the installed entry points load those.
    """
    paths = [tree / "src", *sorted(tree.glob("plugins/*/src"))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(path) for path in paths)}


def per_minute(count: int, seconds: float) -> float:
    """Runs per minute."""
    return count / seconds * 60 if seconds > 0 else float("inf")


# --- CPU ------------------------------------------------------------------------------------------


def _component(name: str) -> str:
    if name.startswith("bwrap"):
        return "bubblewrap"
    if name.startswith("python"):
        return "worker Python"
    if name.startswith("node"):
        return "Playwright driver (node)"
    if name.startswith(("chrom", "headless", "Chrom")):
        return "browser"
    return f"other ({name})"


def own_cpuacct_group(root: Path = CGROUP_ROOT / "cpuacct") -> Path:
    """The folder of this process's own group in the cgroup v1 ``cpuacct`` hierarchy mounted at ``root``
    (``root`` itself where ``/proc/self/cgroup`` names none)."""
    own = next((path for names, path in own_groups(Path("/proc/self/cgroup").read_text()).items()
                if "cpuacct" in names.split(",")), "/")  # fmt: skip
    return root / own.lstrip("/")


class CpuGroup:
    """A control group holding this process and everything it starts from now on: their exact CPU.

    ``/proc/PID/stat`` gives a process's CPU in ticks of 10 ms, its user and system time each cut
    down to a whole tick, and a :class:`CpuSampler` loses what a process spends after its last sample:
    a run of short-lived processes (a sandbox's launcher, a worker, a driver, a browser and its
    renderer) is under-counted by up to 20 ms for each. The kernel keeps a group's CPU in nanoseconds
    for every task it ever held, exited ones included: cgroup v1's ``cpuacct`` hierarchy, which the
    pool's run groups (``memory``, ``pids``) leave alone. Where it is not mounted or this process may
    not make a group there, :attr:`available` is False and :meth:`seconds` answers None.
    """

    def __init__(self, root: Path = CGROUP_ROOT / "cpuacct") -> None:
        self._root = root
        self._home: Path | None = None
        self._path: Path | None = None
        self.reason = ""

    @property
    def available(self) -> bool:
        return self._path is not None

    def __enter__(self) -> CpuGroup:
        # made inside this process's own group (a delegated one, or a systemd slice's), and left for it
        home = own_cpuacct_group(self._root)
        for left in home.glob("bench-cpu-*"):  # an earlier bench's, once its last process ended
            with contextlib.suppress(OSError):
                left.rmdir()
        path = home / f"bench-cpu-{os.getpid()}"
        try:
            path.mkdir()
            (path / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as error:
            self.reason = f"no cpuacct group at {self._root} ({error.strerror or error})"
            with contextlib.suppress(OSError):
                path.rmdir()
            return self
        self._home, self._path = home, path
        return self

    def __exit__(self, *exc: object) -> None:
        if self._path is None or self._home is None:
            return
        with contextlib.suppress(OSError):
            (self._home / "cgroup.procs").write_text(str(os.getpid()))
        # a descendant still alive keeps the group (the kernel refuses to remove it): the next bench does
        with contextlib.suppress(OSError):
            self._path.rmdir()
        self._path = None

    def seconds(self) -> float | None:
        """CPU seconds every task of the group has spent since it was made; None without a group."""
        if self._path is None:
            return None
        return int((self._path / "cpuacct.usage").read_text()) / 1e9


class CpuSampler:
    """Samples the CPU time of every descendant of ``root`` (this process by default), keeping each one's
    last value.

    A process is followed from the first time it is seen below this one, also after it is reparented
    (a browser whose driver was killed), until it is gone; what it spent before the sampler started,
    or before :meth:`baseline`, is left out. The last few milliseconds of a process that exits between
    two samples are lost, and ``/proc`` gives each process's time in ticks of 10 ms: a :class:`CpuGroup`
    counts it all exactly.
    """

    def __init__(self, every: float = 0.005, root: int | None = None, group: CpuGroup | None = None) -> None:
        self._every = every
        self._group = group
        self._group_began: float | None = None
        #: CPU seconds of every task of ``group`` over the window, the sampler's own thread left out
        #: (exact: exited processes and the ticks /proc cuts off included); None without a group
        self.exact: float | None = None
        self._root = os.getpid() if root is None else root
        self._lock = threading.Lock()
        self._seen: dict[int, tuple[str, float]] = {}
        self._before: dict[int, float] = {}
        self._followed: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.parent = 0.0
        #: components named by pid rather than by process name (a child scheduler process)
        self.labels: dict[int, str] = {}
        #: CPU seconds the whole machine was busy over the window, every process and the kernel's own work
        self.machine = 0.0
        self._sampling = 0.0

    def __enter__(self) -> CpuSampler:
        # processes already below the root (a driver zygote an earlier pool of this process left
        # running, as it does) count from now on only, as after baseline()
        table = {stat.pid: stat for stat in proc_stats()}
        alive = processes_below({pid: stat.ppid for pid, stat in table.items()}, [self._root]) - {self._root}
        self._followed = set(alive)
        self._before = {pid: table[pid].seconds for pid in alive}
        self._own = os.times()
        self._machine = _machine_seconds()[0]
        self._group_began = self._group.seconds() if self._group else None
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        now = os.times()
        spent = (now.user - self._own.user) + (now.system - self._own.system)
        self.parent = spent - self._sampling  # the sampler's own thread is no part of the scheduler
        self.machine = _machine_seconds()[0] - self._machine - self._sampling
        ended = self._group.seconds() if self._group else None
        if ended is not None and self._group_began is not None:
            self.exact = ended - self._group_began - self._sampling

    def baseline(self) -> None:
        """Count only what is spent from now on."""
        with self._lock:
            # what each followed process had spent by now, from its birth: what it was seen to spend
            # since the sampler started, and what it had spent before that
            seen = {pid: cpu + self._before.get(pid, 0.0) for pid, (_, cpu) in self._seen.items()}
            self._before = {**self._before, **seen}
            self._seen.clear()
            self._own = os.times()
            self._machine = _machine_seconds()[0]
            self._group_began = self._group.seconds() if self._group else None
            self._sampling = 0.0

    def _loop(self) -> None:
        me = self._root
        while not self._stop.is_set():
            began = time.thread_time()
            table = {stat.pid: stat for stat in proc_stats()}
            with self._lock:
                for pid, stat in table.items():
                    if pid in self._followed or stat.ppid == me or stat.ppid in self._followed:
                        self._followed.add(pid)
                        component = self.labels.get(pid) or _component(stat.name)
                        self._seen[pid] = (component, stat.seconds - self._before.get(pid, 0.0))
                self._followed &= set(table)
                self._sampling += time.thread_time() - began
            time.sleep(self._every)

    @property
    def sampling(self) -> float:
        """CPU seconds the sampling thread itself spent."""
        return self._sampling

    def by_component(self) -> dict[str, float]:
        """CPU seconds of the sampled processes, summed by component."""
        totals: dict[str, float] = defaultdict(float)
        for component, cpu in self._seen.values():
            totals[component] += cpu
        return dict(totals)


@attrs.frozen
class ProcStat:
    """What ``/proc/PID/stat`` says of a process that a benchmark reads."""

    pid: int
    name: str
    ppid: int
    #: CPU seconds of the process itself (user and system)
    seconds: float
    #: CPU seconds of its children that ended and that it waited for
    reaped_seconds: float
    #: minor page faults of those children (a forked child's first write to each page it shares with
    #: its parent is one: the page is copied)
    reaped_minor_faults: int = 0


def _proc_stat(pid: int | str) -> ProcStat:
    """A process's ``/proc/PID/stat`` (OSError once it is gone)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read().decode(errors="replace")
    # the command name may hold spaces and parentheses: the fields follow the last ")"
    close = stat.rindex(")")
    fields = stat[close + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return ProcStat(
        pid=int(pid),
        name=stat[stat.index("(") + 1 : close],
        ppid=int(fields[1]),
        seconds=(int(fields[11]) + int(fields[12])) / tick,
        reaped_seconds=(int(fields[13]) + int(fields[14])) / tick,
        reaped_minor_faults=int(fields[8]),
    )


def proc_stats() -> Iterator[ProcStat]:
    """Every process on the machine that can still be read, from ``/proc``."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):  # gone meanwhile
                yield _proc_stat(entry.name)


#: what a zygote's command line holds: the Playwright driver zygote's script, the worker zygote's module
DRIVER_ZYGOTE = b"driver_zygote.js"
WORKER_ZYGOTE = b"scenariokit.runner.confinement.zygote_process"


def zygote_of(parent: int, kind: bytes = DRIVER_ZYGOTE) -> int | None:
    """The pid of the zygote of ``kind`` (:data:`DRIVER_ZYGOTE`, :data:`WORKER_ZYGOTE`) that ``parent``
    started, found by its command line; None when it runs none."""
    for stat in proc_stats():
        if stat.ppid == parent:
            with contextlib.suppress(OSError):
                if kind in Path(f"/proc/{stat.pid}/cmdline").read_bytes():
                    return stat.pid
    return None


@attrs.frozen
class Reaped:
    """What a process's reaped children spent (the kernel sums them), and what it spent itself."""

    #: CPU seconds of the children (``/proc`` gives the nanosecond sum in ticks of 10 ms)
    seconds: float
    #: their minor page faults
    minor_faults: int
    #: CPU seconds of the process itself
    own_seconds: float

    def since(self, earlier: Reaped) -> Reaped:
        return Reaped(
            seconds=self.seconds - earlier.seconds,
            minor_faults=self.minor_faults - earlier.minor_faults,
            own_seconds=self.own_seconds - earlier.own_seconds,
        )


def reaped_and_own(pid: int) -> Reaped | None:
    """What ``pid``'s reaped children spent and what it spent itself; None once it is gone."""
    try:
        stat = _proc_stat(pid)
    except OSError:
        return None
    return Reaped(
        seconds=stat.reaped_seconds, minor_faults=stat.reaped_minor_faults, own_seconds=stat.seconds
    )


def process_seconds(pid: int) -> float:
    """CPU seconds of a process itself (user and system, every thread it had), to the nanosecond.

    Read from the kernel's CPU clock of the process (``clock_gettime`` on the clock id that
    ``clock_getcpuclockid`` would give): ``/proc/PID/stat`` cuts its user and system time each down to
    a tick of 10 ms, too coarse for a few hundred requests of under a millisecond. Where that clock
    cannot be read, it is ``/proc``'s figure; OSError once the process is gone (reading ``/proc``).
    """
    try:
        return time.clock_gettime(process_cpu_clock(pid))
    except OSError:
        return _proc_stat(pid).seconds


def process_cpu_clock(pid: int) -> int:
    """The clock id of a process's CPU clock, as glibc's ``clock_getcpuclockid`` makes it (Linux's
    ``CPUCLOCK_SCHED`` of the whole thread group), which Python does not offer."""
    return (~pid << 3) | 2


def processes_below(parents: Mapping[int, int], roots: Iterable[int]) -> set[int]:
    """``roots`` and every process below them, from each process's parent (``parents``: pid to ppid),
    so a child that leads a process group of its own counts too."""
    found = set(roots)
    frontier = set(found)
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def tree_seconds(roots: Iterable[int]) -> float:
    """CPU seconds the live processes below ``roots`` (and the roots) have spent, each read from /proc."""
    found = processes_below({pid: info.ppid for pid, info in process_table().items()}, roots)
    total = 0.0
    for pid in found:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += process_seconds(pid)
    return total


async def until_quiet(
    roots: Iterable[int], *, cores: float = 0.1, settle: float = 2.0, within: float = 240.0
) -> float:
    """Wait until the process trees of ``roots`` use less than ``cores`` cores for ``settle`` seconds in a
    row (a ``scenariokit worker`` whose pool prepared its snapshot, zygotes and first browsers), at most
    ``within`` seconds; the seconds waited."""
    pids = list(roots)
    began = time.monotonic()
    quiet_since: float | None = None
    last = tree_seconds(pids)
    while time.monotonic() - began < within:
        await asyncio.sleep(0.5)
        now = tree_seconds(pids)
        busy = (now - last) / 0.5
        last = now
        if busy >= cores:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settle:
            break
    return time.monotonic() - began


def _machine_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy and in all, over every core, since boot."""
    values = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - idle) / tick, sum(values) / tick


@attrs.define
class CpuSplit:
    """Where the cores went over a stretch of time: the server, the runs' processes, this client, others.

    The server's own CPU is its API and its scheduler; a run's processes (bubblewrap, the worker, the
    Playwright driver, the browser) are the server's descendants. With a :class:`CpuGroup` that holds
    this process, and so the server it started and every run's process, they are counted exactly: the
    group's CPU less the server's and this client's. Without one they are sampled from ``/proc`` every
    5 ms by a :class:`CpuSampler` (the last milliseconds of each are lost: a lower bound), and
    :meth:`describe` says so. The client is this process less the sampler's own thread.
    """

    server_pid: int
    group: CpuGroup | None = None
    began: float = 0.0
    marks: tuple[float, ...] = ()
    seconds: dict[str, float] = attrs.field(factory=dict)
    sampler: CpuSampler | None = None
    #: whether ``seconds["runs"]`` is the group's exact count rather than the samples' sum
    exact: bool = False

    def start(self) -> None:
        """Begin the stretch."""
        self.sampler = CpuSampler(root=self.server_pid, group=self.group).__enter__()
        self.began = time.monotonic()
        self.marks = self._now()

    def stop(self) -> None:
        """End the stretch: ``seconds`` holds the CPU seconds of each part (and ``wall``)."""
        server, client, busy, total = (b - a for a, b in zip(self.marks, self._now(), strict=True))
        assert self.sampler is not None
        self.sampler.__exit__()
        runs = sum(self.sampler.by_component().values())
        client -= self.sampler.sampling
        self.exact = self.sampler.exact is not None
        if self.sampler.exact is not None:  # the group less the two processes it holds besides the runs'
            runs = max(0.0, self.sampler.exact - server - client)
        self.seconds = {
            "wall": time.monotonic() - self.began,
            "server": server,
            "runs": runs,
            "client": client,
            "others": max(0.0, busy - server - runs - client - self.sampler.sampling),
            "idle": max(0.0, total - busy),
        }

    def _now(self) -> tuple[float, ...]:
        server = process_seconds(self.server_pid)
        usage = os.times()
        busy, total = _machine_seconds()
        return server, usage.user + usage.system, busy, total

    def describe(self) -> str:
        """``server 0.95, runs 0.80, client 0.20, others 0.05, idle 0.00 cores; load 3.1`` (and how the
        runs were counted)."""
        wall = self.seconds.get("wall") or 1.0
        names = ("server", "runs", "client", "others", "idle")
        parts = ", ".join(f"{name} {self.seconds[name] / wall:.2f}" for name in names)
        counted = "runs counted exactly" if self.exact else "runs sampled: a lower bound"
        return f"{parts} cores; load average {os.getloadavg()[0]:.1f}; {counted}"


# --- memory ---------------------------------------------------------------------------------------


def _kib(pid: int, path: str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


@attrs.define
class MemoryPeak:
    """The largest resident set one run's process tree (worker, driver, browsers) reached."""

    rss_kib: int = 0
    pss_kib: int = 0
    samples: int = 0

    def describe(self) -> str:
        """``312 MiB RSS (180 MiB PSS)``: RSS counts shared pages once per process, PSS shares them out."""
        if not self.samples:
            return "not measured"
        return f"{self.rss_kib / 1024:.0f} MiB RSS ({self.pss_kib / 1024:.0f} MiB PSS)"

    def against_target(self) -> str:
        """The PSS peak against issue 31's target for one run's processes on the headless shell."""
        if not self.samples:
            return "PSS target not measured"
        pss = self.pss_kib / 1024
        verdict = "met" if pss <= PSS_TARGET_MIB else "NOT met"
        return f"PSS {pss:.0f} MiB, target <= {PSS_TARGET_MIB} MiB: {verdict}"


#: peak PSS one run's processes (worker, driver, browsers) may reach with the headless shell (issue 31)
PSS_TARGET_MIB = 300


def target_line(label: str, ratio: float, at_least: float) -> str:
    """``against X: 1.03x (target >= 1.00x: met)``: a ratio and whether it reaches its target."""
    return f"{label}: {ratio:.2f}x (target >= {at_least:.2f}x: {'met' if ratio >= at_least else 'NOT met'})"


def _tree_memory(root: int) -> tuple[int, int]:
    pids = run_group_members(root) or process_tree(root, process_table())
    return (
        sum(_kib(pid, "status", "VmRSS:") for pid in pids),
        sum(_kib(pid, "smaps_rollup", "Pss:") for pid in pids),
    )


@contextlib.asynccontextmanager
async def memory_peak(roots: Callable[[], Iterable[int]], every: float = 0.25) -> AsyncIterator[MemoryPeak]:
    """Sample the trees of the worker processes ``roots()`` names; the peak of one tree is the figure.

    Each root is a worker process leading its own process group, as scenariokit starts them.
    """
    peak = MemoryPeak()

    async def sample() -> None:
        while True:
            for root in list(roots()):
                rss, pss = await asyncio.to_thread(_tree_memory, root)
                peak.rss_kib = max(peak.rss_kib, rss)
                peak.pss_kib = max(peak.pss_kib, pss)
                peak.samples += 1
            await asyncio.sleep(every)

    task = asyncio.create_task(sample())
    try:
        yield peak
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def worker_children(parent: int) -> list[int]:
    """The worker processes of a ``scenariokit serve``: below it, the innermost process-group leaders
    whose tree holds a Playwright driver, or that are in a run's control group. A worker leads its own
    group and starts the driver (or has the driver zygote fork it, into the run's group); the zygote
    that forks workers leads one above theirs (so it is left out), the browser one below the driver
    (not a worker: no driver of its own); the driver zygote is in no run's group, and is no worker.
    """
    table = process_table()
    names = {pid: _name(pid) for pid in table}
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)

    def below(root: int) -> list[int]:
        found, stack = [], list(children.get(root, ()))
        while stack:
            pid = stack.pop()
            found.append(pid)
            stack += children.get(pid, ())
        return found

    candidates = {
        pid
        for pid in below(parent)
        if table[pid].pgid == pid
        and (
            (names.get(pid, "").startswith("python") and run_group_members(pid) is not None)
            or (
                not names.get(pid, "").startswith("node")
                and any(names.get(p, "").startswith("node") for p in below(pid))
            )
        )
    }
    return [pid for pid in candidates if not candidates.intersection(below(pid))]


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


# --- timelines ------------------------------------------------------------------------------------

_PHASES = (
    ("queued", "queued_ms"),
    ("claim", "claim_ms"),
    ("job to worker", "job_to_worker_ms"),
    ("browser ready", "browser_ready_ms"),
    ("context and page", "context_and_page_ms"),
    ("steps", "steps_ms"),
    ("after steps", "after_steps_ms"),
    ("store writes (overlap)", "store_writes_ms"),
    ("browser close (after)", "browser_close_ms"),
)


#: claim → report: the phases a run occupies a worker slot for (the store writes overlap them)
IN_SLOT_PHASES = _PHASES[1:7]


def slot_phase_means(timings: Sequence[RunTimings | None]) -> dict[str, float]:
    """The mean ms of each of :data:`IN_SLOT_PHASES` over the runs, by label (a phase a run did not
    go through, or a run without timings, counts 0)."""
    return {
        label: statistics.fmean(getattr(t, name) or 0 if t is not None else 0 for t in timings)
        for label, name in IN_SLOT_PHASES
    }


def timeline_lines(timings: Sequence[RunTimings | None]) -> list[str]:
    """Each phase's mean and total over the runs, so the next gap is visible."""
    kept = [t for t in timings if t is not None]
    lines = [f"timeline of {len(kept)} runs: mean ms per run, total s"]
    for label, name in _PHASES:
        values = [v for t in kept if (v := getattr(t, name)) is not None]
        if values:
            lines.append(f"  {label:24s} {statistics.fmean(values):7.1f} ms {sum(values) / 1000:7.2f} s")
    in_run = [sum(getattr(t, name) or 0 for _, name in IN_SLOT_PHASES) for t in kept]
    if in_run:
        lines.append(f"  {'claim → outcome, summed':24s} {statistics.fmean(in_run):7.1f} ms")
    return lines


# --- the real server ------------------------------------------------------------------------------


@attrs.frozen
class Served:
    """A ``scenariokit serve`` process and its base URL."""

    process: asyncio.subprocess.Process
    url: str

    @property
    def pid(self) -> int:
        """The server's process id (the first one's, with ``--processes N``)."""
        return self.process.pid


def time_applications(
    record: Callable[[web.Application, web.Request, float], None],
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Call ``record(app, request, ms)`` after every request an application handles: the milliseconds
    ``clock`` counted in ``Application._handle`` (every middleware, the view, the store, the JSON; not
    aiohttp's parsing and writing around it)."""
    handle = web.Application._handle

    async def timed(self: web.Application, request: web.Request) -> web.StreamResponse:
        began = clock()
        try:
            return await handle(self, request)
        finally:
            record(self, request, (clock() - began) * 1000)

    web.Application._handle = timed  # type: ignore[method-assign]


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def scenariokit_serve(
    folder: Path,
    *extra: str,
    settle: float = 2.0,
    env_extra: dict[str, str] | None = None,
    command: Sequence[str] | None = None,
    warm: bool = False,
    healthy_within: float = 60,
) -> AsyncIterator[Served]:
    """``scenariokit serve`` with its defaults, on a free port and a SQLite file in ``folder``.

    ``env_extra`` adds or overrides ``SCENARIOKIT_*`` variables (another database, no scheduler);
    ``settle`` is the pause after ``/health`` answers, for the workers to launch their first browser;
    ``command`` replaces ``scenariokit serve`` (a benchmark's own variant of it, or it under valgrind,
    which needs ``healthy_within`` longer than a minute to come up). With ``warm``, the
    server's process tree is then left until it is quiet (:func:`until_quiet`): its pool has built the
    drivers' snapshot and zygote and launched its first browsers, as in a service up for a while.
    """
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCENARIOKIT_")}
    env.update(SCENARIOKIT_DATABASE_URL=f"sqlite:///{folder / 'bench.db'}", SCENARIOKIT_PORT=str(port))
    env.update(env_extra or {})
    argv = command or (str(Path(sys.executable).parent / "scenariokit"), "serve")
    process = await asyncio.create_subprocess_exec(
        *argv, *extra, cwd=folder, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    served = Served(process, f"http://127.0.0.1:{port}")
    try:
        await wait_healthy(served.url, process, healthy_within)
        await asyncio.sleep(settle)  # let every worker launch its first browser
        if warm:
            await until_quiet([process.pid])
        yield served
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


async def create(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a JSON body and return the created resource (raises on anything but 201)."""
    async with http.post(url, json=body) as answer:
        if answer.status != 201:
            raise SystemExit(f"POST {url} answered {answer.status}: {await answer.text()}")
        created: dict[str, Any] = await answer.json()
        return created


def timings_of(details: Iterable[dict[str, Any]]) -> list[RunTimings | None]:
    """The ``timings`` of run details read over REST, as the library's type."""
    converter = make_converter()
    return [converter.structure(d["timings"], RunTimings) if d.get("timings") else None for d in details]


# --- instructions, counted by valgrind's callgrind ------------------------------------------------

#: A Python under callgrind: the same hashes in every run, and its bytecode kept, so it starts in seconds.
CALLGRIND_ENV = {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": ""}
#: How long a ``scenariokit serve`` under callgrind may take to answer ``/health`` (about half a minute).
CALLGRIND_START = 600.0


def callgrind_installed() -> bool:
    """Whether valgrind and its ``callgrind_control`` are on ``PATH``."""
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def under_callgrind(folder: Path, *argv: str) -> tuple[str, ...]:
    """``python ARGV`` under callgrind, counting nothing until :func:`count_instructions` turns it on;
    its counts are written in ``folder``."""
    out = f"--callgrind-out-file={folder / 'callgrind.%p'}"
    return ("valgrind", "--tool=callgrind", "--instr-atstart=no", out, sys.executable, *argv)


async def callgrind_control(*args: str) -> None:
    """``callgrind_control ARGS``: a command to a process running under callgrind (through vgdb)."""
    control = await asyncio.create_subprocess_exec(
        "callgrind_control", *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await control.communicate()
    if control.returncode:
        raise SystemExit(f"callgrind_control {' '.join(args)} failed: {err.decode(errors='replace')}")


async def count_instructions(pid: int, folder: Path, work: Callable[[], Awaitable[None]]) -> int:
    """The instructions process ``pid`` (started by :func:`under_callgrind` in ``folder``) runs while
    ``work`` runs: counting on, its count zeroed, ``work``, then the count written and read."""
    await callgrind_control("--instr=on", str(pid))
    await callgrind_control("--zero", str(pid))
    await work()
    await callgrind_control("--dump", str(pid))
    return _last_count(folder, pid)


def _last_count(folder: Path, pid: int) -> int:
    """The instructions in the last count callgrind wrote for ``pid`` (its ``summary:`` line)."""
    dumps = sorted(folder.glob(f"callgrind.{pid}.*"), key=lambda dump: int(dump.suffix[1:]))
    for line in dumps[-1].read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"{dumps[-1]} has no summary line")


async def wait_healthy(url: str, process: asyncio.subprocess.Process, within: float = 60) -> None:
    """Wait until ``/health`` answers 200, ``within`` seconds (the process must stay alive meanwhile)."""
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + within
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{url}/health") as answer:
                    if answer.status == 200:
                        return
            if process.returncode is not None or time.monotonic() > deadline:
                raise SystemExit(f"{url} did not come up (exit code {process.returncode})")
            await asyncio.sleep(0.1)


# --- runs through the REST API -----------------------------------------------------------------

#: how often a dashboard asks whether runs are still in progress
DASHBOARD_POLL_SECONDS = 0.25


async def queue_run(http: aiohttp.ClientSession, body: dict[str, str]) -> str:
    run: dict[str, Any] = await create(http, "/api/v1/run", body)
    return str(run["id"])


async def run_details(http: aiohttp.ClientSession, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Each run's detail (one request per run: a run missing from the store is an error)."""
    found = []
    for run_id in ids:
        async with http.get(f"/api/v1/run/{run_id}", params={"limit": "1"}) as answer:
            if answer.status != 200:
                raise SystemExit(f"run {run_id} is lost: GET answered {answer.status}")
            found.append(await answer.json())
    return found


async def statuses(http: aiohttp.ClientSession, ids: list[str]) -> dict[str, str]:
    """The status of each run (:func:`run_details`)."""
    return {run_id: d["status"] for run_id, d in zip(ids, await run_details(http, ids), strict=True)}


async def runs_per_minute(
    http: aiohttp.ClientSession, body: dict[str, str], runs: int, details: list[dict[str, Any]] | None = None
) -> float:
    """Queue ``runs`` runs at once, await them as a dashboard does (one list request per poll).

    ``details``, when given, gets the finished runs' details, as read to check that each passed.
    """
    began = time.perf_counter()
    ids = [await queue_run(http, body) for _ in range(runs)]
    while True:
        async with http.get("/api/v1/run", params={"status": "in_progress", "limit": "1"}) as answer:
            if (await answer.json())["total"] == 0:
                break
        await asyncio.sleep(DASHBOARD_POLL_SECONDS)
    elapsed = time.perf_counter() - began
    ended = await run_details(http, ids)
    failed = [run_id for run_id, d in zip(ids, ended, strict=True) if d["status"] != "pass"]
    if failed:
        raise SystemExit(f"{len(failed)} of {runs} runs did not pass (first: {failed[0]})")
    if details is not None:
        details.extend(ended)
    return per_minute(runs, elapsed)
