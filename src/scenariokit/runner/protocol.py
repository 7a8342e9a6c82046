"""What the pool, a worker process and the pool's zygote say to each other, and the run outcomes.

Commands go parent → worker, reports go worker → parent, over one socket (:class:`Channel`); the pool
asks its zygote for a worker with a :class:`ForkRequest`. Every message is a **frame**: one JSON object
that names its type (``{"type": "RunReport", ...}``) beside that class's fields, made and read by this
module's own converter (:func:`encode_frame`, :func:`decode_frame`). Nothing between processes is a
pickle: the worker runs step code, so what it sends is untrusted, and a frame can only ever become one
of the classes listed here, with every field of its declared type. An unknown type or field, a value
of the wrong type, bytes that are not JSON, or a frame over the size limit is refused
(:class:`UnreadableFrame`); the parent logs it, naming the worker, and reads on. Outcomes are built
here because a run can end in the worker (a step failed) or in the parent (the worker had to be
killed), and both must read the same.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import socket
import struct
import threading
import typing
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.v import format_exception

from scenariokit.domain.authoring import AuthoringReply
from scenariokit.domain.job import (
    ArtifactSaved,
    LogEvent,
    RunEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    SessionSaved,
    StepFinished,
    StepJob,
    StepStarted,
)
from scenariokit.domain.model import (
    Backoff,
    RunError,
    RunErrorKind,
    StepResult,
    StepStatus,
    skip_remaining,
    utcnow,
)
from scenariokit.runner.confinement.sandbox import ResourceLimits
from scenariokit.runner.worker.browser import BrowserConfig
from scenariokit.runner.worker.stepcode import SyntaxProblem, mask_secrets

T = TypeVar("T")

# --- parent → worker -----------------------------------------------------------------------------


@attrs.frozen
class StartRun:
    """Execute this job in a fresh browser."""

    job: RunJob


@attrs.frozen
class CancelRun:
    """Stop the run, failing it with kind ``cancelled``."""

    run_id: uuid.UUID


@attrs.frozen
class ReleaseSession:
    """Close the browser held for this run's saved session."""

    run_id: uuid.UUID


@attrs.frozen
class Shutdown:
    """Close every browser and exit."""


@attrs.frozen
class StartAuthoring:
    """Hold a live authoring session: replay ``job``'s steps, then answer requests until shut down."""

    job: RunJob
    request: int


@attrs.frozen
class AuthoringExec:
    """Execute one piece of step code in the live page (the step's limit applies)."""

    request: int
    step: StepJob
    screenshot: bool = False


@attrs.frozen
class AuthoringLook:
    """Answer the page's state now."""

    request: int
    screenshot: bool = False


Command = StartRun | CancelRun | ReleaseSession | Shutdown | StartAuthoring | AuthoringExec | AuthoringLook


@attrs.frozen
class WorkerOptions:
    """What a worker process is started with: the first frame the pool sends it."""

    browser: BrowserConfig
    #: seconds a saved session's browser is kept open unless released sooner
    session_keepalive: float = 600.0
    limits: ResourceLimits = attrs.field(factory=ResourceLimits)
    #: where the run writes its screenshots and trace (the pool moves them to the artifacts folder)
    artifacts_dir: Path | None = None
    #: where the browser keeps downloads and a trace while it records them: a folder on disk in the
    #: worker's private directory, where its ``TMPDIR`` may be memory (``sandbox.worker_tmp``); None:
    #: Playwright's own temporary folders
    files_dir: Path | None = None


# --- worker → parent -----------------------------------------------------------------------------


@attrs.frozen
class WorkerReady:
    """The worker is in its own process group and Playwright is running."""

    pid: int


@attrs.frozen
class RunReport:
    """An event of the run the worker is executing."""

    run_id: uuid.UUID
    event: RunEvent


Report = WorkerReady | RunReport | SessionReleased | AuthoringReply

# --- pool → zygote -------------------------------------------------------------------------------


@attrs.frozen
class SandboxNamespaces:
    """The namespaces of the bubblewrap sandbox a forked worker joins, by their inode numbers.

    ``user`` is the sandbox's user namespace where bubblewrap made one of its own (an ordinary user's
    service): the worker is then forked through a go-between that enters it first
    (:mod:`.confinement.zygote_process`). None where the sandbox shares the service's.
    """

    mnt: int
    pid: int
    ipc: int
    user: int | None = None


