"""Which runs record a video (docs/browser.md, "Video"): the rule, without a browser."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from scenariokit.domain.job import CredentialValue, LogEvent, RunJob
from scenariokit.runner.worker import execution
from scenariokit.runner.worker.execution import RunExecution
from scenariokit.runner.worker.plugin_hooks import PluginHooks


def _mode(tmp_path: Path, **fields: Any) -> tuple[str, list[str]]:
    job = RunJob(
        run_id=uuid.uuid4(),
        scenario_id=uuid.uuid4(),
        scenario_name="s",
        steps=(),
        env_name="e",
        env_data={},
        artifacts_dir=tmp_path,
        **fields,
    )
    said: list[str] = []

    def report(event: Any) -> None:
        if isinstance(event, LogEvent):
            said.append(event.message)

    run = RunExecution(job, open_browser=_never, hooks=PluginHooks(None), report=report)
    return run._video_mode(), said


async def _never(job: RunJob) -> Any:
    raise AssertionError("no browser in this test")


CREDENTIAL = (CredentialValue(alias="stage", username="u", secret="s3cret"),)


@pytest.mark.parametrize(
    ("fields", "mode", "why"),
    [
        ({"video": "off"}, "off", None),
        ({"video": "on", "credentials": CREDENTIAL}, "on", None),  # asked explicitly: recorded
        ({"video": "retain-on-failure"}, "retain-on-failure", None),
        ({"video": "retain-on-failure", "credentials": CREDENTIAL}, "off", "linked credentials"),
        ({"video": "on", "save_session": True}, "off", "saveSession"),
    ],
)
def test_a_run_with_linked_credentials_records_video_only_when_asked_explicitly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], mode: str, why: str | None
) -> None:
    monkeypatch.setattr(execution, "video_recorder", lambda: None)  # ffmpeg is there: the rule alone
    found, said = _mode(tmp_path, **fields)
    assert found == mode
    if why is not None:
        assert any(why in line for line in said), said


def test_without_ffmpeg_a_run_records_no_video_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "browsers"))  # no ffmpeg there
    found, said = _mode(tmp_path, video="on")
    assert found == "off"
    assert any("no video: Playwright's ffmpeg is not installed" in line for line in said), said
    assert not (tmp_path / "browsers").exists()  # a folder the operator chose is never written to
