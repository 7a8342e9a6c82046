"""Browser settings of environments and scenarios, and the context options a run gets from them.

An environment's ``browser`` applies to every run against it; a scenario's wins key by key
(docs/browser.md). Every key is optional: None means "not set here", so a scenario that sets only
``locale`` keeps its environment's device. The merged settings become the run's Playwright browser
context options (:func:`context_options`); the run records them as they were (``Run.browser``).
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import re
import threading
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from scenariokit.domain.fields import FieldError, camel, reports_every_field, valid_alias

MAX_VIEWPORT = 10000
#: what a locale looks like: a BCP 47 tag such as de-DE, en, pt-BR or zh-Hant-TW
LOCALE_PATTERN = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}$")
MAX_TEXT = 1000
MAX_ITEMS = 100
#: The permissions Chromium grants a context (Playwright's ``context.grant_permissions``).
PERMISSIONS = (
    "accelerometer",
    "ambient-light-sensor",
    "background-sync",
    "camera",
    "clipboard-read",
    "clipboard-write",
    "geolocation",
    "gyroscope",
    "local-fonts",
    "magnetometer",
    "microphone",
    "midi",
    "midi-sysex",
    "notifications",
    "payment-handler",
    "storage-access",
)
#: A header name as HTTP allows it (RFC 9110 token).
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}$")
#: A header value a browser sends as it is: printable ASCII and tabs, on one line.
HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*$")


class ColorScheme(enum.StrEnum):
    """The ``prefers-color-scheme`` the page sees."""

    LIGHT = "light"
    DARK = "dark"


class VideoMode(enum.StrEnum):
    """Whether a run records a video of its pages: never, always, or kept only when the run failed."""

    OFF = "off"
    ON = "on"
    RETAIN_ON_FAILURE = "retain-on-failure"


# --- the device list -----------------------------------------------------------------------------

_devices: dict[str, dict[str, Any]] | None = None
_devices_lock = threading.Lock()


def devices() -> dict[str, dict[str, Any]]:
    """Every device the installed Playwright knows, by name: viewport, user agent, scale, touch, mobile.

    Read once per process, without launching a browser (:func:`_read_playwright_devices`).
    """
    global _devices
    with _devices_lock:
        if _devices is None:
            _devices = _read_playwright_devices()
        return _devices


_BUNDLE_START = "deviceDescriptorsSource_default = "
_BUNDLE_END = "\n    };\n"
_JS_KEY = re.compile(r"(?m)^(\s*)([A-Za-z_$][\w$]*):")


def _read_playwright_devices() -> dict[str, dict[str, Any]]:
    """Playwright's device table, from the cheapest place this release keeps it.

    Releases before 1.5x ship the driver package's ``lib/server/deviceDescriptorsSource.json``; later
    ones bundle that same JSON into ``lib/coreBundle.js`` as an object literal (keys unquoted), which
    reads back as JSON once its keys are quoted. When neither reads (another layout), the table comes
    from ``playwright.devices``, which starts the driver (no browser) on a thread of its own so that a
    caller on an event loop may ask too: seconds instead of milliseconds, once.
    """
    import playwright

    package = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    source = package / "server" / "deviceDescriptorsSource.json"
    with contextlib.suppress(OSError, ValueError):
        return _checked(json.loads(source.read_text(encoding="utf-8")))
    with contextlib.suppress(OSError, ValueError):
        bundle = (package / "coreBundle.js").read_text(encoding="utf-8")
        start = bundle.index(_BUNDLE_START) + len(_BUNDLE_START)
        literal = bundle[start : bundle.index(_BUNDLE_END, start) + len(_BUNDLE_END) - 2]  # to its "}"
        return _checked(json.loads(_JS_KEY.sub(r'\1"\2":', literal)))
    return _checked(_devices_from_driver())


def _checked(table: Any) -> dict[str, dict[str, Any]]:
    """``table`` when it is a device table (name -> descriptor with a viewport), else ValueError."""
    if not isinstance(table, dict) or not table:
        raise ValueError("not a device table")
    for descriptor in table.values():
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("viewport"), dict):
            raise ValueError("not a device table")
    return table


def _devices_from_driver() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    failure: list[BaseException] = []

    def read() -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as driver:
                found.update(driver.devices)
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    reader = threading.Thread(target=read, name="playwright-devices")
    reader.start()
    reader.join()
    if failure:
        raise RuntimeError(f"could not read Playwright's device list: {failure[0]}") from failure[0]
    return found


def device_names() -> list[str]:
    """The names of the devices Playwright knows, sorted."""
    return sorted(devices())


# --- validators ----------------------------------------------------------------------------------


def _known_device(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or value not in devices():
        near = [name for name in device_names() if isinstance(value, str) and value.lower() in name.lower()]
        hint = f"; did you mean {', '.join(near[:5])}?" if near else "; GET /api/v1/devices lists them"
        raise FieldError(camel(attribute.name), f"{value!r} is not a device Playwright knows{hint}")


def _short_text(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT):
        raise FieldError(
            camel(attribute.name), f"must be a non-blank string of at most {MAX_TEXT} characters"
        )


def _locale(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not LOCALE_PATTERN.match(value)):
        raise FieldError(camel(attribute.name), "must be a locale such as en-US, de-DE or fr")


def _timezone(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is None:
        return
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise FieldError(
            camel(attribute.name), "must be an IANA time zone such as UTC or Europe/Berlin"
        ) from None


def valid_viewport_side(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VIEWPORT:
        raise FieldError(camel(attribute.name), f"must be a whole number from 1 to {MAX_VIEWPORT}")


def _between(low: float, high: float) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            raise FieldError(camel(attribute.name), f"must be a number from {low:g} to {high:g}")

    return check


valid_latitude = _between(-90, 90)
valid_longitude = _between(-180, 180)
valid_accuracy = _between(0, 1_000_000)


def _permissions(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is None:
        return
    for index, name in enumerate(value):
        if name not in PERMISSIONS:
            raise FieldError(
                f"{camel(attribute.name)}[{index}]",
                f"{name!r} is not a permission; one of: {', '.join(PERMISSIONS)}",
            )


def _headers(_: Any, attribute: attrs.Attribute[Any], value: dict[str, str] | None) -> None:
    if value is None:
        return
    name = camel(attribute.name)
    if not isinstance(value, dict) or len(value) > MAX_ITEMS:
        raise FieldError(name, f"must be an object of at most {MAX_ITEMS} headers")
    for key, item in value.items():
        if not isinstance(key, str) or not HEADER_NAME.match(key):
            raise FieldError(f"{name}.{key}", "is not a valid header name")
        if not isinstance(item, str) or len(item) > 8000 or not HEADER_VALUE.match(item):
            raise FieldError(f"{name}.{key}", "must be printable ASCII on one line, at most 8000 characters")


def _globs(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is None:
        return
    if len(value) > MAX_ITEMS:
        raise FieldError(camel(attribute.name), f"must hold at most {MAX_ITEMS} patterns")
    for index, pattern in enumerate(value):
        if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_TEXT:
            raise FieldError(f"{camel(attribute.name)}[{index}]", "must be a non-blank URL glob pattern")


def _unique(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(dict.fromkeys(values))


# --- values --------------------------------------------------------------------------------------


@reports_every_field
@attrs.frozen
class Viewport:
    """The page's size in CSS pixels."""

    width: int = attrs.field(validator=valid_viewport_side)
    height: int = attrs.field(validator=valid_viewport_side)