@attrs.frozen
class ForkRequest:
    """Fork a worker (:mod:`.confinement.zygote_process`): its environment, directory and user, under
    bubblewrap the sandbox it joins, and how many of the descriptors given are its control group's."""

    env: dict[str, str]
    cwd: str
    uid: int | None = None
    sandbox: SandboxNamespaces | None = None
    groups: int = 0


# --- frames --------------------------------------------------------------------------------------

#: the largest report the parent reads (a saved session's storage state is the big one)
MAX_REPORT_BYTES = 64 * 1024 * 1024
#: What a worker writes to its stdout and stderr just before it reports a run's outcome: the pool
#: reads each stream on a thread of its own, apart from the reports, so a line step code wrote could
#: reach it after the outcome; with this mark it knows when it has all of them. One ``write`` (under
#: ``PIPE_BUF``: never split by another process's output), ending a line.
OUTPUT_END = b"\x1escenariokit: the run's output ends here\n"
#: the largest command a worker reads (a job holds the saved session it starts from)
MAX_COMMAND_BYTES = 128 * 1024 * 1024
#: a frame's length, before it on the socket
_HEADER = struct.Struct(">I")
_MAX_FRAME = 2**32 - 1

#: what the pool sends a worker, after its :class:`WorkerOptions`
COMMAND_TYPES: tuple[type, ...] = (
    StartRun,
    CancelRun,
    ReleaseSession,
    Shutdown,
    StartAuthoring,
    AuthoringExec,
    AuthoringLook,
)
#: what a worker sends the pool
REPORT_TYPES: tuple[type, ...] = (WorkerReady, RunReport, SessionReleased, AuthoringReply)
_EVENT_TYPES: tuple[type, ...] = (
    LogEvent,
    StepStarted,
    StepFinished,
    ArtifactSaved,
    SessionSaved,
    RunFinished,
)
_FRAME_TYPES = {cls.__name__: cls for cls in (WorkerOptions, *COMMAND_TYPES, *REPORT_TYPES, ForkRequest)}
#: how many of a refused frame's problems a message names
_PROBLEMS_SHOWN = 3
#: JSON's own encoder and decoder, bound once: a run that replaces ``json.dumps`` in its worker (step
#: code may) still reports through these
_ENCODE_JSON = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode
_DECODE_JSON = json.JSONDecoder().decode


class UnreadableFrame(ValueError):
    """What came over a channel is not a frame the reader takes: a bug, or step code writing to it."""


def _scalar(kind: type) -> Callable[[Any, Any], Any]:
    """A strict hook: ``true`` is no number, ``1`` no flag, a number no text."""

    def structure(value: Any, _: Any) -> Any:
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"expected a finite number, not {type(value).__name__}")
            return float(value)
        if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
            raise ValueError(f"expected {kind.__name__}, not {type(value).__name__}")
        return value

    return structure


def _text(what: str, parse: Callable[[str], T]) -> Callable[[Any, Any], T]:
    """A hook for a value the wire carries as a string: ``parse`` it, refusing anything else."""

    def structure(value: Any, _: Any) -> T:
        if not isinstance(value, str):
            raise ValueError(f"expected {what} as a string, not {type(value).__name__}")
        return parse(value)

    return structure


#: the ids frames named lately, parsed: every report of a run names the run, and a loud step's lines
#: its step, so a log line's frame parsed the same two ids again (5 of its 23 µs to decode, wave 3,
#: session 31). Emptied past :data:`_IDS_KEPT` ids; a frame's id is any text ``uuid.UUID`` takes.
_IDS: dict[str, uuid.UUID] = {}
_IDS_KEPT = 256


def _uuid(value: str) -> uuid.UUID:
    """``uuid.UUID(value)``, parsed once for an id seen lately (ids are immutable: one object serves all)."""
    found = _IDS.get(value)
    if found is None:
        found = uuid.UUID(value)
        if len(_IDS) >= _IDS_KEPT:
            _IDS.clear()
        _IDS[value] = found
    return found


def _base64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"expected base64: {exc}") from None


def _json_object(value: Any, _: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"expected an object, not {type(value).__name__}")
    return dict(value)


def _is_tuple_of_items(kind: Any) -> bool:
    args = typing.get_args(kind)
    return typing.get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis


def _list_only(converter: cattrs.Converter) -> Callable[[Any], Callable[[Any, Any], Any]]:
    """``tuple[X, ...]`` from a JSON list only: a string or an object would be iterated by cattrs."""

    def factory(kind: Any) -> Callable[[Any, Any], Any]:
        (item, _) = typing.get_args(kind)

        def structure(value: Any, _: Any) -> tuple[Any, ...]:
            if not isinstance(value, list):
                raise ValueError(f"expected a list, not {type(value).__name__}")
            return tuple(converter.structure(entry, item) for entry in value)

        return structure

    return factory


