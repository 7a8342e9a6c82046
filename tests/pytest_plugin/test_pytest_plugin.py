"""The pytest plugin, run on temporary projects with pytester: collection, outcomes, reports, xdist."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (zombies, already dead, are left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_scenario_files_are_collected_one_test_per_scenario_without_a_browser(
    scenario_files: pytest.Pytester,
) -> None:
    scenario_files.makefile(".scenario.yaml", broken="kind: scenario\nname: [unclosed\n")

    result = scenario_files.runpytest_inprocess("--collect-only", "-q")

    result.stdout.fnmatch_lines(
        [
            "crash.scenario.yaml::crashes",
            "home.scenario.yaml::greets",
            "home.scenario.yaml::says goodbye",
            "homeless.scenario.yaml::homeless",
            "*broken.scenario.yaml: documents[[]0[]] (line 2): malformed YAML*",
        ]
    )
    assert result.parseoutcomes()["errors"] == 1
    assert "Traceback" not in result.stdout.str()


def test_a_bad_sandbox_variable_stops_the_session_naming_it(
    scenario_files: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCENARIOKIT_SANDBOX", "bogus")

    result = scenario_files.runpytest_inprocess("-q")

    assert result.ret == pytest.ExitCode.INTERRUPTED, "collection stops, as for a broken file"
    shown = result.stdout.str() + result.stderr.str()
    assert (
        "scenariokit: SCENARIOKIT_SANDBOX='bogus' is invalid: must be one of auto, bubblewrap, off" in shown
    )
    assert "Traceback" not in shown and "raise " not in shown, "a line naming it, not a traceback"
    assert result.parseoutcomes() == {"errors": 3}, "no scenario ran"


@pytest.mark.browser
def test_outcomes_report_the_failing_step_its_code_line_message_and_screenshot(
    scenario_files: pytest.Pytester, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"

    result = scenario_files.runpytest_inprocess(
        "--scenariokit-env", "local", "--scenariokit-artifacts", str(artifacts), "-rA"
    )

    result.assert_outcomes(passed=1, failed=2, errors=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*_ scenario: says goodbye _*",
            "scenario 'says goodbye' failed (assertion)",
            'in step 2 "look for the farewell", line 2:',
            '    await expect(page.locator("h1")).to_have_text("Goodbye", timeout=500)',
            "  Locator expected to have text 'Goodbye' (line 2)",
            f"screenshot: {artifacts}*step-2.png",
            "*Captured scenariokit log call*",
            "info: looking for the farewell",
        ]
    )
    result.stdout.fnmatch_lines(
        ["scenario 'crashes' failed (error)", 'in step 1 "divide", line 2:', "    total = total / 0"]
    )
    result.stdout.fnmatch_lines(["*homeless.scenario.yaml: no environment named 'local'*"])
    screenshot = next(line for line in out.splitlines() if line.startswith("screenshot: "))[12:]
    assert Path(screenshot).read_bytes().startswith(b"\x89PNG")
    assert "Traceback" not in out and "pytest_plugin.py" not in out, "no traceback of the plugin"
    assert "During handling of the above exception" not in out, "a setup error is reported once"


@pytest.mark.browser
@pytest.mark.platform
def test_the_fixture_runs_files_from_sync_and_async_tests(scenario_files: pytest.Pytester) -> None:
    scenario_files.makepyfile(
        test_with_fixture="""
        import pytest

        def test_sync(scenariokit):
            result = scenariokit.run_yaml("home.scenario.yaml", env="local", scenario="greets")
            result.assert_passed()
            assert [o.name for o in result] == ["greets"] and result["greets"].duration_seconds > 0

        async def test_async_with_env_data(scenariokit):
            url = await scenariokit.acall(lambda kit: _url_of_local(kit))
            result = await scenariokit.arun_yaml("home.scenario.yaml", env={"url": url})
            assert result["greets"].passed and not result["says goodbye"].passed
            failed = result["says goodbye"]
            assert failed.failed_step.order == 2 and failed.failed_step.line == 2
            assert failed.screenshot.is_file()
            with pytest.raises(AssertionError, match="look for the farewell"):
                result.assert_passed()

        async def _url_of_local(kit):
            page = await kit.environments.list()
            return next(env.data["url"] for env in page.items if env.name == "local")
        """
    )

    result = scenario_files.runpytest_inprocess(
        "test_with_fixture.py", "--scenariokit-workers", "2", "--scenariokit-artifacts", "artifacts"
    )

    result.assert_outcomes(passed=2)


@pytest.mark.browser
def test_it_runs_under_xdist_and_leaves_no_browser_behind(
    scenario_files: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"scenariokit-xdist-{uuid.uuid4().hex}"
    monkeypatch.setenv("SCENARIOKIT_TEST_PROCESS_MARK", marker)
    artifacts = tmp_path / "shared-artifacts"
    for spare in ("homeless", "crash"):
        os.remove(scenario_files.path / f"{spare}.scenario.yaml")

    result = scenario_files.runpytest_subprocess(
        "-n", "2", "-v", "--scenariokit-env", "local", "--scenariokit-artifacts", str(artifacts),
        "-p", "no:schemathesis", "-p", "no:hypothesispytest",  # unrelated, and slow to import thrice
    )  # fmt: skip

    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*gw*PASSED*home.scenario.yaml::greets*"])
    # On CI (CI=true) pytest repeats a failure's whole text in the short summary: count paths, not lines.
    shots = sorted({Path(line[12:]) for line in result.outlines if line.startswith("screenshot: ")})
    assert len(shots) == 1 and shots[0].is_file() and shots[0].parent.parent == artifacts
    assert uuid.UUID(shots[0].parent.name), "each run writes into a folder of its own, named by its id"
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == [], "a browser or worker outlived the session"
