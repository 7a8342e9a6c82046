"""Playwright's trace viewer at ``/trace/``, and the signed links that let it fetch a run's trace.

The viewer ships inside the installed ``playwright`` package (``driver/package/lib/vite/traceViewer``):
no CDN, no network. It is a page plus a service worker (``sw.bundle.js``, scope ``/trace/``) that
downloads the trace zip named by ``?trace=`` and answers the page's requests from it. The worker
fetches with no ``Authorization`` header, so with API tokens set the trace URL it is given carries a
signature instead (docs/reports.md, "Tokens"):

- ``/api/v1/run/{id}/artifacts/{name}?expires=E&sig=S``: ``S`` is an HMAC-SHA256 of the run id, the
  file name and ``E`` (a Unix time :data:`LINK_SECONDS` ahead), keyed by a key derived from the
  configured API tokens. It opens that one file of that one run until ``E``; any other path, a changed
  name or an expired link is refused (401) like a request without a token.
- Only an authorized answer hands out such a link (a run's detail, a report page), so a client that
  could not read the run cannot get one. Every server process sharing the tokens derives the same key;
  changing the tokens revokes every link.

Without tokens the API is open and the links carry no signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import re
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import attrs
from aiohttp import web

from scenariokit.domain.model import Run
from scenariokit.formats.presenters import artifact_url, trace_artifact
from scenariokit_server.views import API_PREFIX

TRACE_PREFIX = "/trace"
#: How long a signed artifact link opens its file.
LINK_SECONDS = 15 * 60
#: Where the viewer lives inside the ``playwright`` package, newest layout first.
VIEWER_FOLDERS = ("driver/package/lib/vite/traceViewer", "driver/package/lib/webpack/traceViewer")
#: Content types of the viewer's files (the platform's guesses differ for ``.webmanifest``, ``.ttf``).
VIEWER_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".ttf": "font/ttf",
    ".woff2": "font/woff2",
    ".png": "image/png",
    ".json": "application/json",
    ".webmanifest": "application/manifest+json",
    ".map": "application/json",
}
_ARTIFACT_PATH = re.compile(rf"^{re.escape(API_PREFIX)}/run/([^/]+)/artifacts/([^/]+)$")
_SIGNED_PARAMS = frozenset({"expires", "sig"})


def viewer_folder() -> Path | None:
    """The trace viewer's folder in the installed ``playwright`` package, or None when it has none."""
    spec = importlib.util.find_spec("playwright")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for folder in VIEWER_FOLDERS:
            candidate = Path(location) / folder
            if (candidate / "index.html").is_file() and (candidate / "sw.bundle.js").is_file():
                return candidate
    return None


