"""Browser discovery: explicit choices, then the headless shell, then Chromium; errors say what was tried."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from process_checks import descendants
from scenariokit.domain.errors import BrowserUnavailable
from scenariokit.domain.job import RunEvent, RunFinished, RunJob
from scenariokit.runner.confinement.sandbox import SandboxConfig
from scenariokit.runner.parent.executor import WorkerPool
from scenariokit.runner.worker.browser import (
    DEFAULT_ARGS,
    RESERVED_SWITCHES,
    BrowserConfig,
    browser_build,
    browser_status,
    discover_browser,
    playwright_browser_path,
    playwright_chromium_path,
)

JobFactory = Callable[..., RunJob]
Runner = Callable[..., Awaitable[tuple[RunFinished, list[RunEvent]]]]


def executable_file(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(0o755)
    return path


def executable(path: Path, version: str = "Chromium 1.2.3.4") -> Path:
    """A stand-in browser that prints ``version``."""
    return executable_file(path, f"#!/bin/sh\necho '{version}'\n".encode())


@pytest.fixture
def no_playwright_browser(tmp_path: Path) -> dict[str, str]:
    """An environment where Playwright has installed no browser and PATH holds nothing."""
    return {"PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "ms-playwright"), "PATH": str(tmp_path / "empty-bin")}


def test_remote_browser_server_wins_over_everything(no_playwright_browser: dict[str, str]) -> None:
    env = {**no_playwright_browser, "SCENARIOKIT_BROWSER_WS": "ws://127.0.0.1:3000/pw"}

    assert discover_browser(env) == BrowserConfig(ws_endpoint="ws://127.0.0.1:3000/pw")


def test_a_configured_path_wins_over_every_installed_build(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(playwright_browser_path("chromium-headless-shell", no_playwright_browser))
    executable(playwright_chromium_path(no_playwright_browser))
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")
    custom = executable(tmp_path / "custom" / "chrome")
    env = {**no_playwright_browser, "SCENARIOKIT_BROWSER_PATH": str(custom)}

    assert discover_browser(env).executable == str(custom)
    assert discover_browser(env, headless=False).executable == str(custom)


def test_headless_runs_prefer_playwrights_headless_shell(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    shell = executable(playwright_browser_path("chromium-headless-shell", no_playwright_browser))
    executable(playwright_chromium_path(no_playwright_browser))
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")
    executable(tmp_path / "empty-bin" / "chromium")

    found = discover_browser(no_playwright_browser)

    assert found.executable == str(shell) and found.kind == "chromium-headless-shell"
    assert Path(shell).parent.parent.name.startswith("chromium_headless_shell-")


def test_the_headless_shell_on_path_comes_before_full_chromium(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(playwright_chromium_path(no_playwright_browser))
    shell = executable(tmp_path / "empty-bin" / "chromium-headless-shell")

    found = discover_browser(no_playwright_browser)

    assert found.executable == str(shell) and found.headless is True


def test_another_playwright_revision_of_the_headless_shell_is_used(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    root = Path(no_playwright_browser["PLAYWRIGHT_BROWSERS_PATH"])
    executable(root / "chromium_headless_shell-1100" / "chrome-linux" / "headless_shell")
    newer = executable(
        root / "chromium_headless_shell-1200" / "chrome-headless-shell-linux64" / "chrome-headless-shell"
    )
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")

    assert discover_browser(no_playwright_browser).executable == str(newer)


def test_headed_runs_use_full_chromium_even_with_a_headless_shell_installed(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(playwright_browser_path("chromium-headless-shell", no_playwright_browser))
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")
    system = executable(tmp_path / "empty-bin" / "chromium")

    found = discover_browser(no_playwright_browser, headless=False)

    assert found.executable == str(system) and found.headless is False and found.kind == "chromium"
    assert found.launch_options()["headless"] is False


def test_headed_runs_prefer_playwrights_chromium_to_the_systems(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    own = executable(playwright_chromium_path(no_playwright_browser))
    executable(tmp_path / "empty-bin" / "chromium")

    assert discover_browser(no_playwright_browser, headless=False).executable == str(own)


def test_a_headless_shell_alone_does_not_serve_headed_runs(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")

    with pytest.raises(BrowserUnavailable, match="no browser found for headed runs") as caught:
        discover_browser(no_playwright_browser, headless=False)
    assert "chromium-headless-shell on PATH" not in str(caught.value)


def test_full_chromium_serves_headless_runs_when_there_is_no_headless_shell(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    system = executable(tmp_path / "empty-bin" / "chromium-browser")

    found = discover_browser(no_playwright_browser)

    assert found.executable == str(system) and found.kind == "chromium"


def test_a_configured_path_that_is_no_executable_is_refused_not_replaced(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")
    env = {**no_playwright_browser, "SCENARIOKIT_BROWSER_PATH": "/nowhere/chrome"}

    refused = "SCENARIOKIT_BROWSER_PATH=/nowhere/chrome is not an executable"
    with pytest.raises(BrowserUnavailable, match=refused):
        discover_browser(env)
    assert browser_status(env) == "missing"
    assert browser_build(env) is None


def test_no_browser_anywhere_names_every_place_tried(no_playwright_browser: dict[str, str]) -> None:
    with pytest.raises(BrowserUnavailable) as caught:
        discover_browser(no_playwright_browser)

    message = str(caught.value)
    root = no_playwright_browser["PLAYWRIGHT_BROWSERS_PATH"]
    assert "SCENARIOKIT_BROWSER_WS (not set)" in message
    assert "SCENARIOKIT_BROWSER_PATH (not set)" in message
    assert f"Playwright's chromium-headless-shell ({root}/chromium_headless_shell-*)" in message
    assert "chromium-headless-shell on PATH" in message
    assert f"Playwright's chromium ({root}/chromium-*)" in message
    assert "chromium, chromium-browser, google-chrome on PATH" in message
    assert "apt-get install chromium-headless-shell" in message
    assert browser_status(no_playwright_browser) == "missing"


def test_the_build_in_use_is_named_with_its_version(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    shell = executable(tmp_path / "empty-bin" / "chromium-headless-shell", "Chromium 156.0.8078.79")

    assert browser_build(no_playwright_browser) == f"chromium-headless-shell 156.0.8078.79 ({shell})"


def launcher_script(path: Path, body: str, shebang: str = "#!/bin/sh -e") -> Path:
    return executable_file(path, f"{shebang}\n{body}".encode())


def binary(path: Path) -> Path:
    return executable_file(path, b"\x7fELF not a real one")


def test_a_launcher_script_that_only_runs_the_browser_is_stepped_past(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    """Debian's /usr/bin/chromium-headless-shell runs the binary without exec: a shell per launch."""
    real = binary(tmp_path / "lib" / "chromium-headless-shell")
    launcher_script(tmp_path / "empty-bin" / "chromium-headless-shell", f'\n{real} "$@"\n')

    found = discover_browser(no_playwright_browser)

    assert found.executable == str(real) and found.kind == "chromium-headless-shell"
    assert browser_build(no_playwright_browser) == f"chromium-headless-shell ({real})"


