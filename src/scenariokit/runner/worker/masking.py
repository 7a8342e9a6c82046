"""Replacing a run's secrets by ``***`` in every form they commonly take in text (docs/security.md).

A secret leaks not only verbatim: a failed ``page.goto(url + "?pw=" + secret)`` shows it URL-encoded,
``json.dumps`` escapes its quotes, ``repr`` its backslashes, an ``Authorization: Basic`` header holds
it in base64 at any of three alignments, and ``print(s[:5]); print(s[5:])`` splits it over two log
lines. :func:`secret_forms` lists the literal forms (any percent-encoding is one pattern besides),
:func:`mask_text` masks one text, and :class:`LogMasker`
masks a run's log as one stream: it holds each line until the next one arrives, so a secret split
across two consecutive lines (joined directly or by the line break) is masked on both.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, quote_plus

import attrs

from scenariokit.domain.job import LogEvent

MASK = "***"
#: base64 fragments shorter than this are not masked (they would match ordinary text)
MIN_BASE64_CORE = 4

Span = tuple[int, int]


def _base64_forms(secret: bytes) -> list[str]:
    """The base64 of ``secret`` on its own, and the characters fixed by it at each of the three alignments."""
    forms = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.append(encode(secret).decode())
        for offset in range(3):
            encoded = encode(b"\0" * offset + secret).decode()
            start = -(-offset * 8 // 6)  # the first character made of the secret's bits only
            end = (offset + len(secret)) * 8 // 6
            core = encoded[start:end]
            if len(core) >= MIN_BASE64_CORE:
                forms.append(core)
    return forms


@lru_cache(maxsize=256)
def _forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    found: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        found |= {
            secret,
            quote(secret),
            quote(secret, safe=""),
            quote_plus(secret),
            quote_plus(secret, safe="/"),
            json.dumps(secret)[1:-1],
            json.dumps(secret, ensure_ascii=False)[1:-1],
            repr(secret)[1:-1],
            ascii(secret)[1:-1],
            *_base64_forms(secret.encode()),
        }
    return tuple(sorted((form for form in found if form), key=len, reverse=True))


def secret_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """Every literal form of every non-empty secret that is masked, longest first.

    Percent-encoded forms are matched by a pattern besides (:func:`_percent_pattern`).
    """
    return _forms(_key(secrets))


def _hex(byte: int) -> str:
    return "%" + "".join(f"[{c}{c.lower()}]" if c.isalpha() else c for c in f"{byte:02X}")


@lru_cache(maxsize=256)
def _percent_pattern(secret: str) -> re.Pattern[str]:
    """The secret with any of its characters percent-encoded (either case), a space also as ``+``.

    Encoders disagree on what to escape (``quote`` escapes ``!``, a browser's URL serializer keeps it),
    so every mix is one pattern rather than a list of encoders.
    """
    parts = []
    for char in secret:
        choices = [re.escape(char), "".join(_hex(b) for b in char.encode())]
        if char == " ":
            choices.append(r"\+")
        parts.append("(?:" + "|".join(choices) + ")")
    return re.compile("".join(parts))


def _key(secrets: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({s for s in secrets if s}))


def _spans(text: str, secrets: tuple[str, ...]) -> list[Span]:
    """Where any form of any of the (normalized) ``secrets`` occurs in ``text``."""
    spans = []
    for secret in secrets:
        spans += [match.span() for match in _percent_pattern(secret).finditer(text)]
    for form in _forms(secrets):
        start = text.find(form)
        while start != -1:
            spans.append((start, start + len(form)))
            start = text.find(form, start + 1)
    return spans


def _apply(text: str, spans: Iterable[Span]) -> str:
    """``text`` with every (merged) span replaced by one ``***``."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, last = [], 0
    for start, end in merged:
        out.append(text[last:start])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def mask_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every form of each secret replaced by ``***``."""
    key = _key(secrets)
    if not key:
        return text
    return _apply(text, _spans(text, key))


@attrs.define
class LogMasker:
    """Masks a run's log lines as one stream; every line is held until the next one (or :meth:`flush`).

    "Split across two lines" means: the end of one log line and the start of the next, joined
    directly (``print(s[:5]); print(s[5:])``) or by a line break (a secret holding a newline,
    printed), contain a form of a secret. Both parts are masked. A secret spread over three or
    more lines is masked only where two neighbouring lines show it.
    """

    secrets: tuple[str, ...]
    _held: LogEvent | None = None
    _held_spans: list[Span] = attrs.field(factory=list)

    def push(self, event: LogEvent) -> list[LogEvent]:
        """Take a line; returns the lines ready to be written (masked)."""
        key = _key(self.secrets)
        if not key:
            return [event]
        if self._held is None:
            self._held, self._held_spans = event, []
            return []
        before, after = self._held.message, event.message
        before_spans, after_spans = list(self._held_spans), []
        for separator in ("", "\n"):
            offset = len(before) + len(separator)
            for start, end in _spans(before + separator + after, key):
                if start < len(before) and end > offset:
                    before_spans.append((start, len(before)))
                    after_spans.append((0, end - offset))
        ready = self._masked(self._held, before_spans, key)
        self._held, self._held_spans = event, after_spans
        return [ready]

    def flush(self) -> list[LogEvent]:
        """The held line, masked (at the end of the run)."""
        if self._held is None:
            return []
        held, self._held = self._held, None
        return [self._masked(held, self._held_spans, _key(self.secrets))]

    @staticmethod
    def _masked(event: LogEvent, spans: list[Span], key: tuple[str, ...]) -> LogEvent:
        message = event.message
        return attrs.evolve(event, message=_apply(message, [*spans, *_spans(message, key)]))
