"""The JSON scenariokit accepts and keeps: one rule for every body, tool argument and stored value.

A value is kept only when every later read can render it again (docs/rest.md, "JSON bodies"): nesting
at most :data:`MAX_DEPTH` deep, finite numbers, whole numbers that fit 64 bits. Decoding checks the
nesting before the parser recurses, so no input, however deep, can raise ``RecursionError``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from scenariokit.domain.errors import ValidationError

#: The deepest nesting of objects and arrays a body or a stored value may have.
MAX_DEPTH = 64
#: Whole numbers a 64-bit integer holds; larger ones are refused (no reader could rely on them).
MAX_INT = 2**63 - 1
MIN_INT = -(2**63)

_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}

TOO_DEEP = f"nests objects and arrays more than {MAX_DEPTH} deep"
NOT_FINITE = "must be a finite number (no NaN or Infinity)"
TOO_BIG = f"whole numbers must be from {MIN_INT} to {MAX_INT}"
FLOAT_TOO_BIG = "numbers must fit a 64-bit float"


class _Refused(ValueError):
    """A number or constant the decoder will not produce."""


def nesting_depth(text: str) -> int:
    """How deep ``text``'s brackets nest, strings left out: a bound, computed without recursion."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(itertools.accumulate(_STEP[char] for char in brackets), default=0)


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not allowed: {NOT_FINITE}")


def _whole(text: str) -> int:
    if len(text.lstrip("-")) > 19:  # checked before int() so no huge number is ever built
        raise _Refused(f"{text[:24]}… is too large: {TOO_BIG}")
    value = int(text)
    if not MIN_INT <= value <= MAX_INT:
        raise _Refused(f"{text} is too large: {TOO_BIG}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{text[:24]} is too large: {FLOAT_TOO_BIG}")
    return value


def decode_json(raw: bytes | str, *, what: str = "the request body") -> Any:
    """``raw`` decoded as JSON under the rule above; :class:`ValidationError` (``$``) naming what is wrong."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{what} is not valid JSON", {"$": f"not UTF-8: {exc}"}) from None
    if nesting_depth(text) > MAX_DEPTH:
        raise ValidationError(f"{what} is nested too deep", {"$": TOO_DEEP})
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_whole, parse_float=_fraction)
    except _Refused as exc:
        raise ValidationError(f"{what} holds a number no store keeps", {"$": str(exc)}) from None
    except ValueError as exc:
        raise ValidationError(f"{what} is not valid JSON", {"$": str(exc)}) from None


def json_fault(value: Any, path: str = "") -> tuple[str, str] | None:
    """The path and reason of the first part of ``value`` the rule refuses, else None.

    Walks without recursion, so a value nested far deeper than the limit is judged as cheaply.
    """
    pending: list[tuple[Any, str, int]] = [(value, path, 0)]
    while pending:
        item, where, depth = pending.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if not MIN_INT <= item <= MAX_INT:
                return where or "$", TOO_BIG
        elif isinstance(item, float):
            if not math.isfinite(item):
                return where or "$", NOT_FINITE
        elif isinstance(item, Mapping | list | tuple):
            if depth + 1 > MAX_DEPTH:
                return where or "$", TOO_DEEP
            if isinstance(item, Mapping):
                children = [(child, f"{where}.{key}" if where else str(key)) for key, child in item.items()]
            else:
                children = [(child, f"{where}[{index}]") for index, child in enumerate(item)]
            pending.extend((child, inner, depth + 1) for child, inner in reversed(children))
    return None


def check_json(value: Any, *, what: str) -> None:
    """Raise :class:`ValidationError` naming the path when ``value`` breaks the rule."""
    fault = json_fault(value)
    if fault is not None:
        where, why = fault
        raise ValidationError(f"invalid {what}", {where: why})
