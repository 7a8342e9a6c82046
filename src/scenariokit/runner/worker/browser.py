"""Finding the browser a run uses, and how to start it.

Discovery order (docs/deployment.md "Workers and browsers"):
``SCENARIOKIT_BROWSER_WS`` connects to a remote Playwright browser server instead of launching; else
``SCENARIOKIT_BROWSER_PATH``, an explicit choice; else, for headless runs, Chromium's headless shell
(Playwright's ``chromium_headless_shell-*`` install, else ``chromium-headless-shell`` on ``PATH``), then
full Chromium (Playwright's ``chromium-*`` install, else ``chromium`` on ``PATH``). Headed runs skip the
headless shell, which cannot show a window. Finding none raises :class:`BrowserUnavailable` naming
every place tried. ``SCENARIOKIT_BROWSER_ARGS`` adds Chromium switches to every launch
(:func:`browser_args`).

The headless shell is the build Playwright itself runs for headless by default: without the browser
UI it starts in a third of the time and closes faster, which is most of a short run's cost.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from scenariokit.domain.errors import BrowserUnavailable

BROWSER_PATH_ENV = "SCENARIOKIT_BROWSER_PATH"
BROWSER_WS_ENV = "SCENARIOKIT_BROWSER_WS"
BROWSER_ARGS_ENV = "SCENARIOKIT_BROWSER_ARGS"
HEADLESS_SHELL_NAMES = ("chromium-headless-shell",)
SYSTEM_BROWSERS = ("chromium", "chromium-browser", "google-chrome")

#: What kind of build a :class:`BrowserConfig` launches.
BrowserKind = Literal["chromium-headless-shell", "chromium", "configured", "remote"]

#: Flags every launch gets, on top of Playwright's own (which already turn off background networking,
#: component updates, crash reports and the sandbox): no GPU, and none of the first-run or sync traffic
#: a machine without a network would wait on. Two fewer processes per browser: no zygote (Chromium's
#: own fork server, of no use to a browser that lives for one run; it needs Chromium's sandbox off,
#: as Playwright launches it) and the GPU service, software-only here, as a thread of the browser
#: process. Pages render the same (docs/deployment.md); each run costs about 9% less CPU. The
#: headless shell takes them all.
DEFAULT_ARGS = (
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-zygote",
    "--in-process-gpu",
)

#: Switches ``SCENARIOKIT_BROWSER_ARGS`` may not carry, and why: each is the runner's or Playwright's
#: own, and Chromium keeps only the last of a switch, so a second one would silently replace it.
RESERVED_SWITCHES = {
    "--user-data-dir": "each run's browser profile is the runner's own, fresh for the run",
    "--remote-debugging-pipe": "Playwright drives the browser through it",
    "--remote-debugging-port": "it would open the browser to whoever reaches the port",
    "--remote-debugging-address": "it would open the browser to whoever reaches the port",
    "--headless": "headless or headed is the runner's choice (headless unless a run is headed)",
    "--enable-features": (
        "Chromium keeps only the last --enable-features, and it would replace the features Playwright "
        "and scenariokit enable"
    ),
    "--disable-features": (
        "Chromium keeps only the last --disable-features, and it would replace the list Playwright "
        "turns off for automation"
    ),
}

_CHROME_FOR_TESTING_MAC = ("Google Chrome for Testing.app", "Contents", "MacOS", "Google Chrome for Testing")

#: Where Playwright keeps each build inside its ``<name>-<revision>/`` folder, per platform; the
#: ``chrome-linux``/``headless_shell`` layouts are those of Playwright releases before 1.50.
_PLAYWRIGHT_LAYOUTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "chromium": (
        ("chrome-linux64", "chrome"),
        ("chrome-linux-arm64", "chrome"),
        ("chrome-linux", "chrome"),
        ("chrome-mac-arm64", *_CHROME_FOR_TESTING_MAC),
        ("chrome-mac-x64", *_CHROME_FOR_TESTING_MAC),
        ("chrome-mac", "Chromium.app", "Contents", "MacOS", "Chromium"),
        ("chrome-win64", "chrome.exe"),
        ("chrome-win", "chrome.exe"),
    ),
    "chromium-headless-shell": (
        ("chrome-headless-shell-linux64", "chrome-headless-shell"),
        ("chrome-headless-shell-linux-arm64", "chrome-headless-shell"),
        ("chrome-linux", "headless_shell"),
        ("chrome-headless-shell-mac-arm64", "chrome-headless-shell"),
        ("chrome-headless-shell-mac-x64", "chrome-headless-shell"),
        ("chrome-mac", "headless_shell"),
        ("chrome-headless-shell-win64", "chrome-headless-shell.exe"),
        ("chrome-win", "headless_shell.exe"),
    ),
}


@attrs.frozen
class BrowserConfig:
    """How a worker gets its browsers: an executable to launch, or a Playwright server to connect to."""

    executable: str | None = None
    ws_endpoint: str | None = None
    headless: bool = True
    #: flags added after :data:`DEFAULT_ARGS` (and ``--no-sandbox`` when running as root)
    args: tuple[str, ...] = ()
    #: which build discovery found, for logs and ``/health``
    kind: BrowserKind = attrs.field(default="configured", eq=False)

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
        return f"{self.kind} at {self.executable}"


def _running_as_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0


def _playwright_package() -> Path:
    import playwright

    return Path(playwright.__file__).parent / "driver" / "package"


def playwright_browser_path(name: str = "chromium", env: Mapping[str, str] = os.environ) -> Path:
    """Where ``playwright install`` puts the executable of ``name`` for this Playwright (it may be absent).

    ``name`` is ``chromium`` or ``chromium-headless-shell``.
    """
    package = _playwright_package()
    folder = _playwright_browsers_root(env, package) / _folder_name(name, _revision(package, name))
    return _executable_in(folder, name) or folder.joinpath(*_PLAYWRIGHT_LAYOUTS[name][0])


def playwright_chromium_path(env: Mapping[str, str] = os.environ) -> Path:
    """Where Playwright's own ``playwright install chromium`` puts the executable (it may be absent)."""
    return playwright_browser_path("chromium", env)


