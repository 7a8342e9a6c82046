"""Finding the browser a run uses, and how to start it.

Discovery order (CONTRACT.md section 6): ``SCENARIOKIT_BROWSER_WS`` connects to a remote Playwright
browser server instead of launching; otherwise Playwright's own installed Chromium when its executable
exists, else ``SCENARIOKIT_BROWSER_PATH``, else a system ``chromium`` / ``chromium-browser`` /
``google-chrome`` on ``PATH``. Finding none raises :class:`BrowserUnavailable` naming every place tried.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from scenariokit.domain.errors import BrowserUnavailable

BROWSER_PATH_ENV = "SCENARIOKIT_BROWSER_PATH"
BROWSER_WS_ENV = "SCENARIOKIT_BROWSER_WS"
SYSTEM_BROWSERS = ("chromium", "chromium-browser", "google-chrome")

#: Flags every launch gets: no GPU, and none of the background traffic a test run has no use for.
DEFAULT_ARGS = (
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

#: Where Playwright keeps Chromium inside ``chromium-<revision>/`` on each platform.
_PLAYWRIGHT_CHROMIUM_LAYOUTS = (
    ("chrome-linux64", "chrome"),
    ("chrome-linux-arm64", "chrome"),
    ("chrome-linux", "chrome"),
    ("chrome-mac-arm64", "Google Chrome for Testing.app", "Contents", "MacOS", "Google Chrome for Testing"),
    ("chrome-mac-x64", "Google Chrome for Testing.app", "Contents", "MacOS", "Google Chrome for Testing"),
    ("chrome-mac", "Chromium.app", "Contents", "MacOS", "Chromium"),
    ("chrome-win64", "chrome.exe"),
    ("chrome-win", "chrome.exe"),
)


@attrs.frozen
class BrowserConfig:
    """How a worker gets its browsers: an executable to launch, or a Playwright server to connect to."""

    executable: str | None = None
    ws_endpoint: str | None = None
    headless: bool = True
    #: flags added after :data:`DEFAULT_ARGS` (and ``--no-sandbox`` when running as root)
    args: tuple[str, ...] = ()

    @property
    def launch_args(self) -> list[str]:
        """Every command-line flag a launch passes to Chromium."""
        sandbox = ["--no-sandbox"] if _running_as_root() else []
        return [*sandbox, *DEFAULT_ARGS, *self.args]

    def launch_options(self) -> dict[str, Any]:
        """Keyword arguments for ``playwright.chromium.launch``."""
        return {"executable_path": self.executable, "headless": self.headless, "args": self.launch_args}

    def describe(self) -> str:
        """One line saying which browser this is, for logs."""
        if self.ws_endpoint:
            return f"remote browser at {self.ws_endpoint}"
        return f"Chromium at {self.executable}"


def _running_as_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0


def playwright_chromium_path(env: Mapping[str, str] = os.environ) -> Path:
    """Where Playwright's own ``playwright install chromium`` puts the executable (it may be absent)."""
    import playwright

    package = Path(playwright.__file__).parent / "driver" / "package"
    revision = _chromium_revision(package / "browsers.json")
    root = _playwright_browsers_root(env, package)
    folder = root / f"chromium-{revision}"
    for layout in _PLAYWRIGHT_CHROMIUM_LAYOUTS:
        candidate = folder.joinpath(*layout)
        if candidate.exists():
            return candidate
    return folder.joinpath(*_PLAYWRIGHT_CHROMIUM_LAYOUTS[0])


def _chromium_revision(browsers_json: Path) -> str:
    try:
        manifest = json.loads(browsers_json.read_text())
    except (OSError, ValueError):
        return "unknown"
    for browser in manifest.get("browsers", []):
        if browser.get("name") == "chromium":
            return str(browser.get("revision", "unknown"))
    return "unknown"


def _playwright_browsers_root(env: Mapping[str, str], package: Path) -> Path:
    configured = env.get("PLAYWRIGHT_BROWSERS_PATH")
    if configured == "0":
        return package / ".local-browsers"
    if configured:
        return Path(configured).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "ms-playwright"
    if sys.platform == "win32":
        return Path(env.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "ms-playwright"
    return Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ms-playwright"


def discover_browser(env: Mapping[str, str] = os.environ) -> BrowserConfig:
    """The browser runs use: a remote server, the configured executable, Playwright's own, the system's.

    ``SCENARIOKIT_BROWSER_WS`` and ``SCENARIOKIT_BROWSER_PATH`` are explicit choices, so they win over
    what happens to be installed, and a configured path that is not an executable is an error rather
    than a silent fall-back to another browser. Raises :class:`BrowserUnavailable` naming every place
    tried when there is none.
    """
    ws_endpoint = env.get(BROWSER_WS_ENV)
    if ws_endpoint:
        return BrowserConfig(ws_endpoint=ws_endpoint)
    configured = env.get(BROWSER_PATH_ENV)
    if configured:
        if Path(configured).is_file() and os.access(configured, os.X_OK):
            return BrowserConfig(executable=configured)
        raise BrowserUnavailable(
            f"{BROWSER_PATH_ENV}={configured} is not an executable file: point it at a Chromium executable "
            "or unset it to use Playwright's own Chromium or the system's"
        )
    tried = [f"{BROWSER_PATH_ENV} (not set)"]
    own = playwright_chromium_path(env)
    if own.is_file():
        return BrowserConfig(executable=str(own))
    tried.append(f"Playwright's Chromium ({own})")
    search_path = env.get("PATH", os.defpath)
    for name in SYSTEM_BROWSERS:
        found = shutil.which(name, path=search_path)
        if found:
            return BrowserConfig(executable=found)
    tried.append(f"{', '.join(SYSTEM_BROWSERS)} on PATH")
    raise BrowserUnavailable(
        "no browser found; tried " + "; ".join(tried) + ". Install one with `playwright install chromium`, "
        f"set {BROWSER_PATH_ENV} to a Chromium executable, or set {BROWSER_WS_ENV} to a Playwright server."
    )


def browser_status(env: Mapping[str, str] = os.environ) -> Literal["ok", "missing"]:
    """``"ok"`` when runs have a browser to use, ``"missing"`` otherwise (for ``/health``)."""
    try:
        discover_browser(env)
    except BrowserUnavailable:
        return "missing"
    return "ok"
