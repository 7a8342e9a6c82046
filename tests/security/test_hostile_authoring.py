"""The hostile steps of ``test_hostile_steps`` sent as authoring execs: a live session is confined like a run.

Each attack is one exec in one live session (the names one binds stay for the next, as in a run), so
the session's worker, its sandbox, its masking and the parent's reading of its replies are attacked
as a run's are; the answers (errors, logs, page) must show what a run's log shows, and no more.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest
from security_support import SECRET, UNLINKED_SECRET, Hostile
from test_hostile_steps import (
    FORGING,
    LEAKING,
    SNOOPING,
    WRITING,
    assert_forgeries_refused,
    assert_nothing_leaked,
    blocked,
    exists,
    remove,
)

from scenariokit.formats.inputs import AuthoringExecInput, AuthoringStartInput, LinkInput
from scenariokit.runner.confinement.sandbox import WORKER_UIDS

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]


def seen(messages: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for message in messages:
        if message.startswith("ATTACK "):
            name, _, value = message[len("ATTACK ") :].partition(": ")
            try:
                found[name] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                found[name] = value
    return found


async def test_hostile_execs_see_nothing_of_the_service_and_leak_nothing(
    hostile: Hostile, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level("DEBUG", logger="scenariokit")
    await hostile.kit.start_runner()
    authoring = hostile.kit.services.authoring
    started = await authoring.start(
        AuthoringStartInput(
            environment_id=hostile.env_id,
            credentials=(LinkInput(credential_id=hostile.credential_id, alias="admin"),),
        )
    )
    messages: list[str] = []
    texts: list[str] = []
    outcomes = []
    for code in [*SNOOPING, *FORGING, *WRITING, *LEAKING]:
        outcome = await authoring.exec(
            started.authoring_id, AuthoringExecInput(code=code, timeout_seconds=30)
        )
        outcomes.append(outcome)
        assert outcome.live, outcome.error
        messages += [line.message for line in outcome.logs]
        texts.append(outcome.error.message if outcome.error else "")
        if outcome.page is not None:
            texts += [outcome.page.url or "", outcome.page.title or "", outcome.page.snapshot or ""]
    look = await authoring.look(started.authoring_id)  # output written straight to the fd may come late
    messages += [line.message for line in look.logs]
    await authoring.end(started.authoring_id)

    found = seen(messages)
    text = "\n".join([*messages, *texts])
    # the last exec failed as the run's last step does: its goto, with its message masked
    last = outcomes[-1]
    assert not last.ok and last.error is not None and "pw=***" in last.error.message
    names = found["os.environ"]
    assert not [name for name in names if name.startswith("SCENARIOKIT_")], names
    assert found["write own dir"] == "written"
    assert found["forged report"] >= 1, "the exec found its pipe to the parent"
    assert not exists(Path(f"/tmp/scenariokit-pwned-{hostile.mark}")), "the parent ran a forged pickle"
    assert_forgeries_refused(caplog.text)
    assert_nothing_leaked(text, SECRET, UNLINKED_SECRET, "service-token-that-must-not-leak")
    for line in ("plain ***", "stdout ***", "stderr ***", "fd1 ***", "fd2 ***", "quote_plus ***"):
        assert line in text, line
    out, err = capfd.readouterr()
    for where in (caplog.text, out, err):
        assert_nothing_leaked(where, SECRET, UNLINKED_SECRET, hostile.key_text)
    planted = Path(f"/tmp/scenariokit-planted-{hostile.mark}")
    if hostile.mode != "bubblewrap":
        remove(planted)
        return
    for name in ("database", "key file"):
        assert blocked(found[name]), (name, found[name])
    assert found["store folder"] == [] or blocked(found["store folder"])
    assert "pyproject.toml" not in found["server cwd"]
    assert found["every process"] == [] and found["pool folders"] == []
    if os.geteuid() == 0:
        assert found["user"] in WORKER_UIDS, found["user"]
    assert not list(hostile.folder.glob("planted")) and not list(hostile.artifacts.glob("planted"))
    assert not exists(planted), "the worker's /tmp is its own"
