"""Rendering report pages with Jinja2: autoescaped templates shipped in this package, nothing concatenated.

Every value reaches the HTML through a template with autoescape on, so a scenario named
``<script>alert(1)</script>`` is text on the page. A page links one stylesheet and one script
(:func:`asset_files`): the service serves them at ``/report/assets/``, a local report copies them into
``DIR/assets/``; ``assets`` is where the page finds them.
"""

from __future__ import annotations

import functools
from importlib import resources

import jinja2

from scenariokit.reports.model import RUN_STATUSES, IndexPage, RunPage

#: The files every page loads, by name; shipped in ``scenariokit/reports/static``.
ASSET_NAMES = ("report.css", "report.js")


@functools.cache
def environment() -> jinja2.Environment:
    """The Jinja2 environment of the report templates (autoescape on, an unknown name is an error)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("scenariokit.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_run(page: RunPage, *, assets: str) -> str:
    """The HTML page of one run."""
    return environment().get_template("run.html").render(page=page, assets=assets)


def render_index(page: IndexPage, *, assets: str) -> str:
    """The HTML index of runs."""
    return environment().get_template("index.html").render(page=page, assets=assets, statuses=RUN_STATUSES)


def render_message(title: str, message: str, *, assets: str, index_url: str | None = None) -> str:
    """A page that says what went wrong (bad id, no such run), with a link back to the index."""
    return (
        environment()
        .get_template("message.html")
        .render(title=title, message=message, assets=assets, index_url=index_url)
    )


def render_token_page(*, assets: str) -> str:
    """The page a served report answers without a token: a form, and no data (docs/reports.md)."""
    return environment().get_template("token.html").render(assets=assets)


def asset_files() -> dict[str, bytes]:
    """The stylesheet and script every page loads, by file name."""
    folder = resources.files("scenariokit.reports") / "static"
    return {name: (folder / name).read_bytes() for name in ASSET_NAMES}