def installed_playwright_browsers(name: str, env: Mapping[str, str] = os.environ) -> Iterator[Path]:
    """Executables of ``name`` that Playwright installed: this Playwright's revision first, then the others.

    Another Playwright on the machine may have installed another revision; it drives this one too (as
    Debian's build does), so it beats falling back to a slower build.
    """
    package = _playwright_package()
    root = _playwright_browsers_root(env, package)
    own = root / _folder_name(name, _revision(package, name))
    prefix = _folder_name(name, "")
    try:
        others = [p for p in root.iterdir() if p.name.startswith(prefix) and p != own]
    except OSError:
        others = []
    others.sort(key=lambda p: _revision_number(p.name[len(prefix) :]), reverse=True)
    for folder in (own, *others):
        found = _executable_in(folder, name)
        if found is not None:
            yield found


_FFMPEG_FILES = {"linux": "ffmpeg-linux", "darwin": "ffmpeg-mac", "win32": "ffmpeg-win64.exe"}


def playwright_ffmpeg_path(env: Mapping[str, str] = os.environ) -> Path:
    """Where Playwright looks for the ffmpeg it records videos with (``playwright install ffmpeg``)."""
    package = _playwright_package()
    folder = _playwright_browsers_root(env, package) / _folder_name("ffmpeg", _revision(package, "ffmpeg"))
    return folder / _FFMPEG_FILES.get(sys.platform, "ffmpeg-linux")


def video_recorder(env: Mapping[str, str] = os.environ) -> str | None:
    """Why this worker cannot record videos, or None when it can.

    Playwright records with its own ffmpeg build. Without it, an ``ffmpeg`` on ``PATH`` (Debian's
    package) is linked where Playwright looks, when that is the worker's own private home (the
    default: ``PLAYWRIGHT_BROWSERS_PATH`` unset, and ``HOME`` inside the run's private working
    directory, as every worker has it); a folder the operator chose, or a user's own home, is never
    written to.
    """
    target = playwright_ffmpeg_path(env)
    if _is_executable(target):
        return None
    system = shutil.which("ffmpeg", path=env.get("PATH", os.defpath))
    private = Path(env.get("HOME", "/nonexistent")).resolve().is_relative_to(Path.cwd().resolve())
    if system and not env.get("PLAYWRIGHT_BROWSERS_PATH") and private:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(system)
            return None
        except OSError:
            pass
    return (
        f"Playwright's ffmpeg is not installed at {target}: `playwright install ffmpeg`, or "
        "`apt-get install ffmpeg` with PLAYWRIGHT_BROWSERS_PATH unset"
    )


