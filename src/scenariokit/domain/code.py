"""User code: how step and snippet code compile, stated once for the input checks and the runner.

Step code is Python with top-level ``await``. Snippet code is the body of ``async def __snippet__(args)``,
compiled from the snippet's own syntax tree so that line numbers are the snippet's own. Code that does
not compile is refused when it is written (400 naming the field and line), and the runner compiles it
again before a browser starts, for code stored by other means.
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import types
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from scenariokit.domain.model import FieldError, camel


def compile_step_code(code: str, filename: str) -> types.CodeType:
    """Step code compiled with top-level ``await`` allowed. Raises ``SyntaxError`` or ``ValueError``."""
    compiled: types.CodeType = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return compiled  # typeshed answers Any for compile() with flags


def compile_snippet_code(code: str, filename: str) -> types.CodeType:
    """Snippet code compiled as the body of ``async def __snippet__(args)``, keeping its line numbers.

    Raises ``SyntaxError`` (``return`` and ``await`` are allowed anywhere a function body allows them)
    or ``ValueError``.
    """
    body = ast.parse(code, filename).body
    module = ast.parse("async def __snippet__(args):\n    pass\n", filename)
    function = module.body[0]
    assert isinstance(function, ast.AsyncFunctionDef)
    if body:
        function.body = body
    return compile(module, filename, "exec")


def syntax_problem(exc: SyntaxError | ValueError) -> str:
    """How a compile failure reads: the message and, when known, the line."""
    if isinstance(exc, SyntaxError):
        return f"{exc.msg} (line {exc.lineno})" if exc.lineno else str(exc.msg)
    return str(exc)  # e.g. source code with a NUL byte


#: Code this long or shorter has its checks remembered by its text (the last :data:`REMEMBERED_CODES`
#: texts): a dashboard's save sends every step again, most of them unchanged, and many scenarios share
#: their steps' code. Longer code is checked each time, so what is remembered stays under 4 MiB.
REMEMBERED_CODE_CHARS = 4096
REMEMBERED_CODES = 1024

R = TypeVar("R")


def remembered_by_text(check: Callable[[str], R]) -> Callable[[str], R]:
    """``check`` of a code text, its answer remembered for short texts (the answer must be immutable)."""
    cached = functools.lru_cache(maxsize=REMEMBERED_CODES)(check)

    @functools.wraps(check)
    def by_text(code: str) -> R:
        return cached(code) if len(code) <= REMEMBERED_CODE_CHARS else check(code)

    by_text.cache_info = cached.cache_info  # type: ignore[attr-defined]
    return by_text


def _compiles(compile_code: Callable[[str, str], types.CodeType]) -> Any:
    @remembered_by_text
    def problem(code: str) -> str | None:
        try:
            compile_code(code, "<code>")  # the file name is in no message (syntax_problem)
        except (SyntaxError, ValueError) as exc:
            return syntax_problem(exc)
        return None

    def validate(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        if not isinstance(value, str):
            return  # the type is checked when the input is structured
        found = problem(value)
        if found is not None:
            raise FieldError(camel(attribute.name), f"is not valid Python: {found}")

    return validate


#: attrs validator: the value compiles as step code.
valid_step_code = _compiles(compile_step_code)

#: attrs validator: the value compiles as snippet code.
valid_snippet_code = _compiles(compile_snippet_code)


# --- mistakes found before a run (docs/step-code.md, "Common mistakes") -----------------------------

#: The names step code reaches Playwright through: a call on a chain rooted at one is Playwright's.
PLAYWRIGHT_ROOTS = frozenset({"page", "context", "browser", "expect"})
#: Calls that make a locator or a frame: a chain through one is Playwright's, whatever its root.
LOCATOR_MAKERS = frozenset({"locator", "frame_locator", "content_frame", "nth", "first", "last", "filter"})
#: The step API's own coroutines (``await runSnippet("login", [user])``).
STEP_COROUTINES = frozenset({"runSnippet", "run_snippet"})
#: The longest call text a message quotes whole.
CALL_TEXT_CHARS = 80

NOTHING_TO_RUN_NO_STEPS = "nothing to run: the scenario has no steps"
NOTHING_TO_RUN_NO_STATEMENTS = "nothing to run: the scenario has no statements"


def _public_classes() -> list[type]:
    import playwright.async_api as api  # heavy: imported when a check first needs it

    return [
        value
        for name, value in vars(api).items()
        if isinstance(value, type) and not name.startswith("_") and not name.endswith("Impl")
    ]


@functools.cache
def playwright_coroutines() -> tuple[frozenset[str], frozenset[str]]:
    """The method names of Playwright's async API that are coroutines, read from the installed classes.

    Two sets: names that are a coroutine wherever they appear, and names that are also something
    else (a synchronous method of another Playwright class, or a method of ``list``, ``dict``, ``str``
    or a file, such as ``count`` or ``close``): a call of one of those is Playwright's only on a chain
    rooted at ``page``, ``context``, ``browser`` or ``expect``.
    """
    coroutines: set[str] = set()
    other: set[str] = set()
    for cls in _public_classes():
        for name, value in vars(cls).items():
            if name.startswith("_"):
                continue
            (coroutines if inspect.iscoroutinefunction(value) else other).add(name)
    for builtin in (list, dict, set, str, bytes, tuple, io.TextIOWrapper, io.BufferedReader):
        other.update(dir(builtin))
    return frozenset(coroutines - other), frozenset(coroutines & other)


def _playwright_chain(node: ast.expr) -> bool:
    """Whether ``node`` (a call's receiver) is reached from a Playwright name or through a locator."""
    while True:
        if isinstance(node, ast.Attribute):
            if node.attr in LOCATOR_MAKERS or node.attr.startswith("get_by_"):
                return True
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id in PLAYWRIGHT_ROOTS
        else:
            return False


def known_coroutine_call(call: ast.Call) -> bool:
    """Whether ``call`` calls a coroutine of Playwright's async API or of the step API."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in STEP_COROUTINES
    if not isinstance(func, ast.Attribute):
        return False
    certain, ambiguous = playwright_coroutines()
    if func.attr in certain:
        return True
    return func.attr in ambiguous and _playwright_chain(func.value)


def call_text(code: str, call: ast.Call) -> str:
    """The call as written, on one line, cut to :data:`CALL_TEXT_CHARS` (arguments first)."""
    text = " ".join((ast.get_source_segment(code, call) or "").split())
    if len(text) <= CALL_TEXT_CHARS and text:
        return text
    func = " ".join((ast.get_source_segment(code, call.func) or "").split()) or ast.unparse(call.func)
    if len(func) > CALL_TEXT_CHARS - 3:
        func = "…" + func[-(CALL_TEXT_CHARS - 4) :]
    return f"{func}(…)"


def unawaited_message(line: int, call: str, *, ran: bool) -> str:
    """How a coroutine call without ``await`` reads: found by a run (``ran``) or when the code was saved."""
    verb = "was never awaited" if ran else "is not awaited"
    return f"line {line}: {call} {verb}; add await"


@attrs.frozen
class UnawaitedCall:
    """A statement that calls a known coroutine and drops it: the call never runs."""

    line: int
    call: str

    @property
    def message(self) -> str:
        """How the save answer's warning reads."""
        return unawaited_message(self.line, self.call, ran=False)


def unawaited_calls(code: str) -> list[UnawaitedCall]:
    """The statements of ``code`` that call a known coroutine without ``await``, by line.

    Only a call that is a statement of its own is one: its coroutine is dropped at once, so it can
    never run. A coroutine kept in a name, passed to ``asyncio.gather`` or to a task is not reported;
    the run still fails a step that never awaits one (docs/step-code.md, "Common mistakes").
    """
    return list(_unawaited_calls(code))


@remembered_by_text
def _unawaited_calls(code: str) -> tuple[UnawaitedCall, ...]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return ()
    found = [
        UnawaitedCall(node.value.lineno, call_text(code, node.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and known_coroutine_call(node.value)
    ]
    return tuple(sorted(found, key=lambda item: item.line))


def call_at(code: str, line: int, name: str) -> str | None:
    """The text of the call of ``name`` on ``line`` of ``code`` (the innermost such call), if there is one."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]

    def named(node: ast.Call) -> bool:
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return called == name or (name == "run_snippet" and called in STEP_COROUTINES)

    matching = [node for node in calls if named(node)] or [n for n in calls if n.lineno == line]
    if not matching:
        return None
    innermost = min(matching, key=lambda node: ((node.end_lineno or 0) - node.lineno, -node.col_offset))
    return call_text(code, innermost)


def has_statements(code: str) -> bool:
    """Whether ``code`` holds a statement (not only comments and blank lines); code that does not
    parse counts as having some (the syntax check reports it)."""
    try:
        return bool(ast.parse(code).body)
    except (SyntaxError, ValueError):
        return True


def nothing_to_run(codes: Sequence[str]) -> str | None:
    """Why a scenario whose steps hold ``codes`` has nothing to run, or None when it has something."""
    if not codes:
        return NOTHING_TO_RUN_NO_STEPS
    if not any(has_statements(code) for code in codes):
        return NOTHING_TO_RUN_NO_STATEMENTS
    return None


@attrs.frozen
class StepCodeWarning:
    """A mistake in a saved step's code, answered with the save and never refused (docs/step-code.md)."""

    step_id: uuid.UUID | None = attrs.field(metadata={"description": "the step, once it has an id"})
    order: int = attrs.field(metadata={"description": "the step's position, from 1"})
    line: int = attrs.field(metadata={"description": "the line in the step's code"})
    message: str = attrs.field(
        metadata={"description": "what is wrong, e.g. `line 2: page.goto(url) is not awaited; add await`"}
    )
    scenario_id: uuid.UUID | None = attrs.field(
        default=None, metadata={"description": "the scenario of the step"}
    )

    def to_json(self) -> dict[str, Any]:
        """The warning as answers carry it: ``{scenarioId, stepId, order, line, message}``."""
        return {
            "scenarioId": str(self.scenario_id) if self.scenario_id is not None else None,
            "stepId": str(self.step_id) if self.step_id is not None else None,
            "order": self.order,
            "line": self.line,
            "message": self.message,
        }


def step_warnings(steps: Sequence[Any], *, scenario_id: uuid.UUID | None = None) -> list[StepCodeWarning]:
    """The warnings of ``steps`` (anything with ``exec_code``, ``order`` and ``id``), in step order."""
    return [
        StepCodeWarning(
            step_id=getattr(step, "id", None),
            order=step.order,
            line=found.line,
            message=found.message,
            scenario_id=scenario_id,
        )
        for step in sorted(steps, key=lambda s: s.order)
        for found in unawaited_calls(step.exec_code)
    ]


# --- which snippets code runs (the job a run's worker gets) ------------------------------------------

#: Builtins through which code reaches a name by a string (the step namespace's ``runSnippet``
#: included) or runs code no reading can see; code naming one may call any snippet.
NAMESPACE_DOORS = frozenset(
    {"globals", "locals", "vars", "eval", "exec", "compile", "getattr", "__import__", "__builtins__"}
)
#: Attributes through which code reaches a frame's or a function's globals.
FRAME_ATTRIBUTES = frozenset(
    {"f_globals", "f_locals", "f_back", "gi_frame", "cr_frame", "ag_frame", "tb_frame"}
)


@remembered_by_text
def snippets_called(code: str) -> frozenset[str] | None:
    """The aliases ``code`` (step or snippet code) runs with ``runSnippet``, or None when it may run others.

    A call ``runSnippet("login", ...)`` (or ``run_snippet``, the alias also given as ``alias=``) names
    its snippet. Code that passes an alias it computes, keeps ``runSnippet`` in another name, imports,
    reaches a name by a string (``globals()``, ``getattr``, ``eval``) or goes through an attribute
    starting with ``_`` or a frame's could run any snippet: None, and its run is given every one.
    Code that does not parse: None too (its run fails on the syntax, whatever it is given).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    named: set[str] = set()
    calls: set[int] = set()  # the runSnippet names that are the callee of a call naming its alias
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in STEP_COROUTINES:
            alias = _literal_alias(node)
            if alias is None:
                return None
            named.add(alias)
            calls.add(id(node.func))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            return None
        if isinstance(node, ast.Name) and (
            node.id in NAMESPACE_DOORS or (node.id in STEP_COROUTINES and id(node) not in calls)
        ):
            return None
        if isinstance(node, ast.Attribute) and (
            node.attr.startswith("_") or node.attr in FRAME_ATTRIBUTES or node.attr in STEP_COROUTINES
        ):
            return None
    return frozenset(named)


def _literal_alias(call: ast.Call) -> str | None:
    """The alias a ``runSnippet`` call names as a string literal, or None."""
    given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "alias"), None)
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    return None
