"""Masking a run's secrets in every form they take in text, also across two log lines."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

import pytest

from scenariokit.domain.job import LogEvent
from scenariokit.domain.model import utcnow
from scenariokit.runner.worker.masking import LogMasker, mask_text

SECRET = 'Hunter2 Sup3r"S3cret!'


@pytest.mark.parametrize(
    "shown",
    [
        SECRET,
        quote(SECRET),
        quote(SECRET, safe=""),
        quote_plus(SECRET),
        "Hunter2%20Sup3r%22S3cret!",  # a browser's URL keeps "!" that quote escapes
        json.dumps(SECRET)[1:-1],
        repr(SECRET)[1:-1],
        base64.b64encode(SECRET.encode()).decode(),
        base64.urlsafe_b64encode(SECRET.encode()).decode(),
    ],
)
def test_each_form_of_a_secret_is_masked(shown: str) -> None:
    assert mask_text(f"before {shown} after", [SECRET]) == "before *** after"


@pytest.mark.parametrize("prefix", [b"alice:", b"al:", b"a:"])
def test_a_secret_inside_longer_base64_is_masked_at_every_alignment(prefix: bytes) -> None:
    header = base64.b64encode(prefix + SECRET.encode()).decode()

    masked = mask_text(f"Authorization: Basic {header}", [SECRET])

    assert "***" in masked
    core = base64.b64encode(SECRET.encode()).decode()[2:-4]
    assert not any(core[i : i + 8] in masked for i in range(len(core) - 8))


def test_percent_encoding_in_lower_case_hex_is_masked() -> None:
    assert mask_text("p=a%2fb%2Fc", ["a/b/c"]) == "p=***"


def test_text_without_secrets_is_left_alone() -> None:
    assert mask_text("nothing to hide", []) == "nothing to hide"
    assert mask_text("nothing to hide", ["absent"]) == "nothing to hide"


def _lines(masker: LogMasker, *messages: str) -> list[str]:
    out: list[LogEvent] = []
    for message in messages:
        out += masker.push(LogEvent(at=utcnow(), level="info", message=message))
    out += masker.flush()
    return [event.message for event in out]


def test_a_secret_split_across_two_lines_is_masked_on_both() -> None:
    assert _lines(LogMasker((SECRET,)), "first", "pw Hunter2 Su", 'p3r"S3cret! done', "last") == [
        "first",
        "pw ***",
        "*** done",
        "last",
    ]


def test_a_secret_with_a_line_break_printed_on_two_lines_is_masked() -> None:
    secret = "top\nsecret-value"
    assert _lines(LogMasker((secret,)), "x top", "secret-value y") == ["x ***", "*** y"]


def test_lines_pass_at_once_when_the_run_has_no_secrets() -> None:
    masker = LogMasker(())
    assert [e.message for e in masker.push(LogEvent(at=utcnow(), level="info", message="now"))] == ["now"]
