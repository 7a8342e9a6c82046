"""The HTTP trust boundary (docs/deployment.md, "The trust boundary"): which requests reach a handler.

The service executes code, so a request it should not have taken is remote code execution. One rule
serves ``/api/v1`` and ``/mcp`` alike (and the pages that show runs, ``/report`` and ``/trace``), with
or without tokens, before authentication and before any handler reads a byte of the body:

- every request names the server in ``Host`` (421 otherwise): DNS rebinding cannot read or write;
- an unsafe request (POST, PUT, PATCH, DELETE) with an ``Origin`` comes from an allowed CORS origin or
  from the server's own pages (403 otherwise);
- an unsafe request with a body declares JSON (YAML on imports) as its ``Content-Type`` (415
  otherwise), which a browser cannot send cross-site without a CORS preflight;
- a URL longer than :data:`MAX_URL_BYTES` gives 414 (everywhere).

Every refusal is a problem document and happens before anything changes.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import attrs
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from scenariokit_server.errors import problem
from scenariokit_server.settings import Settings, SettingsError
from scenariokit_server.views import API_PREFIX

#: Paths the Host, Origin and Content-Type rules guard (the report pages, the trace viewer and the
#: metrics' scenario names read stored data too: a DNS-rebinding page must not read them either).
GUARDED_PREFIXES = (API_PREFIX, "/mcp", "/metrics", "/report", "/trace")
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
#: The longest URL (path and query) answered; longer ones get 414.
MAX_URL_BYTES = 8 * 1024
#: What the HTTP parser reads of a request line, so URLs over :data:`MAX_URL_BYTES` reach the 414 rule.
MAX_REQUEST_LINE_BYTES = 64 * 1024
#: Bind addresses that listen on every interface.
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
#: Origins of a page served from this machine, any port (the default CORS rule of a loopback bind).
LOOPBACK_ORIGIN = re.compile(r"https?://(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?")

F = TypeVar("F", bound=Callable[..., Any])


def server_options() -> dict[str, Any]:
    """Keyword arguments for ``web.AppRunner``/``TestServer``: a request line long enough for the 414 rule."""
    return {"max_line_size": MAX_REQUEST_LINE_BYTES}


def accepts_yaml(view: F) -> F:
    """Mark a view whose body is YAML: its ``Content-Type`` is one of :data:`YAML_TYPES`."""
    view.__scenariokit_body_types__ = YAML_TYPES  # type: ignore[attr-defined]
    return view


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """``value`` (a Host header or a configured name) without its port, lower-case, IPv6 in brackets."""
    value = value.strip().lower().rstrip(".")
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    if value.count(":") > 1:  # a bare IPv6 address, as a setting may spell it
        return f"[{value}]"
    name, _, port = value.partition(":")
    return name.rstrip(".") if port.isdigit() or not port else value


@attrs.frozen
class HostRule:
    """The names a request's ``Host`` may carry; ``names`` None accepts any (see :func:`host_rule`)."""

    names: frozenset[str] | None

    def allows(self, header: str | None) -> bool:
        """Whether a ``Host`` header names this server."""
        if self.names is None:
            return True
        return bool(header) and host_name(header or "") in self.names


def host_rule(settings: Settings) -> HostRule:
    """The Host names a server with these settings answers.

    A loopback bind: ``localhost``, ``127.0.0.1``, ``[::1]``. Any other single address: that address.
    A wildcard bind (``0.0.0.0``, ``::``): the loopback names. Each adds ``SCENARIOKIT_ALLOWED_HOSTS``;
    ``*`` there accepts any Host. A wildcard bind with tokens and no allowed hosts accepts any Host: the
    token is what a rebinding page cannot send. Without tokens such a bind refuses to start (see
    :func:`check_hosts`).
    """
    configured = {host_name(name) for name in settings.allowed_hosts}
    if "*" in configured:
        return HostRule(None)
    bind = settings.host
    if bind in WILDCARD_HOSTS:
        if not configured and settings.api_tokens:
            return HostRule(None)
        return HostRule(frozenset(LOOPBACK_NAMES | configured))
    names = {host_name(bind)} | configured
    if is_loopback(bind):
        names |= LOOPBACK_NAMES
    return HostRule(frozenset(names))


