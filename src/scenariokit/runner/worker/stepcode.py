"""Compiling and running step code, the names it sees, and how its failures read.

Step code is Python with top-level ``await``, compiled with ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT`` under the
file name ``<step N>`` so tracebacks and messages carry the line inside the step. Snippets run as the
body of ``async def __snippet__(args)`` compiled from the snippet's own syntax tree, so their line
numbers are the snippet's own too. Every step of a run shares one namespace: a name one step binds is
visible to the steps after it.
"""

from __future__ import annotations

import builtins
import inspect
import marshal
import sys
import types
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from playwright.async_api import expect

from scenariokit.domain.code import compile_snippet_code, compile_step_code
from scenariokit.domain.job import CredentialValue, RunJob, StepJob, compiled
from scenariokit.domain.model import RunErrorKind, environment_url
from scenariokit.domain.suggest import did_you_mean
from scenariokit.runner.worker.masking import MASK, mask_text

LOG_LEVELS = ("debug", "info", "warning", "error")

#: ``log(level, message)``: where ``log()`` and ``print()`` lines go (the worker masks and reports them).
LogSink = Callable[[str, str], None]


class SnippetSource(Protocol):
    """Where snippets come from besides the store: ``get(alias)`` gives the code or None."""

    def get(self, alias: str) -> str | None: ...


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every non-empty secret, in each form :func:`.masking.secret_forms` lists, as ``***``."""
    return mask_text(text, secrets)


# --- compiling -----------------------------------------------------------------------------------


class SyntaxProblem(NamedTuple):
    """A step whose code does not compile, found before any browser starts."""

    step_id: uuid.UUID
    order: int
    lineno: int | None
    msg: str

    def describe(self) -> str:
        """The message a run records for it."""
        where = f" (line {self.lineno})" if self.lineno else ""
        return f"SyntaxError: {self.msg}{where}"


def step_filename(step: StepJob) -> str:
    """The file name step code is compiled under; tracebacks name it."""
    return step.filename


def compile_step(step: StepJob) -> types.CodeType:
    """Step code compiled with top-level ``await`` allowed: the job's own compile when it has one.

    Raises :class:`SyntaxError`.
    """
    if step.compiled_code is not None:  # made by domain.job.compiled, in this same interpreter
        code: types.CodeType = marshal.loads(step.compiled_code)
        return code
    return compile_step_code(step.exec_code, step_filename(step))


def check_syntax(steps: Sequence[StepJob]) -> list[SyntaxProblem]:
    """Every step whose code does not compile, in step order (read from the job's compile when it has one)."""
    problems = []
    for step in sorted(steps, key=lambda s: s.order):
        error = compiled(step).syntax_error
        if error is not None:
            problems.append(SyntaxProblem(step.id, step.order, *error))
    return problems


def compile_snippet(alias: str, code: str) -> types.CodeType:
    """Snippet code compiled as the body of ``async def __snippet__(args)``, keeping its line numbers."""
    try:
        return compile_snippet_code(code, f"<snippet {alias}>")
    except SyntaxError as exc:
        raise SyntaxError(f"in snippet {alias!r} line {exc.lineno}: {exc.msg}") from None


async def run_compiled(code: types.CodeType, namespace: dict[str, Any]) -> None:
    """Execute compiled step code in ``namespace``, awaiting it when it uses top-level ``await``."""
    result = eval(code, namespace)
    if code.co_flags & inspect.CO_COROUTINE:
        await result


# --- the names step code sees --------------------------------------------------------------------


class CredentialView:
    """``helpers.credentials[alias]``: ``.username`` and ``.secret``, or ``["username"]``."""

    __slots__ = ("alias", "secret", "username")

    def __init__(self, value: CredentialValue) -> None:
        self.alias = value.alias
        self.username = value.username
        self.secret = value.secret

    def __getitem__(self, key: str) -> str | None:
        if key not in ("username", "secret"):
            raise KeyError(key)
        return self.username if key == "username" else self.secret

    def __repr__(self) -> str:
        return f"CredentialView(alias={self.alias!r}, username={self.username!r}, secret={MASK})"


class UnknownCredential(KeyError):
    """An alias no credential of the scenario is linked under."""

    def __str__(self) -> str:  # KeyError quotes its argument; this message reads better bare
        return str(self.args[0])


class CredentialBook(Mapping[str, CredentialView]):
    """The scenario's linked credentials by alias."""

    def __init__(self, values: Iterable[CredentialValue]) -> None:
        self._views = {value.alias: CredentialView(value) for value in values}

    def __getitem__(self, alias: str) -> CredentialView:
        try:
            return self._views[alias]
        except KeyError:
            linked = ", ".join(repr(a) for a in self._views) or "none"
            near = did_you_mean(alias, self._views)
            raise UnknownCredential(
                f"no credential linked under alias {alias!r} (linked: {linked}){near}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)


class UnknownEnvironmentKey(KeyError):
    """``helpers.env[key]`` for a key the environment's data does not have."""

    def __str__(self) -> str:  # KeyError quotes its argument; this message reads better bare
        return str(self.args[0])


class EnvironmentData(dict[str, Any]):
    """``helpers.env``: the environment's data; a missing key names the nearest ones (``.get`` as usual)."""

    def __init__(self, name: str, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self._name = name

    def __missing__(self, key: Any) -> Any:
        near = did_you_mean(key, self) if isinstance(key, str) else ""
        raise UnknownEnvironmentKey(f"environment {self._name!r} has no key {key!r}{near}")


class StepHelpers:
    """``helpers`` in step code: the environment, credentials, and names plugins add."""

    def __init__(self, job: RunJob, extras: Mapping[str, Any] | None = None) -> None:
        self.env: dict[str, Any] = EnvironmentData(job.env_name or "environment", job.env_data)
        self.credentials = CredentialBook(job.credentials)
        self._env_name = job.env_name or "environment"
        for name, value in (extras or {}).items():
            # A plugin may add names, not replace the documented ones. Not ``hasattr``: for a name
            # ``helpers`` lacks it would build the "did you mean" of :meth:`__getattr__`'s error.
            if name not in vars(self) and not hasattr(type(self), name):
                setattr(self, name, value)

    def getEnvUrl(self, key: str | None = None) -> str:
        """``env[key]``, else ``env["url"]``, else ``env["baseUrl"]``; LookupError naming the keys tried."""
        return environment_url(self._env_name, self.env, key)

    get_env_url = getEnvUrl

    def __getattr__(self, name: str) -> Any:
        # only reached for a name ``helpers`` lacks: say which of its names is near
        known = [n for n in dir(self) if not n.startswith("_")]
        raise AttributeError(f"helpers has no attribute {name!r}{did_you_mean(name, known)}")


class SnippetLibrary:
    """Resolves snippet aliases: the run's stored snippets first, then plugin sources."""

    def __init__(self, stored: Mapping[str, str], sources: Sequence[SnippetSource] = ()) -> None:
        self._stored = stored
        self._sources = sources
        self._compiled: dict[str, types.CodeType] = {}
        self._code: dict[str, str] = {}

    def code(self, alias: str) -> types.CodeType:
        """The compiled snippet; LookupError for an alias nobody knows (naming the nearest known ones)."""
        if alias not in self._compiled:
            source = self._stored.get(alias)
            if source is None:
                source = next((code for s in self._sources if (code := s.get(alias)) is not None), None)
            if source is None:
                raise LookupError(f"unknown snippet {alias!r}{did_you_mean(alias, self._stored)}")
            self._compiled[alias] = compile_snippet(alias, source)
            self._code[alias] = source
        return self._compiled[alias]

    def source(self, alias: str) -> str | None:
        """The code of a snippet this run has used, as written."""
        return self._code.get(alias)


class StepNamespace:
    """The globals step code and snippets run with (docs/step-code.md, "Names available to step code")."""

    def __init__(
        self,
        *,
        page: Any,
        context: Any,
        browser: Any,
        helpers: StepHelpers,
        snippets: SnippetLibrary,
        log_sink: LogSink,
    ) -> None:
        self._log_sink = log_sink
        self._snippets = snippets
        self._base: dict[str, Any] = {
            "__builtins__": builtins,
            "page": page,
            "context": context,
            "browser": browser,
            "expect": expect,
            "helpers": helpers,
            "runSnippet": self.run_snippet,
            "run_snippet": self.run_snippet,
            "log": self.log,
            "print": self.print,
        }
        #: the namespace every step of the run shares
        self.globals: dict[str, Any] = {"__name__": "__step__", **self._base}

    def log(self, message: object, level: str = "info") -> None:
        """Write a line to the run log at ``level`` (debug, info, warning or error)."""
        if level not in LOG_LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
        self._log_sink(level, str(message))

    def print(self, *values: object, sep: str | None = " ", end: str | None = "\n", **kwargs: Any) -> None:
        """``print`` that writes to the run log; printing to another file than stdout/stderr still works."""
        file = kwargs.get("file")
        if file is not None and file not in (sys.stdout, sys.stderr):
            builtins.print(*values, sep=sep, end=end, **kwargs)
            return
        text = (" " if sep is None else sep).join(str(v) for v in values)
        self._log_sink("info", text + ("" if end in (None, "\n") else end))

    def source_of(self, filename: str) -> str | None:
        """The code of a snippet file (``<snippet alias>``) this run has used."""
        if filename.startswith("<snippet ") and filename.endswith(">"):
            return self._snippets.source(filename[len("<snippet ") : -1])
        return None

    async def run_snippet(self, alias: str, args: Any = None) -> Any:
        """Run the snippet ``alias`` with ``args`` (a list) bound, and return what it returns."""
        code = self._snippets.code(alias)
        scope = dict(self._base)
        exec(code, scope)
        function: Callable[[list[Any]], Awaitable[Any]] = scope["__snippet__"]
        if args is None:
            bound: list[Any] = []
        elif isinstance(args, list | tuple):
            bound = list(args)
        else:
            bound = [args]
        return await function(bound)

    async def run(self, code: types.CodeType) -> None:
        """Execute one step's compiled code in the shared namespace."""
        try:
            await run_compiled(code, self.globals)
        except (SystemExit, KeyboardInterrupt) as exc:
            raise InterpreterExit(exc) from exc


class InterpreterExit(Exception):
    """Step code raised ``SystemExit`` or ``KeyboardInterrupt``: a step failure, not the worker's end."""

    def __init__(self, original: SystemExit | KeyboardInterrupt) -> None:
        super().__init__(str(original))
        self.original = original


# --- failures ------------------------------------------------------------------------------------


def describe_failure(exc: BaseException, step: StepJob) -> tuple[RunErrorKind, str]:
    """The kind and message a step's exception is recorded with.

    An ``AssertionError`` (which is what a failed ``expect`` raises) is kind ``assertion`` with its own
    message; anything else is kind ``error``, ``"ExceptionType: message (line N)"``.
    """
    if isinstance(exc, InterpreterExit):
        exc = exc.original
    step_line, snippet_where = _where(exc, step)
    where = f" (line {step_line}{snippet_where})" if step_line is not None else ""
    if isinstance(exc, AssertionError):
        message = str(exc).strip()
        if not message:
            source = _source_line(step.exec_code, step_line)
            message = f"assertion failed: {source}" if source else "assertion failed"
        return RunErrorKind.ASSERTION, _append_to_first_line(message, where)
    text = str(exc).strip()
    name = type(exc).__name__
    return RunErrorKind.ERROR, _append_to_first_line(f"{name}: {text}" if text else name, where)


def _append_to_first_line(message: str, where: str) -> str:
    """Playwright messages run on with a call log; the line number belongs with their first line."""
    first, newline, rest = message.partition("\n")
    return first + where + newline + rest


def _where(exc: BaseException, step: StepJob) -> tuple[int | None, str]:
    """The line in the step the exception passed through, and where in a snippet it started."""
    step_file = step_filename(step)
    step_line: int | None = None
    snippet = ""
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename == step_file:
            step_line, snippet = tb.tb_lineno, ""
        elif filename.startswith("<snippet ") and step_line is not None:
            snippet = f", in snippet {filename[9:-1]!r} line {tb.tb_lineno}"
        tb = tb.tb_next
    return step_line, snippet


def _source_line(code: str, lineno: int | None) -> str:
    lines = code.splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return ""
    return lines[lineno - 1].strip()