@pytest.mark.parametrize(
    ("shebang", "body"),
    [
        ("#!/bin/sh", 'export CHROME_FLAGS=--lang=de\n{real} "$@"\n'),  # sets something first
        ("#!/bin/sh", '{real} --lang=de "$@"\n'),  # adds a flag
        ("#!/bin/sh", "{real}\n"),  # drops the arguments
        ("#!/bin/sh", '{real} "$@"\n{real} "$@"\n'),  # runs it twice
        ("#!/bin/sh", '{real} "$@" > /dev/null\n'),  # redirects
        ("#!/bin/bash", '{real} "$@"\n'),  # another shell: its start-up files may do more
        ("#!/bin/sh", '{real}.d/../x "$@"\n'),  # a target that is no executable
    ],
)
def test_a_launcher_script_that_does_anything_more_is_launched_as_it_is(
    no_playwright_browser: dict[str, str], tmp_path: Path, shebang: str, body: str
) -> None:
    real = binary(tmp_path / "lib" / "chromium-headless-shell")
    script = launcher_script(
        tmp_path / "empty-bin" / "chromium-headless-shell", body.format(real=real), shebang
    )

    assert discover_browser(no_playwright_browser).executable == str(script)


def test_a_launcher_script_whose_target_is_a_script_again_is_launched_as_it_is(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    inner = executable(tmp_path / "lib" / "chromium-headless-shell")
    script = launcher_script(tmp_path / "empty-bin" / "chromium-headless-shell", f'exec {inner} "$@"\n')

    assert discover_browser(no_playwright_browser).executable == str(script)


@pytest.mark.browser
def test_the_machines_browser_is_the_headless_shell() -> None:
    """This machine has Debian's chromium-headless-shell (CI installs it): runs use it."""
    assert browser_status() == "ok"
    assert discover_browser().kind == "chromium-headless-shell"
    build = browser_build()
    assert build is not None and build.startswith("chromium-headless-shell ")
    executable = discover_browser().executable
    assert executable is not None
    with open(executable, "rb") as started:  # Debian's launcher script is stepped past
        assert started.read(2) != b"#!"


def test_launch_flags_add_no_sandbox_for_root_and_keep_extra_args() -> None:
    config = BrowserConfig(executable="/usr/bin/chromium", args=("--lang=de",))

    options = config.launch_options()

    assert options["executable_path"] == "/usr/bin/chromium" and options["headless"] is True
    assert options["args"][-len(DEFAULT_ARGS) - 1 :] == [*DEFAULT_ARGS, "--lang=de"]
    assert ("--no-sandbox" in options["args"]) == (os.geteuid() == 0)
    assert "--disable-background-networking" in options["args"]


def _process_type(pid: int) -> str:
    try:  # Chromium rewrites its command line as one string, its arguments separated by spaces
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()
    except OSError:
        return "gone"
    types = [arg[len("--type=") :] for arg in args if arg.startswith("--type=")]
    return types[0] if types else "browser"


#: a page drawn as pages are without a GPU: a gradient, text, a shadow, opacity, a 2D transform, a 2D canvas
DRAWN_PAGE = (
    "<body style='background:linear-gradient(90deg,#f00,#00f)'><h1>Hello</h1><p style='transform:"
    "rotate(3deg);box-shadow:4px 4px 8px #000;opacity:.8'>Shadow, opacity, a 2D transform</p>"
    "<canvas id=c width=120 height=60></canvas><script>const g=document.getElementById('c')"
    ".getContext('2d');g.fillStyle='green';g.fillRect(10,10,50,30)</script></body>"
)


async def drawn(
    launches: Sequence[dict[str, Any]], look: Callable[[Any], Awaitable[Any]]
) -> list[tuple[bytes, Any]]:
    """:data:`DRAWN_PAGE`'s screenshot in a browser launched with each of ``launches``, with what ``look``
    found (given the page) while that browser was up."""
    from playwright.async_api import async_playwright

    seen = []
    async with async_playwright() as playwright:
        for options in launches:
            browser = await playwright.chromium.launch(**options)
            try:
                page = await browser.new_page()
                await page.set_content(DRAWN_PAGE)
                seen.append((await page.screenshot(), await look(page)))
            finally:
                await browser.close()
    return seen


@pytest.mark.browser
async def test_a_launched_browser_runs_no_zygote_and_no_gpu_process_and_renders_the_same() -> None:
    """Two processes fewer per run (DEFAULT_ARGS), and a page looks exactly as it does without that."""
    config = discover_browser()

    async def kinds(_: Any) -> set[str]:
        return {_process_type(pid) for pid in descendants(os.getpid())}

    without = [a for a in config.launch_args if a not in ("--no-zygote", "--in-process-gpu")]
    (shot, found), (other_shot, _) = await drawn(
        [config.launch_options(), config.launch_options() | {"args": without}], kinds
    )
    assert "renderer" in found, found
    assert "zygote" not in found and "gpu-process" not in found, found
    assert shot == other_shot


# --- SCENARIOKIT_BROWSER_ARGS ------------------------------------------------------------------------

#: WebGL in a page: what the switch of the example in docs/deployment.md turns off
HAS_WEBGL = "() => document.createElement('canvas').getContext('webgl') !== null"


def test_browser_args_are_split_as_a_shell_splits_them_and_come_after_the_default_flags(
    no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    custom = executable(tmp_path / "custom" / "chrome")
    env = {
        **no_playwright_browser,
        "SCENARIOKIT_BROWSER_PATH": str(custom),
        "SCENARIOKIT_BROWSER_ARGS": "--disable-software-rasterizer  '--user-agent=Probe 1.0' --lang=de",
    }

    config = discover_browser(env)

    wanted = ("--disable-software-rasterizer", "--user-agent=Probe 1.0", "--lang=de")
    assert config.args == wanted
    assert config.launch_args[-len(DEFAULT_ARGS) - 3 :] == [*DEFAULT_ARGS, *wanted]
    found = executable(tmp_path / "empty-bin" / "chromium-headless-shell")  # found on PATH: the same
    env.pop("SCENARIOKIT_BROWSER_PATH")
    assert discover_browser(env) == BrowserConfig(executable=str(found), args=wanted)
    assert discover_browser({**env, "SCENARIOKIT_BROWSER_ARGS": "  "}).args == ()


@pytest.mark.parametrize("switch", sorted(RESERVED_SWITCHES))
def test_a_switch_the_runner_or_playwright_sets_is_refused_with_why(
    switch: str, no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")
    env = {**no_playwright_browser, "SCENARIOKIT_BROWSER_ARGS": f"--lang=de {switch}=x"}

    with pytest.raises(BrowserUnavailable) as refused:
        discover_browser(env)

    assert str(refused.value) == (
        f"SCENARIOKIT_BROWSER_ARGS: {switch} may not be given: {RESERVED_SWITCHES[switch]}"
    )
    assert browser_status(env) == "missing"  # /health says runs cannot launch the browser as configured


NOT_A_SWITCH = "is not a switch: each word must be --name or --name=value"


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("about:blank", f"'about:blank' {NOT_A_SWITCH}"),
        ("--lang=de -x", f"'-x' {NOT_A_SWITCH}"),
        ("--", f"'--' {NOT_A_SWITCH}"),
        ("'--a b=c'", f"'--a b=c' {NOT_A_SWITCH}"),
        ("--lang='de", "cannot be split into switches: No closing quotation"),
    ],
)
def test_words_that_are_not_switches_are_refused_naming_the_word(
    given: str, error: str, no_playwright_browser: dict[str, str], tmp_path: Path
) -> None:
    executable(tmp_path / "empty-bin" / "chromium-headless-shell")

    with pytest.raises(BrowserUnavailable) as refused:
        discover_browser({**no_playwright_browser, "SCENARIOKIT_BROWSER_ARGS": given})

    assert str(refused.value) == f"SCENARIOKIT_BROWSER_ARGS: {error}"


def test_browser_args_with_a_remote_browser_are_refused(no_playwright_browser: dict[str, str]) -> None:
    env = {
        **no_playwright_browser,
        "SCENARIOKIT_BROWSER_WS": "ws://127.0.0.1:3000/pw",
        "SCENARIOKIT_BROWSER_ARGS": "--lang=de",
    }

    with pytest.raises(BrowserUnavailable) as refused:
        discover_browser(env)

    assert "a remote browser (SCENARIOKIT_BROWSER_WS) is launched by its own server" in str(refused.value)


@pytest.mark.browser
async def test_without_the_software_rasterizer_a_page_has_no_webgl_and_renders_the_same() -> None:
    """The example of docs/deployment.md: no WebGL, and every other page looks exactly as it did."""
    config = discover_browser()

    async def webgl(page: Any) -> bool:
        return bool(await page.evaluate(HAS_WEBGL))

    (shot, with_webgl), (other_shot, without_webgl) = await drawn(
        [
            attrs.evolve(config, args=args).launch_options()
            for args in ((), ("--disable-software-rasterizer",))
        ],
        webgl,
    )
    assert (with_webgl, without_webgl) == (True, False)
    assert shot == other_shot


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="session")  # the shared pool's loop
async def test_browser_args_reach_the_browser_of_every_run_of_a_pool(
    run: Runner,
    make_job: JobFactory,
    monkeypatch: pytest.MonkeyPatch,
    marked_sandbox_with: Callable[..., SandboxConfig],
) -> None:
    has_webgl = f"assert await page.evaluate({HAS_WEBGL!r})"
    outcome, _ = await run(make_job(has_webgl))  # the shared pool launches with no switch of its own
    assert outcome.status == "pass", outcome.error

    monkeypatch.setenv("SCENARIOKIT_BROWSER_ARGS", "--disable-software-rasterizer")
    pool = WorkerPool(1, browser=discover_browser(), sandbox=marked_sandbox_with())
    try:
        await pool.start()
        for _ in range(2):  # the pool's first worker, and one it started once the first was taken
            outcome, _ = await run(make_job(f"assert not await page.evaluate({HAS_WEBGL!r})"), pool)
            assert outcome.status == "pass", outcome.error
    finally:
        await pool.close()
