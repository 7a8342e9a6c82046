"""What a step leaves unseen: coroutines it never awaited, warnings it raised, task errors nobody read.

While a step runs, :class:`StepWatch` tracks where coroutines are made
(``sys.set_coroutine_origin_tracking_depth``) and takes every warning the interpreter shows. Python
warns ``coroutine '…' was never awaited`` when such a coroutine is dropped, and the origin it records
names the frames that made it; a coroutine made in step or snippet code (files ``<step N>`` and
``<snippet alias>``) and dropped unawaited fails the step, naming its line and the call. At the step's
end a collection of the young generations finds those dropped in a reference cycle, and a coroutine
still unstarted in the step's names is one too. Any other warning, and an error of a task nobody
awaited, goes to the run log against the step's line (``<step 1>:3``), never against a file of the
installed service.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from scenariokit.domain.code import call_at, unawaited_message
from scenariokit.domain.job import StepJob

#: how many frames a coroutine's origin keeps: enough to reach a step from deep inside a snippet
ORIGIN_DEPTH = 64
#: the generations collected at a step's end (0 and 1)
YOUNG_GENERATIONS = 1
_UNAWAITED = re.compile(r"coroutine '(?P<name>[^']+)' was never awaited")
# ``warnings.filterwarnings`` compiles its message with ``re.I`` at every step. Compiled here, as the
# worker zygote imports this module, ``re``'s cache holds it for every worker forked from the zygote.
re.compile(_UNAWAITED.pattern, re.IGNORECASE)
_ORIGIN_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
STEP_FILE_PREFIX = "<step "
SNIPPET_FILE_PREFIX = "<snippet "

#: ``log(level, message)``: the run log
LogSink = Callable[[str, str], None]


def is_user_file(filename: str) -> bool:
    """Whether ``filename`` is step or snippet code (compiled under ``<step N>`` or ``<snippet alias>``)."""
    return filename.startswith((STEP_FILE_PREFIX, SNIPPET_FILE_PREFIX))


@attrs.frozen
class Unawaited:
    """A coroutine made in user code and dropped unawaited: where the step made it, and the call."""

    step_file: str
    line: int
    call: str
    snippet: str | None = None
    snippet_line: int | None = None

    def message(self, current: StepJob) -> str:
        """``line N: <the call> was never awaited; add await`` (with the snippet, or another step, named)."""
        text = unawaited_message(self.line, self.call, ran=True)
        if self.step_file != current.filename:
            text = f"{self.step_file[1:-1]} {text}"
        if self.snippet is not None:
            text += f" (in snippet {self.snippet!r} line {self.snippet_line})"
        return text


class StepWatch:
    """Watches one step at a time; :meth:`watching` wraps its execution."""

    def __init__(self, log: LogSink, sources: Callable[[str], str | None]) -> None:
        self._log = log
        #: the code of a step or snippet file, by its file name
        self._sources = sources
        self._step: StepJob | None = None
        self.unawaited: list[Unawaited] = []

    @contextlib.contextmanager
    def watching(self, step: StepJob, names: Mapping[str, Any]) -> Iterator[StepWatch]:
        """Watch ``step`` (its names are ``names``) while the block runs; findings go to :attr:`unawaited`."""
        self._step = step
        self.unawaited = []
        depth = sys.get_coroutine_origin_tracking_depth()
        sys.set_coroutine_origin_tracking_depth(ORIGIN_DEPTH)
        loop = asyncio.get_running_loop()
        handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        try:
            with warnings.catch_warnings():
                # every drop is reported (the default action shows one per place, and places repeat)
                warnings.filterwarnings("always", message=_UNAWAITED.pattern, category=RuntimeWarning)
                warnings.showwarning = self._show
                try:
                    yield self
                finally:
                    # coroutines the step dropped in a reference cycle warn now, while it is watched; the
                    # young generations hold what the step made (a full collection of a worker's heap
                    # costs 10-15 ms a step, for cycles that outlived two collections during the step)
                    gc.collect(YOUNG_GENERATIONS)
                    self._unstarted(names)
        finally:
            loop.set_exception_handler(handler)
            sys.set_coroutine_origin_tracking_depth(depth)
            self._step = None

    # --- coroutines ---------------------------------------------------------------------------------

    def _unstarted(self, names: Mapping[str, Any]) -> None:
        """A coroutine the step made and keeps in a name, never started: closed, and a finding."""
        for value in list(names.values()):
            if not (inspect.iscoroutine(value) and inspect.getcoroutinestate(value) == "CORO_CREATED"):
                continue
            origin = value.cr_origin
            frames = [(filename, line) for filename, line, _ in reversed(origin or ())]
            found = self._finding(frames, value.__qualname__)
            if found is not None and found.step_file == self._step_file():
                value.close()  # closed, it is not reported again when dropped
                self.unawaited.append(found)

    def _step_file(self) -> str:
        return self._step.filename if self._step is not None else "<step>"

    def _finding(self, frames: list[tuple[str, int]], qualname: str) -> Unawaited | None:
        """The finding for a coroutine made in ``frames`` (outermost first), when user code made it."""
        user = [(filename, line) for filename, line in frames if is_user_file(filename)]
        if not user:
            return None
        filename, line = user[-1]
        name = qualname.rpartition(".")[2]
        call = call_at(self._sources(filename) or "", line, name) or f"{name}(…)"
        if filename.startswith(STEP_FILE_PREFIX):
            return Unawaited(step_file=filename, line=line, call=call)
        steps = [(f, n) for f, n in user if f.startswith(STEP_FILE_PREFIX)]
        step_file, step_line = steps[-1] if steps else (self._step_file(), 0)
        snippet = filename[len(SNIPPET_FILE_PREFIX) : -1]
        return Unawaited(step_file=step_file, line=step_line, call=call, snippet=snippet, snippet_line=line)

    # --- warnings and task errors -------------------------------------------------------------------

    def _show(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        """``warnings.showwarning`` while a step runs."""
        text = str(message)
        dropped = _UNAWAITED.match(text) if issubclass(category, RuntimeWarning) else None
        if dropped is not None:
            frames = [(m["file"], int(m["line"])) for m in _ORIGIN_FRAME.finditer(text)]
            found = self._finding(frames or _stack_frames(), dropped["name"])
            if found is not None:
                self.unawaited.append(found)
                return
            text = dropped.group(0)  # made by library code: the first line, without the library's paths
        where = f"{filename}:{lineno}" if is_user_file(filename) else self._where_now()
        self._log("warning", f"{where}: {category.__name__}: {text}")

    def _where_now(self) -> str:
        """The innermost step or snippet line running now, else the step's name."""
        frames = [(f, n) for f, n in _stack_frames() if is_user_file(f)]
        if frames:
            filename, line = frames[-1]
            return f"{filename}:{line}"
        return self._step_file()

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's report of an error nobody retrieved, against the step's line, without paths."""
        exc = context.get("exception")
        text = context.get("message") or "error in a task"
        where = self._step_file()
        if isinstance(exc, BaseException):
            frames = [(f, n) for f, n in _traceback_frames(exc.__traceback__) if is_user_file(f)]
            if frames:
                where = "{}:{}".format(*frames[-1])
            detail = str(exc).strip()
            text = f"{text}: {type(exc).__name__}" + (f": {detail}" if detail else "")
        self._log("warning", f"{where}: {text}")


def _stack_frames() -> list[tuple[str, int]]:
    """The frames running now, outermost first."""
    frames: list[tuple[str, int]] = []
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return frames[::-1]


def _traceback_frames(tb: types.TracebackType | None) -> list[tuple[str, int]]:
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return frames
