"""User code: how step and snippet code compile, stated once for the input checks and the runner.

Step code is Python with top-level ``await``. Snippet code is the body of ``async def __snippet__(args)``,
compiled from the snippet's own syntax tree so that line numbers are the snippet's own. Code that does
not compile is refused when it is written (400 naming the field and line), and the runner compiles it
again before a browser starts, for code stored by other means.
"""

from __future__ import annotations

import ast
import types
from typing import Any

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


def _compiles(compile_code: Any) -> Any:
    def validate(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        if not isinstance(value, str):
            return  # the type is checked when the input is structured
        try:
            compile_code(value, f"<{camel(attribute.name)}>")
        except (SyntaxError, ValueError) as exc:
            raise FieldError(camel(attribute.name), f"is not valid Python: {syntax_problem(exc)}") from None

    return validate


#: attrs validator: the value compiles as step code.
valid_step_code = _compiles(compile_step_code)

#: attrs validator: the value compiles as snippet code.
valid_snippet_code = _compiles(compile_snippet_code)