def check_hosts(settings: Settings) -> None:
    """Refuse a wildcard bind that nothing protects from DNS rebinding: no tokens, no allowed hosts."""
    if settings.host in WILDCARD_HOSTS and not settings.api_tokens and not settings.allowed_hosts:
        raise SettingsError(
            f"serving on {settings.host or '*'!r} without API tokens needs SCENARIOKIT_ALLOWED_HOSTS: the "
            "host names clients use to reach this server (comma-separated; * accepts any Host, which "
            "lets any web page a user opens reach the API through DNS rebinding)"
        )


@attrs.frozen
class OriginRule:
    """The origins allowed to call the API from a browser (CORS and the Origin check share it)."""

    listed: tuple[str, ...] = ()
    loopback: bool = False

    @property
    def any(self) -> bool:
        """Whether every origin is allowed (``*``)."""
        return "*" in self.listed

    def allows(self, origin: str) -> bool:
        """Whether a page of ``origin`` may call the API."""
        if self.any or origin in self.listed:
            return True
        return self.loopback and LOOPBACK_ORIGIN.fullmatch(origin.lower()) is not None


def origin_rule(settings: Settings) -> OriginRule:
    """``SCENARIOKIT_CORS_ORIGINS`` when set; unset, every loopback origin on a loopback bind, else none."""
    if settings.cors_origins:
        return OriginRule(listed=tuple(origin.rstrip("/") for origin in settings.cors_origins))
    return OriginRule(loopback=is_loopback(settings.host))


class OriginOptions(Mapping[str, Any]):
    """aiohttp-cors's per-origin options, answering for every origin :class:`OriginRule` allows.

    aiohttp-cors looks an origin up in a mapping (then ``*``); this mapping answers by rule, so a
    pattern such as "any loopback port" works with the library's own preflight and response handling.
    """

    def __init__(self, rule: OriginRule, options: Any) -> None:
        self._rule = rule
        self._options = options

    def __getitem__(self, origin: str) -> Any:
        if (origin == "*" and self._rule.any) or (origin != "*" and self._rule.allows(origin)):
            return self._options
        raise KeyError(origin)

    def __iter__(self) -> Iterator[str]:  # aiohttp-cors only asks whether any origin is allowed
        yield from self._rule.listed
        if self._rule.loopback:
            yield "http://localhost"

    def __len__(self) -> int:
        return len(self._rule.listed) + int(self._rule.loopback)


def _same_origin(origin: str, host: str | None) -> bool:
    """Whether ``origin`` is the server's own (its pages, e.g. ``/docs``), by the Host already checked."""
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return False
    return bool(host) and netloc.lower() == (host or "").lower()


def _body_types(request: web.Request) -> tuple[str, ...]:
    handler = request.match_info.handler
    return getattr(handler, "__scenariokit_body_types__", JSON_TYPES)


def trust_boundary(settings: Settings) -> Middleware:
    """The middleware that refuses, before any handler runs, what the module docstring lists."""
    hosts = host_rule(settings)
    origins = origin_rule(settings)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if len(request.raw_path.encode()) > MAX_URL_BYTES:
            return problem(414, f"the URL is longer than the limit of {MAX_URL_BYTES} bytes")
        if not request.path.startswith(GUARDED_PREFIXES):
            return await handler(request)
        host = request.headers.get("Host")
        if not hosts.allows(host):
            return problem(
                421,
                f"the Host header {host!r} does not name this server; a name clients use must be listed "
                "in SCENARIOKIT_ALLOWED_HOSTS",
            )
        if request.method in UNSAFE_METHODS:
            origin = request.headers.get("Origin")
            if origin is not None and not origins.allows(origin) and not _same_origin(origin, host):
                return problem(
                    403,
                    f"requests from origin {origin!r} are not allowed; list it in SCENARIOKIT_CORS_ORIGINS",
                )
            # No route, or not this method: the router's 404/405 is the answer, whatever the body.
            if request.body_exists and request.match_info.http_exception is None:
                allowed = _body_types(request)
                given = request.headers.get("Content-Type")
                if given is None or request.content_type not in allowed:
                    return problem(
                        415,
                        f"the body's Content-Type must be {' or '.join(allowed)}, got {given!r}",
                    )
        return await handler(request)

    return guard
