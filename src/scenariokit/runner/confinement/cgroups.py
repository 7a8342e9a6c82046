"""A control group per run: one memory and one task limit over the worker, its driver and its browser.

The rlimits a worker sets (:func:`.sandbox.apply_limits`) bind its own Python, but
Chromium and the Playwright driver are other processes: Chromium reserves terabytes of address space
(no ``RLIMIT_AS`` can cover it), and ``RLIMIT_NPROC`` counts per user and does not bind root at all.
A control group binds them all: every process of a run is born in the run's group, whose ``memory``
limit is ``SCENARIOKIT_RUN_MEMORY_MB`` and whose ``pids`` limit is the run's process limit plus what a
browser needs. When a run's processes together pass the memory limit the kernel kills one of them in
the group (nothing outside it); when they pass the task limit a fork or thread fails with ``EAGAIN``.
The run fails naming the limit, and the group's peak memory is the run's measured memory.

Two kernel interfaces exist. cgroup v2 (the unified hierarchy) is used when its controllers are
enabled for this process's own group or can be (this process's group is the hierarchy's root, as in
a container that owns one); cgroup v1 when ``memory``/``pids`` hierarchies are mounted and this
process may create groups in its own groups there (root, or delegated groups). Where neither works
(an unprivileged service, macOS) :func:`open_run_groups` returns None and the rlimits alone apply.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import attrs

from scenariokit.runner.confinement.processes import kill_and_wait, pid_alive

log = logging.getLogger(__name__)

CgroupVersion = Literal[1, 2]
Controller = Literal["memory", "pids"]
CONTROLLERS: tuple[Controller, ...] = ("memory", "pids")
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: how long :meth:`RunGroup.kill` waits for the group's processes to exit (removing it waits on)
KILL_SECONDS = 1.0
#: tasks (processes and threads) a run's browser, driver and worker hold before step code starts
#: anything: the task limit is the run's process limit on top of these
BROWSER_TASKS = 256


@attrs.frozen
class _Place:
    """A folder of one hierarchy and the controllers it limits there."""

    version: CgroupVersion
    path: Path
    controllers: tuple[Controller, ...]


#: the exit code of a process started by :meth:`RunGroup.born_in` that could not join its group
JOIN_FAILED = 125
_JOIN_THEN_EXEC = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    'echo 0 2>/dev/null >"$1" || { echo "scenariokit: cannot join the run\'s control group ($1)" >&2; '
    f"exit {JOIN_FAILED}; }}; "
    'shift; n=$((n - 1)); done; exec "$@"'
)


@attrs.frozen
class GroupLimits:
    """What a run's group holds it to: bytes of memory (swap included) and tasks."""

    memory_bytes: int
    tasks: int