def _tagged(converter: cattrs.Converter, union: Any, members: tuple[type, ...]) -> None:
    """Have ``union`` travel as an object naming its class in ``type``, beside the class's fields."""
    by_name = {cls.__name__: cls for cls in members}

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(f"expected an object, not {type(value).__name__}")
        body = dict(value)
        name = body.pop("type", None)
        cls = by_name.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ValueError(f"unknown type {_shown(name)}")
        return converter.structure(body, cls)

    def unstructure(value: Any) -> dict[str, Any]:
        return {"type": type(value).__name__, **converter.unstructure(value)}

    converter.register_structure_hook_func(lambda kind: kind == union, structure)
    converter.register_unstructure_hook_func(lambda kind: kind == union, unstructure)


def _shown(name: object) -> str:
    """A frame's type name as a message shows it: short, and only when it is a plain name."""
    if isinstance(name, str) and name.isidentifier() and len(name) <= 40:
        return repr(name)
    return "(none)" if name is None else f"(a {type(name).__name__} that is no type name)"


def _make_wire_converter() -> cattrs.Converter:
    """The converter of frames: Python field names, UUIDs and times as text, bytes as base64.

    Strict where the API's is (:mod:`scenariokit.formats.convert`): an unknown field is refused, a
    value is of its field's type or refused, never coerced.
    """
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for kind in (str, int, bool, float):
        converter.register_structure_hook(kind, _scalar(kind))
    converter.register_structure_hook(uuid.UUID, _text("a UUID", _uuid))
    converter.register_unstructure_hook(uuid.UUID, str)
    converter.register_structure_hook(datetime, _text("an ISO 8601 time", datetime.fromisoformat))
    converter.register_unstructure_hook(datetime, datetime.isoformat)
    converter.register_structure_hook(bytes, _text("base64", _base64))
    converter.register_unstructure_hook(bytes, lambda value: base64.b64encode(value).decode("ascii"))
    converter.register_structure_hook(Path, _text("a path", Path))
    converter.register_unstructure_hook(Path, str)
    for enum_type in (StepStatus, RunErrorKind, Backoff):  # per class: the str hook would take a StrEnum
        converter.register_structure_hook(enum_type, _text(enum_type.__name__, enum_type))
        converter.register_unstructure_hook(enum_type, lambda value: value.value)
    converter.register_structure_hook_func(lambda kind: kind == dict[str, Any], _json_object)
    converter.register_structure_hook_factory(_is_tuple_of_items, _list_only(converter))
    _tagged(converter, RunEvent, _EVENT_TYPES)
    return converter


_WIRE = _make_wire_converter()


def prepare_frames() -> int:
    """Make the converter's code for every frame and event class now; how many classes it made it for.

    cattrs writes (and compiles) a class's structuring and unstructuring code the first time a value
    of it passes. A zygote calls this before it forks, so its workers inherit that code instead of
    each writing it again for its first frames (several milliseconds of a worker's CPU).
    """
    kinds = _reachable_types((*_FRAME_TYPES.values(), *_EVENT_TYPES))
    # Making one type's code can empty the converter's cache of hooks it found (cattrs registers the
    # code it made), so a hook found earlier in a pass may be made again on its first use: passes go
    # on until one finds every hook as the pass before it did (the cache held them all). Besides the
    # classes, the other types their fields name (a tuple of steps, say) have hooks of their own.
    found: list[tuple[Any, Any]] = []
    for _ in range(PREPARE_PASSES):
        hooks = [(_WIRE.get_structure_hook(kind), _WIRE.get_unstructure_hook(kind)) for kind in kinds]
        if hooks == found:
            break
        found = hooks
    return sum(1 for kind in kinds if attrs.has(kind))


#: at most this many passes of :func:`prepare_frames` (two or three suffice)
PREPARE_PASSES = 5


def _reachable_types(roots: Iterable[type]) -> list[Any]:
    """``roots``, every attrs class their fields hold at any depth (a job's steps, say), and every
    other type those fields name (``tuple[StepJob, ...]``, ``Path | None``): each has a hook."""
    found: list[Any] = []
    pending: list[Any] = list(roots)
    while pending:
        kind = pending.pop()
        if not (isinstance(kind, type) or typing.get_origin(kind) is not None) or kind in found:
            continue  # a Literal's values, the Ellipsis of tuple[X, ...], one seen already
        if kind is type(None):  # the None of an optional field: structured with its union
            continue
        found.append(kind)
        if attrs.has(kind):
            pending.extend(field.type for field in attrs.fields(attrs.resolve_types(kind)))
        else:
            pending.extend(typing.get_args(kind))
    return found


