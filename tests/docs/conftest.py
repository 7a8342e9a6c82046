"""Fixtures for the documentation tests: the page the examples check, served on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from served_pages import serve_pages

EXAMPLE_PAGE = b"<!doctype html><title>Example Domain</title><h1>Example Domain</h1>"


@pytest.fixture(scope="module")
def example_site() -> Iterator[str]:
    """A stand-in for https://example.com on a free port of 127.0.0.1 (the examples read SITE_URL)."""
    with serve_pages({"/": EXAMPLE_PAGE}) as base:
        yield f"{base}/"
