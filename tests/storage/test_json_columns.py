"""How a JSON column's text is written and read back (``rows.write_json``, ``rows.read_json``).

Both are made once (``json.loads`` and ``json.dumps`` with an argument of their own made a decoder or an
encoder for every document) and must read and write exactly as those calls did: a whole number past 64
bits, or a large float PostgreSQL wrote as its digits, reads back as a float.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from scenariokit.storage.sqlalchemy import rows


#: what the reading was before its decoder was made once: the rule every document is held to
def careful_decode(text: str) -> Any:
    return json.loads(text, parse_int=rows._stored_whole)


DOCUMENTS = [
    "{}",
    "[]",
    "null",
    '{"ms": 12, "steps": [1, 2, 3], "at": "2026-11-27T13:05:01.123456Z", "ok": true}',
    '{"max": 9223372036854775807, "min": -9223372036854775808}',  # 19 digits: careful, still whole
    '{"past": 9223372036854775808, "under": -9223372036854775809}',  # past 64 bits: floats
    # PostgreSQL's jsonb writes 1e300 as its 301 digits: a float, as it was written
    '{"big": 1' + "0" * 300 + "}",
    '{"eighteen": 999999999999999999, "neg": -999999999999999999}',  # plain: fits 64 bits either way
    '{"fraction": 0.12345678901234567890123}',  # a long run of digits in a float's fraction
    "{\"code\": \"await page.fill('#card', '4111111111111111111111')\"}",  # long digits in a string
    '{"tiny": 5e-324, "huge": 1.7976931348623157e+308, "negzero": -0.0}',
    '{"ünïcode": "☃ 😀", "esc": "\\u2028\\u0000"}',
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_every_document_reads_as_json_loads_with_the_stored_whole_numbers_read_it(text: str) -> None:
    read = rows.read_json(text)
    expected = careful_decode(text)
    assert read == expected
    assert _types(read) == _types(expected)  # 1 and 1.0 are equal: the kinds of numbers must be too
    assert rows.read_json(text.encode()) == expected  # as bytes, as json.loads took them


def test_whole_numbers_past_64_bits_and_postgresql_s_digits_read_as_floats() -> None:
    assert rows.read_json('{"n": 9223372036854775807}') == {"n": 2**63 - 1}
    assert isinstance(rows.read_json("[9223372036854775808]")[0], float)
    assert rows.read_json("[1" + "0" * 300 + "]") == [1e300]


def test_a_document_is_written_strictly_and_reads_back() -> None:
    document: dict[str, Any] = {"ms": 12, "ratio": 0.5, "name": "ü", "none": None, "max": 2**63 - 1}
    assert rows.write_json(document) == json.dumps(document, allow_nan=False)
    assert rows.read_json(rows.write_json(document)) == document
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="not JSON compliant"):
            rows.write_json({"x": value})


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value).__name__