def _folder_name(name: str, revision: str) -> str:
    return f"{name.replace('-', '_')}-{revision}"


def _revision_number(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _executable_in(folder: Path, name: str) -> Path | None:
    for layout in _PLAYWRIGHT_LAYOUTS[name]:
        candidate = folder.joinpath(*layout)
        if _is_executable(candidate):
            return candidate
    return None


def _is_executable(path: Path | str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def _revision(package: Path, name: str) -> str:
    try:
        manifest = json.loads((package / "browsers.json").read_text())
    except (OSError, ValueError):
        return "unknown"
    for browser in manifest.get("browsers", []):
        if browser.get("name") == name:
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


def discover_browser(
    env: Mapping[str, str] = os.environ, *, headless: bool = True, args: tuple[str, ...] | None = None
) -> BrowserConfig:
    """The browser runs use: a remote server, the configured executable, else the fastest one installed.

    ``SCENARIOKIT_BROWSER_WS`` and ``SCENARIOKIT_BROWSER_PATH`` are explicit choices, so they win over
    what happens to be installed, and a configured path that is not an executable is an error rather
    than a silent fall-back to another browser. Headless runs prefer the headless shell; ``headless=False``
    looks for full Chromium only. ``args`` are the switches every launch adds (the server's
    ``Settings.browser_args``); None reads them from ``SCENARIOKIT_BROWSER_ARGS`` (:func:`browser_args`).
    Raises :class:`BrowserUnavailable` naming every place tried.
    """
    ws_endpoint = env.get(BROWSER_WS_ENV)
    args = browser_args(env) if args is None else args
    if ws_endpoint:
        if args:
            raise BrowserUnavailable(
                f"{BROWSER_ARGS_ENV} is set, but a remote browser ({BROWSER_WS_ENV}) is launched by its own "
                f"server: give its switches there, or unset {BROWSER_ARGS_ENV}"
            )
        return BrowserConfig(ws_endpoint=ws_endpoint, headless=headless, kind="remote")
    configured = env.get(BROWSER_PATH_ENV)
    if configured:
        if _is_executable(configured):
            return BrowserConfig(executable=configured, headless=headless, args=args, kind="configured")
        raise BrowserUnavailable(
            f"{BROWSER_PATH_ENV}={configured} is not an executable file: point it at a Chromium executable "
            "or unset it to use the headless shell or Chromium installed on this machine"
        )
    tried = [f"{BROWSER_WS_ENV} (not set)", f"{BROWSER_PATH_ENV} (not set)"]
    search_path = env.get("PATH", os.defpath)
    kinds: list[tuple[BrowserKind, tuple[str, ...]]] = [("chromium", SYSTEM_BROWSERS)]
    if headless:
        kinds.insert(0, ("chromium-headless-shell", HEADLESS_SHELL_NAMES))
    for kind, names in kinds:
        own = next(installed_playwright_browsers(kind, env), None)
        if own is not None:
            return BrowserConfig(executable=str(own), headless=headless, args=args, kind=kind)
        root = _playwright_browsers_root(env, _playwright_package())
        tried.append(f"Playwright's {kind} ({root / _folder_name(kind, '*')})")
        for name in names:
            found = shutil.which(name, path=search_path)
            if found:
                executable = past_launcher_script(found)
                return BrowserConfig(executable=executable, headless=headless, args=args, kind=kind)
        tried.append(f"{', '.join(names)} on PATH")
    install = "`apt-get install chromium-headless-shell` (Debian) or `playwright install chromium`"
    if not headless:
        install = "`apt-get install chromium` (Debian) or `playwright install chromium`"
    raise BrowserUnavailable(
        f"no browser found for {'headless' if headless else 'headed'} runs; tried "
        + "; ".join(tried)
        + f". Install one with {install}, set {BROWSER_PATH_ENV} to a Chromium executable, "
        f"or set {BROWSER_WS_ENV} to a Playwright server."
    )


def browser_args(env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The switches ``SCENARIOKIT_BROWSER_ARGS`` adds to every launch (:func:`parse_browser_args`);
    a value that cannot be used raises :class:`BrowserUnavailable` naming the variable and why."""
    try:
        return parse_browser_args(env.get(BROWSER_ARGS_ENV, ""))
    except ValueError as exc:
        raise BrowserUnavailable(f"{BROWSER_ARGS_ENV}: {exc}") from None


def parse_browser_args(text: str) -> tuple[str, ...]:
    """Chromium switches from ``text``, split as a shell splits words.

    Each must be a switch (``--name`` or ``--name=value``) and none one of :data:`RESERVED_SWITCHES`;
    else :class:`ValueError` names the word and why.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot be split into switches: {exc}") from None
    return check_browser_args(words)


def check_browser_args(words: Iterable[str]) -> tuple[str, ...]:
    """``words`` as switches every launch may add, else :class:`ValueError` naming the word and why:
    each must be ``--name`` or ``--name=value``, and none one of :data:`RESERVED_SWITCHES`."""
    words = tuple(words)
    for word in words:
        if not isinstance(word, str):
            raise ValueError(f"{word!r} is not a switch: each must be a string, --name or --name=value")
        name = word.split("=", 1)[0]
        if not name.startswith("--") or len(name) < 3 or any(c.isspace() for c in name):
            raise ValueError(f"{word!r} is not a switch: each word must be --name or --name=value")
        if name in RESERVED_SWITCHES:
            raise ValueError(f"{name} may not be given: {RESERVED_SWITCHES[name]}")
    return words


#: a launcher script's one command: an absolute path given the script's own arguments, nothing else
_LAUNCHER_LINE = re.compile(r'(?:exec\s+)?(/[^\s"\'$`;&|<>()\\]+)\s+"\$@"')
_SH_SHEBANG = re.compile(r"#!\s*/(?:usr/)?bin/(?:da)?sh(?:\s+-e)?\s*")


def past_launcher_script(found: str) -> str:
    """The executable a found launcher script only runs, else ``found`` itself.

    Debian's ``/usr/bin/chromium-headless-shell`` is ``#!/bin/sh -e`` and one line running
    ``/usr/lib/chromium/chromium-headless-shell "$@"`` without ``exec``: launched through it, every
    browser start pays a shell that lives as long as the browser does. A script that is exactly that
    (a plain ``sh`` shebang, then only comments and that one line, which sets nothing and passes the
    arguments unchanged) is stepped past; any other script (Debian's ``chromium``, which reads its
    flags from ``/etc/chromium.d``) is launched as it is.
    """
    try:
        with open(found, "rb") as file:
            head = file.read(4097)
    except OSError:
        return found
    if len(head) > 4096 or not head.startswith(b"#!"):
        return found
    try:
        shebang, *rest = head.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return found
    lines = [line.strip() for line in rest if line.strip() and not line.strip().startswith("#")]
    match = _LAUNCHER_LINE.fullmatch(lines[0]) if len(lines) == 1 else None
    if not _SH_SHEBANG.fullmatch(shebang) or match is None:
        return found
    target = match.group(1)
    return target if _is_executable(target) and not _is_script(target) else found


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return file.read(2) == b"#!"
    except OSError:
        return True


def browser_status(env: Mapping[str, str] = os.environ) -> Literal["ok", "missing"]:
    """``"ok"`` when runs have a browser to use, ``"missing"`` otherwise (for ``/health``)."""
    try:
        discover_browser(env)
    except BrowserUnavailable:
        return "missing"
    return "ok"


def browser_build(env: Mapping[str, str] = os.environ) -> str | None:
    """Which build runs use, for ``/health``: ``"chromium-headless-shell 156.0.8078.79 (/usr/bin/…)"``.

    None when there is none. The version is what the executable says (asked once per executable and
    modification time, so a polled ``/health`` does not start a process each time).
    """
    try:
        config = discover_browser(env)
    except BrowserUnavailable:
        return None
    if config.executable is None:
        return f"remote ({config.ws_endpoint})"
    kind = config.kind
    if kind == "configured":
        kind = "chromium-headless-shell" if "headless" in Path(config.executable).name else "chromium"
    try:
        stamp = os.stat(config.executable).st_mtime_ns
    except OSError:
        stamp = 0
    version = _executable_version(config.executable, stamp)
    return f"{kind} {version} ({config.executable})" if version else f"{kind} ({config.executable})"


_VERSION = re.compile(r"\d+(?:\.\d+){1,3}")


@functools.lru_cache(maxsize=8)
def _executable_version(executable: str, stamp: int) -> str | None:
    """The version number ``executable --version`` prints (``stamp`` keys the cache to the file's mtime)."""
    try:
        done = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION.search(done.stdout)
    return match.group(0) if match else None