def encode_frame(frame: Any) -> bytes:
    """``frame`` (one of this module's frame classes) as the bytes a channel carries."""
    name = type(frame).__name__
    if _FRAME_TYPES.get(name) is not type(frame):
        raise TypeError(f"{name} is not a frame")
    body = {"type": name, **_WIRE.unstructure(frame)}
    return _ENCODE_JSON(body).encode("ascii")


def decode_frame(data: bytes, expected: tuple[type[T], ...]) -> T:
    """The frame ``data`` holds, when it is one of the ``expected`` types; else :class:`UnreadableFrame`."""
    try:
        parsed = _DECODE_JSON(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise UnreadableFrame(f"not a JSON frame ({len(data)} bytes)") from None
    if not isinstance(parsed, dict):
        raise UnreadableFrame(f"a frame is a JSON object, not {type(parsed).__name__}")
    name = parsed.pop("type", None)
    cls = _FRAME_TYPES.get(name) if isinstance(name, str) else None
    if cls is None or cls not in expected:
        raise UnreadableFrame(f"unknown frame type {_shown(name)}")
    try:
        return typing.cast(T, _WIRE.structure(parsed, cls))
    except Exception as exc:
        problems = _problems(exc)
        raise UnreadableFrame(f"a frame of type {name!r} with {problems}") from None


def _problems(exc: BaseException) -> str:
    """What was wrong with a frame's fields, in a few words each (``$.pid: expected int``)."""
    try:
        found = (
            cattrs.transform_error(exc, path="$", format_exception=_said)
            if isinstance(exc, cattrs.BaseValidationError)
            else []
        )
    except Exception:
        found = []
    found = found or [f"{type(exc).__name__}: {exc}"]
    shown = [problem[:200] for problem in found[:_PROBLEMS_SHOWN]]
    more = len(found) - len(shown)
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _said(exc: BaseException, kind: Any) -> str:
    """A field's problem: this module's hooks say it in words (``expected int, not str``), cattrs the rest."""
    if type(exc) is ValueError and str(exc):
        return str(exc)
    return format_exception(exc, kind)


class OversizedFrame(UnreadableFrame):
    """A frame over the reader's limit: skipped unread."""


#: how many bytes past the asked-for a channel's read takes at most, of what has come
_READ_AHEAD = 64 * 1024


class Channel:
    """One end of the socket between the pool and a worker: frames, each after its length (4 bytes).

    Sending is safe from several threads; one thread receives.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self._lock = threading.Lock()
        self.closed = False
        #: what the receiving thread read past the frames it has taken, from ``_at`` on
        self._ahead = b""
        self._at = 0

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        """The channel on an inherited socket descriptor."""
        return cls(socket.socket(fileno=fd))

    def send(self, frame: Any) -> None:
        """Send one frame (blocking); OSError when the other end is gone."""
        self.send_bytes(encode_frame(frame))

    def send_bytes(self, data: bytes) -> None:
        """Send ``data`` as one frame as it is (the tests forge frames so)."""
        if len(data) > _MAX_FRAME:
            raise ValueError(f"a frame of {len(data)} bytes is too large to send")
        with self._lock:
            self._socket.sendall(_HEADER.pack(len(data)) + data)

    def receive(self, expected: tuple[type[T], ...], limit: int) -> T:
        """The next frame, one of ``expected``; :class:`UnreadableFrame` (the channel reads on after it)
        for anything else, EOFError once the other end is gone."""
        return decode_frame(self.receive_bytes(limit), expected)

    def receive_bytes(self, limit: int) -> bytes:
        """The next frame's bytes; one longer than ``limit`` is skipped and :class:`OversizedFrame` raised."""
        (size,) = _HEADER.unpack(self._exactly(_HEADER.size))
        if size > limit:
            self._skip(size)
            raise OversizedFrame(f"a frame of {size} bytes, over the limit of {limit}")
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        """The next ``size`` bytes: from what an earlier read took ahead, then from the socket.

        A read takes whatever has come, up to :data:`_READ_AHEAD` bytes past what is asked: a loud step's
        log lines come as thousands of small frames, which were two reads each (length, then body).
        """
        ahead = len(self._ahead) - self._at
        if ahead >= size:
            start = self._at
            self._at += size
            return self._ahead[start : start + size]
        parts = [self._ahead[self._at :]]
        while ahead < size:
            chunk = self._socket.recv(max(_READ_AHEAD, size - ahead))
            if not chunk:
                self._ahead, self._at = b"", 0
                raise EOFError("the other end closed the channel")
            parts.append(chunk)
            ahead += len(chunk)
        data = b"".join(parts)
        self._ahead, self._at = data[size:], 0  # what is past this frame waits for the next one
        return data[:size]

    def _skip(self, size: int) -> None:
        taken = min(len(self._ahead) - self._at, size)
        self._at += taken
        size -= taken
        buffer = bytearray(65536)
        while size:
            count = self._socket.recv_into(buffer, min(size, len(buffer)))
            if not count:
                raise EOFError("the other end closed the channel")
            size -= count

    def close(self) -> None:
        """Close this end (the other end reads EOF)."""
        self.closed = True
        self._socket.close()


# --- outcomes ------------------------------------------------------------------------------------


def step_label(step: StepJob) -> str:
    """How messages name a step: ``step 2 ("Log in")``."""
    return f'step {step.order} ("{step.title}")' if step.title else f"step {step.order}"


#: a whole-run limit within this of a step's own limit is reported as the step's (they are the same limit)
LIMIT_TOLERANCE_SECONDS = 0.1


def seconds(value: float) -> str:
    """A time limit as messages show it: ``30 s``, ``1.5 s``."""
    return f"{value:g} s"


def step_timeout_message(step: StepJob) -> str:
    """Why a run failed when a step ran past its own limit."""
    return f"{step_label(step)} exceeded its time limit of {seconds(step.timeout_seconds)}"


def run_timeout_message(job: RunJob, step: StepJob) -> str:
    """Why a run failed when it ran past the whole-run limit."""
    return f"run exceeded its time limit of {seconds(job.run_timeout)} during {step_label(step)}"


def failed_step(step: StepJob, message: str, started_at: datetime | None = None) -> StepResult:
    """The result of a step that failed with ``message``."""
    duration = None if started_at is None else int((utcnow() - started_at).total_seconds() * 1000)
    return StepResult(
        step_id=step.id,
        order=step.order,
        status=StepStatus.FAIL,
        title=step.title,
        started_at=started_at,
        duration_ms=duration,
        error=message,
    )


def finished_run(
    job: RunJob,
    results: Iterable[StepResult],
    started_at: datetime,
    error: RunError | None = None,
) -> RunFinished:
    """The run's outcome: the given step results, every other step ``skipped``, in step order."""
    return RunFinished(
        status="fail" if error else "pass",
        error=error,
        step_results=skip_remaining(job.steps, results),
        started_at=started_at,
        finished_at=utcnow(),
    )


def failed_run(
    job: RunJob,
    done: Iterable[StepResult],
    step: StepJob,
    kind: RunErrorKind,
    message: str,
    *,
    started_at: datetime,
    step_started_at: datetime | None = None,
) -> RunFinished:
    """A run that failed at ``step``: the steps before keep their results, the rest are skipped."""
    message = mask_secrets(message, job.secrets)
    failed = failed_step(step, message, step_started_at)
    return finished_run(
        job, [*done, failed], started_at, RunError(kind=kind, message=message, step_id=step.id)
    )


def syntax_failure(job: RunJob, problem: SyntaxProblem, started_at: datetime) -> RunFinished:
    """The outcome of a run whose step code does not compile: the first bad step fails, nothing runs."""
    step = next(s for s in job.steps if s.id == problem.step_id)
    return failed_run(
        job, [], step, RunErrorKind.ERROR, f"{step_label(step)}: {problem.describe()}", started_at=started_at
    )


def mask_event(event: RunEvent, secrets: tuple[str, ...]) -> RunEvent:
    """The event with every secret in its log line or error message replaced by ``***``."""
    if not secrets:
        return event
    if isinstance(event, LogEvent):
        return attrs.evolve(event, message=mask_secrets(event.message, secrets))
    if isinstance(event, StepFinished):
        return StepFinished(_mask_result(event.result, secrets))
    if isinstance(event, RunFinished):
        error = event.error
        if error is not None:
            error = attrs.evolve(error, message=mask_secrets(error.message, secrets))
        results = tuple(_mask_result(result, secrets) for result in event.step_results)
        return attrs.evolve(event, error=error, step_results=results)
    return event


def _mask_result(result: StepResult, secrets: tuple[str, ...]) -> StepResult:
    if result.error is None:
        return result
    return attrs.evolve(result, error=mask_secrets(result.error, secrets))