@reports_every_field
@attrs.frozen
class Geolocation:
    """Where the page's ``navigator.geolocation`` says it is (needs the ``geolocation`` permission)."""

    latitude: float = attrs.field(validator=valid_latitude)
    longitude: float = attrs.field(validator=valid_longitude)
    accuracy: float | None = attrs.field(default=None, validator=valid_accuracy)


@reports_every_field
@attrs.frozen
class HttpCredentials:
    """HTTP authentication (basic) from a credential linked to the scenario, named by its alias."""

    credential: str = attrs.field(
        validator=valid_alias,
        metadata={
            "description": "The alias of a credential linked to the scenario: its username and secret."
        },
    )


def _about(text: str) -> dict[str, str]:
    return {"description": text}


@reports_every_field
@attrs.frozen
class BrowserSettings:
    """How a run's browser context is made (docs/browser.md). Every key is optional; None: not set."""

    device: str | None = attrs.field(
        default=None,
        validator=_known_device,
        metadata=_about(
            "A device of Playwright's list (GET /api/v1/devices), e.g. `iPhone 13` or `Pixel 7`: its "
            "viewport, user agent, scale factor, touch and mobile mode. `viewport` and `userAgent` "
            "override it."
        ),
    )
    viewport: Viewport | None = attrs.field(
        default=None, metadata=_about(f"The page size in CSS pixels, each side 1 to {MAX_VIEWPORT}.")
    )
    locale: str | None = attrs.field(
        default=None,
        validator=_locale,
        metadata=_about("The browser's locale, e.g. `de-DE`: `navigator.language`, `Intl`."),
    )
    timezone_id: str | None = attrs.field(
        default=None,
        validator=_timezone,
        metadata=_about("The IANA time zone the page sees, e.g. `Europe/Berlin`."),
    )
    color_scheme: ColorScheme | None = attrs.field(
        default=None, metadata=_about("`light` or `dark`: what `prefers-color-scheme` matches.")
    )
    geolocation: Geolocation | None = attrs.field(
        default=None,
        metadata=_about(
            "`{latitude (-90..90), longitude (-180..180), accuracy?}`; the page reads it once "
            "`permissions` holds `geolocation`."
        ),
    )
    permissions: tuple[str, ...] | None = attrs.field(
        default=None,
        converter=_unique,
        validator=_permissions,
        metadata=_about(f"Permissions granted to every page: {', '.join(PERMISSIONS)}."),
    )
    extra_http_headers: dict[str, str] | None = attrs.field(
        default=None, validator=_headers, metadata=_about("Headers sent with every request of the run.")
    )
    http_credentials: HttpCredentials | None = attrs.field(
        default=None,
        metadata=_about(
            "`{credential: alias}`: answer HTTP authentication with the username and secret of the "
            "scenario's linked credential of that alias (the secret is never shown)."
        ),
    )
    ignore_https_errors: bool | None = attrs.field(
        default=None, metadata=_about("true: accept invalid certificates (a staging site's self-signed one).")
    )
    user_agent: str | None = attrs.field(
        default=None, validator=_short_text, metadata=_about("The `User-Agent` the browser sends and shows.")
    )
    offline: bool | None = attrs.field(default=None, metadata=_about("true: the browser has no network."))
    video: VideoMode | None = attrs.field(
        default=None,
        metadata=_about(
            "`off`, `on` or `retain-on-failure`: record the run's pages to `video.webm` artifacts "
            "(kept only for a failed run with `retain-on-failure`)."
        ),
    )
    block_urls: tuple[str, ...] | None = attrs.field(
        default=None,
        validator=_globs,
        metadata=_about(
            "URL glob patterns (`**/analytics.js`, `https://*.tracker.example/**`) the run never requests."
        ),
    )

    @property
    def is_empty(self) -> bool:
        """Whether no key is set: a run gets Playwright's default desktop context."""
        return self is NO_BROWSER_SETTINGS or self == NO_BROWSER_SETTINGS  # no new value per call

    def overlaid_by(self, other: BrowserSettings) -> BrowserSettings:
        """These settings with every key ``other`` sets replaced by ``other``'s (a scenario's over
        its environment's)."""
        given = {
            field.name: value
            for field in attrs.fields(BrowserSettings)
            if (value := getattr(other, field.name)) is not None
        }
        return attrs.evolve(self, **given) if given else self