@attrs.frozen
class ArtifactLinks:
    """The links of a run's files: plain without tokens, signed for the trace viewer with them."""

    #: the signing key; None when no tokens are set (links need no signature)
    key: bytes | None = None
    seconds: int = LINK_SECONDS

    @classmethod
    def for_tokens(cls, tokens: tuple[str, ...], *, seconds: int = LINK_SECONDS) -> ArtifactLinks:
        """Links signed with a key derived from ``tokens`` (none: unsigned links)."""
        if not tokens:
            return cls(None, seconds)
        material = "\n".join(sorted(tokens)).encode()
        return cls(hmac.new(material, b"scenariokit artifact links v1", hashlib.sha256).digest(), seconds)

    def _signature(self, run_id: str, name: str, expires: int) -> str:
        assert self.key is not None
        digest = hmac.new(self.key, f"{run_id}\n{name}\n{expires}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def url(self, run_id: uuid.UUID, name: str, *, now: float | None = None) -> str:
        """A link to one file of a run that opens without a token until it expires (tokens set)."""
        path = artifact_url(run_id, name)
        if self.key is None:
            return path
        expires = int(now if now is not None else time.time()) + self.seconds
        return f"{path}?expires={expires}&sig={self._signature(str(run_id), name, expires)}"

    def viewer_url(self, run: Run, *, now: float | None = None) -> str | None:
        """Where the trace viewer opens the run's trace, or None when the run recorded none."""
        name = trace_artifact(run)
        if name is None:
            return None
        return f"{TRACE_PREFIX}/index.html?trace={quote(self.url(run.id, name, now=now), safe='')}"

    def allows(self, request: web.Request, *, now: float | None = None) -> bool:
        """Whether ``request`` is a GET of the one artifact its unexpired signature names."""
        query = request.query
        if self.key is None or request.method != "GET" or len(query) != 2 or set(query) != _SIGNED_PARAMS:
            return False
        match = _ARTIFACT_PATH.match(request.path)
        raw_expires, given = query["expires"], query["sig"]
        if match is None or not (raw_expires.isascii() and raw_expires.isdigit()) or len(raw_expires) > 12:
            return False
        try:
            run_id = str(uuid.UUID(match.group(1)))
        except ValueError:
            return False
        expires = int(raw_expires)
        if expires < (now if now is not None else time.time()):
            return False
        expected = self._signature(run_id, match.group(2), expires)
        return hmac.compare_digest(given.encode(), expected.encode())


async def trace_viewer(request: web.Request) -> web.StreamResponse:
    """A file of the trace viewer (``/trace/`` is its ``index.html``)."""
    folder = request.app.get(VIEWER_FOLDER)
    if folder is None:
        raise web.HTTPNotFound(
            text="the trace viewer is not in the installed playwright package; open the trace with "
            "`playwright show-trace trace.zip`"
        )
    name = request.match_info.get("name") or "index.html"
    path = (folder / name).resolve()
    if not path.is_relative_to(folder) or not path.is_file():
        raise web.HTTPNotFound()
    headers = {
        "Content-Type": VIEWER_TYPES.get(path.suffix.lower(), "application/octet-stream"),
        "X-Content-Type-Options": "nosniff",
        # The page's URL carries a signed trace link: it is never sent on as a Referer.
        "Referrer-Policy": "no-referrer",
        # The page and its worker are revalidated so an upgraded playwright takes effect; the hashed
        # bundles may be cached.
        "Cache-Control": "no-cache"
        if path.suffix in (".html", ".webmanifest") or path.name == "sw.bundle.js"
        else "public, max-age=86400",
    }
    if path.name == "sw.bundle.js":
        headers["Service-Worker-Allowed"] = f"{TRACE_PREFIX}/"
    return web.FileResponse(path, headers=headers)


async def trace_root(request: web.Request) -> web.StreamResponse:
    """``/trace`` without its slash: the viewer's relative URLs need it."""
    raise web.HTTPPermanentRedirect(f"{TRACE_PREFIX}/")


#: the viewer's folder; absent when the installed playwright package has none
VIEWER_FOLDER = web.AppKey("trace_viewer_folder", Path)
LINKS = web.AppKey("artifact_links", ArtifactLinks)


def artifact_links(app: web.Application) -> ArtifactLinks:
    """The app's artifact links (see :class:`ArtifactLinks`)."""
    return app[LINKS]


def setup_trace_viewer(app: web.Application, links: ArtifactLinks) -> None:
    """Serve the viewer at ``/trace/``; ``links`` make the app's artifact links (the middleware's too)."""
    folder = viewer_folder()
    if folder is not None:
        app[VIEWER_FOLDER] = folder.resolve()
    app[LINKS] = links
    app.router.add_route("GET", TRACE_PREFIX, trace_root)
    app.router.add_route("GET", f"{TRACE_PREFIX}/{{name:.*}}", trace_viewer)


def trace_viewer_url(app: web.Application, run: Run) -> str | None:
    """Where this server's trace viewer opens ``run``'s trace; None without a trace or a viewer."""
    if app.get(VIEWER_FOLDER) is None or LINKS not in app:
        return None
    return app[LINKS].viewer_url(run)
