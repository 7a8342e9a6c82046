"""``scenariokit run`` on real scenario files against a page on 127.0.0.1: exit codes, output, JUnit XML."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from scenariokit.cli import build_parser, main
from scenariokit.cli.run import cmd_run


@pytest.mark.browser
def test_all_passing_exits_0_with_live_progress_on_a_terminal_and_a_junit_report(files: Path) -> None:
    report = files / "reports" / "junit.xml"
    args = build_parser().parse_args(
        ["run", str(files / "passing.scenario.yaml"), "--env", "local", "--junit-xml", str(report),
         "--artifacts", str(files / "artifacts"), "--workers", "1"]
    )  # fmt: skip
    screen = io.StringIO()

    status = cmd_run(args, console=Console(file=screen, force_terminal=True, width=120))

    assert status == 0
    shown = screen.getvalue()
    assert "\x1b[" in shown and "all scenarios" in shown, "live bars on a terminal"
    assert "1 passed, 0 failed" in shown
    suites = ET.parse(report).getroot()
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("1", "0", "0")
    (case,) = suites.iter("testcase")
    assert case.get("name") == "greets" and case.get("classname") == "passing"
    assert float(case.get("time", "")) > 0
    assert case.find("failure") is None and case.find("error") is None
    revision = case.find("properties/property[@name='revision']")
    assert revision is not None and revision.get("value") == "7", "the file's revision: 7"


@pytest.mark.browser
def test_failures_exit_1_with_plain_lines_reports_a_table_and_junit_counts(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = files / "junit.xml"

    status = main(
        ["run", str(files / "passing.scenario.yaml"), str(files / "mixed.scenario.yaml"),
         "--env", str(files / "local.env.yaml"), "--junit-xml", str(report),
         "--artifacts", str(files / "art"), "--workers", "1"]
    )  # fmt: skip

    assert status == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("PASS greets revision 7 (") for line in lines), "plain lines, revision too"
    farewell = "step 2 \"look for the farewell\": Locator expected to have text 'Goodbye' (line 2)"
    assert any(line.startswith("FAIL says goodbye (") and line.endswith(farewell) for line in lines)
    assert "\x1b[" not in out
    assert 'in step 2 "look for the farewell", line 2:' in lines
    assert '    await expect(page.locator("h1")).to_have_text("Goodbye", timeout=500)' in lines
    assert 'in step 1 "divide", line 1:' in lines and "    print(1 / 0)" in lines
    assert "1 passed, 2 failed" in out and "failing step" in out, "the final table and count"

    suites = ET.parse(report).getroot()
    assert [s.get("name") for s in suites.iter("testsuite")] == ["passing", "mixed"]
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suites.iter("testcase")}
    failure = cases["says goodbye"].find("failure")
    assert failure is not None and failure.get("type") == "assertion"
    assert failure.get("message") == farewell and "screenshot: " in (failure.text or "")
    error = cases["crashes"].find("error")
    assert error is not None and "ZeroDivisionError" in (error.get("message") or "")
    shot = cases["says goodbye"].find("properties/property[@name='screenshot']")
    assert shot is not None and Path(shot.get("value", "")).read_bytes().startswith(b"\x89PNG")
    system_out = cases["says goodbye"].findtext("system-out") or ""
    assert "info: looking for the farewell" in system_out and "[[ATTACHMENT|" in system_out
    assert all(float(case.get("time", "")) >= 0 for case in cases.values())
    assert float(suites.get("time", "")) > 0


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["missing.scenario.yaml"], "cannot read it"),
        (["broken.scenario.yaml"], "malformed YAML"),
        (["passing.scenario.yaml", "--env", "nowhere"], "no environment named 'nowhere'"),
        (["passing.scenario.yaml", "--env", "missing.env.yaml"], "no such environment file"),
        (["mixed.scenario.yaml"], "names no environment"),
        (["local.env.yaml"], "no scenarios in"),
    ],
    ids=["missing-file", "malformed-yaml", "unknown-env", "missing-env-file", "no-env", "no-scenarios"],
)
def test_input_errors_exit_2_and_run_nothing(
    files: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], says: str
) -> None:
    (files / "broken.scenario.yaml").write_text("kind: scenario\nname: [unclosed\n")
    argv = ["run", *[str(files / a) if a.endswith(".yaml") else a for a in arguments]]

    status = main([*argv, "--artifacts", str(files / "art")])

    assert status == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("scenariokit run: ") and says in captured.err
    assert not (files / "art").exists(), "nothing ran"


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("SCENARIOKIT_SANDBOX", "bogus", "must be one of auto, bubblewrap, off"),
        ("SCENARIOKIT_RUN_MEMORY_MB", "12", "at least 64"),
        ("SCENARIOKIT_DRIVER_ZYGOTE", "maybe", "must be one of true, false"),
        ("SCENARIOKIT_BROWSER_ARGS", "--headless=new", "--headless may not be given"),
    ],
)
def test_a_bad_sandbox_or_browser_variable_is_a_usage_error_naming_it(
    files: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    says: str,
) -> None:
    """The pool reads these itself; a local run checks them first, so a bad one names its variable and
    starts no browser (a sandbox variable used to surface as a bare ValueError from inside the pool,
    the browser's switches as every run failing)."""
    monkeypatch.setenv(variable, value)

    status = main(
        ["run", str(files / "passing.scenario.yaml"), "--env", "local", "--artifacts", str(files / "art")]
    )

    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scenariokit run: {variable}={value!r} is invalid: ") and says in err, err
    assert not (files / "art").exists(), "nothing ran"


def test_a_bad_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["run", "x.scenario.yaml", "--workers", "0"])

    assert stopped.value.code == 2 and "--workers" in capsys.readouterr().err


def test_run_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = capsys.readouterr().out

    assert "examples:" in shown and "scenariokit run checks/*.scenario.yaml --env staging" in shown
    assert "exit status: 0 every scenario passed, 1 a scenario failed, 2 usage or input error" in shown
    for option in ("--env NAME|FILE", "--workers N", "--junit-xml PATH", "--artifacts DIR"):
        assert option in shown


@pytest.mark.browser
def test_server_settings_do_not_reach_a_local_run(
    files: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A local run reads only its own variables: a server's database or a bad port changes nothing."""
    monkeypatch.setenv("SCENARIOKIT_DATABASE_URL", f"sqlite:///{files / 'server' / 'scenariokit.db'}")
    monkeypatch.setenv("SCENARIOKIT_PORT", "not-a-port")
    monkeypatch.chdir(files)

    status = main(["run", "mixed.scenario.yaml", "--env", "local.env.yaml", "--workers", "1"])

    assert status == 1, capsys.readouterr().err
    assert list((files / "artifacts").glob("*/step-2.png")), "screenshots go to ./artifacts"
    assert not (files / "server").exists()