class RunGroup:
    """One run's group (a folder in each hierarchy): join it, read what it saw, kill it, remove it."""

    def __init__(self, places: tuple[_Place, ...], limits: GroupLimits) -> None:
        self.places = places
        self.limits = limits
        #: the files a process writes its pid into to join (one per hierarchy)
        self.procs_files = tuple(str(place.path / "cgroup.procs") for place in self.places)

    def born_in(self, argv: Sequence[str]) -> list[str]:
        """``argv`` started in the group: a shell writes its own pid into each hierarchy's
        ``cgroup.procs`` and then becomes ``argv``, so it and every child it starts is born in the group.

        This takes the place of a ``preexec_fn``, which makes Python fork the whole calling process
        (a scheduler's hundred-odd MiB of page tables, and a copy-on-write fault for every page it
        writes afterwards) instead of using ``vfork``. A group it cannot join ends the shell with
        :data:`JOIN_FAILED` before ``argv`` starts.
        """
        return ["/bin/sh", "-c", _JOIN_THEN_EXEC, "scenariokit-join", str(len(self.procs_files)),
                *self.procs_files, *argv]  # fmt: skip

    def pids(self) -> list[int]:
        """The processes in the group now."""
        found: set[int] = set()
        for name in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in Path(name).read_text().split())
        return sorted(found)

    def _place(self, controller: Controller) -> _Place | None:
        return next((place for place in self.places if controller in place.controllers), None)

    def _read(self, controller: Controller, v1: str, v2: str) -> str | None:
        place = self._place(controller)
        if place is None:
            return None
        with contextlib.suppress(OSError):
            return (place.path / (v2 if place.version == 2 else v1)).read_text()
        return None

    def peak_bytes(self) -> int | None:
        """The most memory the group's processes held at once (None when the kernel does not say)."""
        text = self._read("memory", "memory.max_usage_in_bytes", "memory.peak")
        with contextlib.suppress(TypeError, ValueError):
            return int(text.strip()) if text is not None else None
        return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed in the group for its memory limit."""
        place = self._place("memory")
        if place is None:
            return 0
        text = self._read("memory", "memory.oom_control", "memory.events")
        count = _field(text, "oom_kill")
        if count is not None:
            return count
        # kernels before 4.13 count no kills: say whether the limit was reached at all
        reached: int | None = None
        if place.version == 2:
            reached = _field(text, "max")
        else:
            with contextlib.suppress(TypeError, ValueError):
                reached = int((self._read("memory", "memory.failcnt", "memory.failcnt") or "").strip())
        return 1 if reached else 0

    def task_limit_hits(self) -> int:
        """How many forks or new threads the task limit refused."""
        return _field(self._read("pids", "pids.events", "pids.events"), "max") or 0

    def kill(self) -> None:
        """SIGKILL every process in the group (a run's leftovers once its worker is gone) and wait, up to
        :data:`KILL_SECONDS`, until they have left it, so that its folders can be removed."""
        for place in self.places:
            if place.version == 2 and (place.path / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (place.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + KILL_SECONDS
        for _ in range(50):  # v1: one by one, again for whatever forked meanwhile
            pids = self.pids()
            left = deadline - time.monotonic()
            if not pids or left <= 0:
                return
            kill_and_wait(pids, left)  # a process leaves its group as it exits

    def remove(self) -> None:
        """Kill what is left in the group and remove its folders."""
        self.kill()
        for place in self.places:
            _remove(place.path)


def _field(text: str | None, key: str) -> int | None:
    """The number after ``key`` on its line of a ``key value`` file."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            with contextlib.suppress(ValueError):
                return int(value)
    return None


def _remove(path: Path) -> None:
    for _ in range(300):  # EBUSY while killed processes are still exiting
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                log.warning("run control group %s not removed: %s", path, exc)
                return
            time.sleep(0.01)
    log.warning("run control group %s not removed: still busy", path)


class RunGroups:
    """Where this process makes its runs' groups: a folder of its own in each of its own groups."""

    def __init__(self, places: tuple[_Place, ...], limits: GroupLimits) -> None:
        self.places = places
        self.limits = limits
        self._count = 0

    @property
    def controllers(self) -> tuple[Controller, ...]:
        """The controllers runs are limited by (``memory``, ``pids``: whichever this machine allows)."""
        return tuple(c for c in CONTROLLERS if any(c in place.controllers for place in self.places))

    def create(self, name: str | None = None) -> RunGroup:
        """A new group for one run with its limits set (swap included, so memory cannot dodge it)."""
        self._count += 1
        name = name or f"run-{self._count}"
        made: list[_Place] = []
        try:
            for place in self.places:
                path = place.path / name
                path.mkdir()
                made.append(attrs.evolve(place, path=path))
                _set_limits(made[-1], self.limits)
        except BaseException:
            for place in made:
                with contextlib.suppress(OSError):
                    place.path.rmdir()
            raise
        return RunGroup(tuple(made), self.limits)

    def close(self) -> None:
        """Remove the groups of runs left (their processes killed) and this process's folders."""
        for place in self.places:
            with contextlib.suppress(OSError):
                for child in place.path.iterdir():
                    if child.is_dir():
                        RunGroup((attrs.evolve(place, path=child),), self.limits).remove()
            _remove(place.path)


def _set_limits(place: _Place, limits: GroupLimits) -> None:
    memory, tasks = str(limits.memory_bytes), str(limits.tasks)
    if "memory" in place.controllers:
        if place.version == 2:
            (place.path / "memory.max").write_text(memory)
            with contextlib.suppress(OSError):  # absent without swap accounting
                (place.path / "memory.swap.max").write_text("0")
        else:
            (place.path / "memory.limit_in_bytes").write_text(memory)
            with contextlib.suppress(OSError):  # present only with swap accounting
                (place.path / "memory.memsw.limit_in_bytes").write_text(memory)
    if "pids" in place.controllers:
        (place.path / "pids.max").write_text(tasks)


def own_groups(proc_cgroup: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller list, "" for v2: the group's path}."""
    groups: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            groups[parts[1]] = parts[2]
    return groups


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _v2_place(mount: Path, own: str) -> _Place | None:
    """This process's v2 group, with the controllers its children may have (enabled here if need be)."""
    group = mount / own.lstrip("/")
    available = set((group / "cgroup.controllers").read_text().split()) & set(CONTROLLERS)
    if not available or not _writable_dir(group):
        return None
    enabled = set((group / "cgroup.subtree_control").read_text().split())
    missing = available - enabled
    # enabling a controller in a group that holds processes breaks "no internal processes" (the root
    # group is exempt): only there may this process turn them on itself
    if missing and own in ("/", ""):
        with contextlib.suppress(OSError):
            (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(missing)))
            enabled |= missing
    usable = tuple(c for c in CONTROLLERS if c in available & enabled)
    return _Place(2, group, usable) if usable else None


def _candidates(root: Path, own: dict[str, str]) -> Iterable[_Place]:
    """Where runs' groups could go: a v2 group with controllers, else a v1 group per controller."""
    if "" in own:
        for mount in (root, root / "unified"):  # unified at the root, or beside v1 ("hybrid")
            if (mount / "cgroup.controllers").exists():
                with contextlib.suppress(OSError):
                    place = _v2_place(mount, own[""])
                    if place is not None:
                        yield place
    for controller in CONTROLLERS:
        path = next((p for names, p in own.items() if controller in names.split(",")), None)
        if path is not None and (root / controller / "cgroup.procs").exists():
            group = root / controller / path.lstrip("/")
            if _writable_dir(group):
                yield _Place(1, group, (controller,))


#: a process's folders are named ``scenariokit-<its PID namespace>-<pid>[-<tag>]``: the namespace says
#: whose pid it is (another container may share the hierarchy), so only this namespace's dead are removed
PREFIX = "scenariokit-"
_NAME = re.compile(rf"{PREFIX}(\d+)-(\d+)(-.*)?")
#: a run's group, as :meth:`RunGroups.create` names it, in a process's folder:
#: ``…/scenariokit-<namespace>-<pid>[-<tag>]/run-<n>``
RUN_GROUP = re.compile(rf"/{re.escape(PREFIX)}[^/]+/run-\d+$")


def run_group_members(pid: int) -> set[int] | None:
    """Every process in the run control group ``pid`` is in, or None when it is in none.

    A run's group holds its worker and everything the run started, also what is not the worker's
    descendant: a driver the driver zygote forked for it, and that driver's browser.
    """
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if not RUN_GROUP.search(path):
            continue
        hierarchy = controllers.removeprefix("name=")
        for folder in (CGROUP_ROOT / hierarchy, CGROUP_ROOT / "unified", CGROUP_ROOT):
            try:
                listed = (folder / path.lstrip("/") / "cgroup.procs").read_text().split()
            except OSError:
                continue
            return {int(member) for member in listed}
    return None


def _pid_namespace() -> int:
    with contextlib.suppress(OSError):
        return os.stat("/proc/self/ns/pid").st_ino
    return 0


def _remove_dead(parent: _Place, limits: GroupLimits) -> None:
    """Remove the folders a process of this PID namespace left when it was killed before closing them."""
    namespace = _pid_namespace()
    with contextlib.suppress(OSError):
        for child in parent.path.iterdir():
            found = _NAME.fullmatch(child.name)
            if (
                found
                and int(found.group(1)) == namespace
                and child.is_dir()
                and not pid_alive(int(found.group(2)))
            ):
                RunGroups((attrs.evolve(parent, path=child),), limits).close()


@functools.cache
def available_controllers() -> tuple[Controller, ...]:
    """The limits runs' control groups would have in this process (probed once, by making one)."""
    groups = open_run_groups(64, 1, tag="probe")
    if groups is None:
        return ()
    try:
        return groups.controllers
    finally:
        groups.close()


def open_run_groups(
    memory_mb: int,
    processes: int,
    *,
    root: Path = CGROUP_ROOT,
    proc_cgroup: str | None = None,
    tag: str | None = None,
) -> RunGroups | None:
    """This process's :class:`RunGroups`, each run held to ``memory_mb`` MiB and ``processes`` tasks
    beyond :data:`BROWSER_TASKS`, or None where the machine lets it make none. ``root``,
    ``tag`` tells apart the groups of several pools of one process; ``root`` and ``proc_cgroup`` are
    for tests.
    """
    if not root.is_dir():
        return None
    try:
        text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    limits = GroupLimits(memory_bytes=memory_mb * 1024 * 1024, tasks=processes + BROWSER_TASKS)
    name = f"{PREFIX}{_pid_namespace()}-{os.getpid()}" + (f"-{tag}" if tag else "")
    places: list[_Place] = []
    for candidate in _candidates(root, own_groups(text)):
        _remove_dead(candidate, limits)
        wanted = tuple(c for c in candidate.controllers if not any(c in p.controllers for p in places))
        if not wanted:
            continue
        folder = candidate.path / name
        place = _Place(candidate.version, folder, wanted)
        try:
            folder.mkdir(exist_ok=True)
            if candidate.version == 2:
                (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            probe = RunGroups((place,), limits).create("probe")
            probe.remove()
        except OSError as exc:
            log.debug("no run control groups under %s: %s", candidate.path, exc)
            with contextlib.suppress(OSError):
                folder.rmdir()
            continue
        places.append(place)
    return RunGroups(tuple(places), limits) if places else None