NO_BROWSER_SETTINGS = BrowserSettings()


def context_options(settings: BrowserSettings) -> dict[str, Any]:
    """Keyword arguments of Playwright's ``browser.new_context`` for ``settings`` (JSON values only).

    A device comes first, as Playwright Test's ``use: {...devices[name], ...}``: the keys set beside it
    win. HTTP credentials, blocked URLs and video are the worker's, which holds the secret and the
    artifact folder; they are not here.
    """
    options: dict[str, Any] = {}
    if settings.device is not None:
        descriptor = devices()[settings.device]
        options.update(
            {
                key: value
                for key, value in _snake_keys(descriptor).items()
                if key
                in ("user_agent", "viewport", "screen", "device_scale_factor", "is_mobile", "has_touch")
            }
        )
    if settings.viewport is not None:
        options["viewport"] = {"width": settings.viewport.width, "height": settings.viewport.height}
    if settings.geolocation is not None:
        where = {"latitude": settings.geolocation.latitude, "longitude": settings.geolocation.longitude}
        if settings.geolocation.accuracy is not None:
            where["accuracy"] = settings.geolocation.accuracy
        options["geolocation"] = where
    simple = {
        "user_agent": settings.user_agent,
        "locale": settings.locale,
        "timezone_id": settings.timezone_id,
        "color_scheme": settings.color_scheme.value if settings.color_scheme else None,
        "permissions": list(settings.permissions) if settings.permissions is not None else None,
        "extra_http_headers": dict(settings.extra_http_headers)
        if settings.extra_http_headers is not None
        else None,
        "ignore_https_errors": settings.ignore_https_errors,
        "offline": settings.offline,
    }
    options.update({key: value for key, value in simple.items() if value is not None})
    return options


_CAMEL_HUMP = re.compile(r"(?<=[a-z])([A-Z])")


def _snake_keys(descriptor: dict[str, Any]) -> dict[str, Any]:
    """A descriptor with snake_case keys (``playwright.devices`` has them; the JSON table camelCase)."""
    return {_CAMEL_HUMP.sub(r"_\1", key).lower(): value for key, value in descriptor.items()}


def run_settings(
    environment: BrowserSettings, scenario: BrowserSettings, aliases: Collection[str]
) -> BrowserSettings:
    """The settings a run executes with: the environment's, overlaid key by key by the scenario's.

    Raises :class:`FieldError` when ``httpCredentials`` names an alias none of the scenario's linked
    credentials (``aliases``) has: the environment may name one that this scenario lacks.
    """
    merged = environment.overlaid_by(scenario)
    used = merged.http_credentials
    if used is not None and used.credential not in aliases:
        raise FieldError(
            "browser.httpCredentials.credential",
            f"{used.credential!r} is not the alias of a credential linked to the scenario",
        )
    return merged


MASK = "***"


def masked_settings(settings: BrowserSettings, secrets: Iterable[str]) -> BrowserSettings:
    """``settings`` as a run records them: a header value holding a linked credential's secret masked.

    The settings hold no secret of their own (``httpCredentials`` names an alias), but a header may
    carry one that is also stored as a credential (a token in ``Authorization``).
    """
    headers = settings.extra_http_headers
    values = [secret for secret in secrets if secret]
    if not headers or not values:
        return settings
    masked = {}
    for name, value in headers.items():
        for secret in sorted(values, key=len, reverse=True):
            value = value.replace(secret, MASK)
        masked[name] = value
    return attrs.evolve(settings, extra_http_headers=masked)
