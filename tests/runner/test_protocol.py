"""The frames between the pool, its workers and its zygote: typed JSON both ways, and nothing else read.

A worker runs step code, so whatever reaches the pool from it is forged until read: each test here
forges what step code could write to its channel and checks the pool refuses it in words, reading on.
"""

from __future__ import annotations

import json
import linecache
import os
import pickle
import socket
import threading
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scenariokit.domain.authoring import AuthoringReply, PageState
from scenariokit.domain.job import (
    ArtifactSaved,
    CredentialValue,
    LogEvent,
    RunFinished,
    RunJob,
    SessionReleased,
    SessionSaved,
    StepFinished,
    StepJob,
    StepStarted,
    compiled,
)
from scenariokit.domain.model import Backoff, Retries, RunError, RunErrorKind, StepResult, StepStatus
from scenariokit.runner import protocol
from scenariokit.runner.confinement.sandbox import ResourceLimits
from scenariokit.runner.protocol import (
    COMMAND_TYPES,
    REPORT_TYPES,
    AuthoringExec,
    AuthoringLook,
    CancelRun,
    Channel,
    ForkRequest,
    OversizedFrame,
    ReleaseSession,
    RunReport,
    SandboxNamespaces,
    Shutdown,
    StartAuthoring,
    StartRun,
    UnreadableFrame,
    WorkerOptions,
    WorkerReady,
    decode_frame,
    encode_frame,
    prepare_frames,
)
from scenariokit.runner.worker.browser import BrowserConfig

AT = datetime(2026, 11, 26, 13, 52, 10, 123456, tzinfo=UTC)
RUN = uuid.uuid4()
STEP = uuid.uuid4()


def job() -> RunJob:
    step = compiled(
        StepJob(id=STEP, order=1, title="Log in", exec_code="x = 1\nlog('ok')", timeout_seconds=30)
    )
    broken = compiled(StepJob(id=uuid.uuid4(), order=2, title=None, exec_code="def (", timeout_seconds=2.5))
    assert step.compiled_code is not None and broken.syntax_error is not None
    return RunJob(
        run_id=RUN,
        scenario_id=uuid.uuid4(),
        scenario_name="Checkout ✓",
        steps=(step, broken),
        env_name="staging",
        env_data={"url": "http://127.0.0.1:8000", "nested": {"list": [1, 2.5, None, True]}},
        credentials=(CredentialValue(alias="admin", username="alice", secret="s3cret"),),
        snippets={"login": "await page.goto(env.url)"},
        timeout_seconds=60.0,
        save_session=True,
        storage_state={"cookies": [{"name": "sid", "value": "abc"}], "origins": []},
        artifacts_dir=Path("/run/artifacts"),
        trace="on-failure",
        retries=Retries(count=2, backoff=Backoff.EXPONENTIAL, backoff_seconds=1.5),
    )


def result(status: StepStatus = StepStatus.PASS) -> StepResult:
    return StepResult(step_id=STEP, order=1, status=status, title="Log in", started_at=AT, duration_ms=12)


COMMANDS = [
    WorkerOptions(
        browser=BrowserConfig(executable="/usr/bin/chromium", args=("--lang=en",), kind="chromium"),
        session_keepalive=30.0,
        limits=ResourceLimits(memory_mb=512),
        artifacts_dir=Path("/tmp/a"),
    ),
    StartRun(job()),
    CancelRun(RUN),
    ReleaseSession(RUN),
    Shutdown(),
    StartAuthoring(job(), request=1),
    AuthoringExec(request=2, step=job().steps[0], screenshot=True),
    AuthoringLook(request=3),
]

REPORTS = [
    WorkerReady(pid=42),
    RunReport(RUN, LogEvent(at=AT, level="info", message="a lone \ud800 and ✓", step_id=STEP)),
    RunReport(RUN, StepStarted(step_id=STEP, at=AT)),
    RunReport(RUN, StepFinished(result(StepStatus.FAIL))),
    RunReport(RUN, ArtifactSaved(name="step-1.png")),
    RunReport(RUN, SessionSaved(storage_state={"cookies": []}, token=None)),
    RunReport(
        RUN,
        RunFinished(
            status="fail",
            error=RunError(kind=RunErrorKind.TIMEOUT, message="too slow", step_id=STEP),
            step_results=(result(),),
            started_at=AT,
            finished_at=AT,
            marks={"received": AT},
        ),
    ),
    SessionReleased(run_id=RUN, reason="expired"),
    AuthoringReply(
        request=7,
        ok=True,
        error=None,
        page=PageState(url="http://x/", title="T", snapshot="- heading", screenshot=b"\x89PNG\x00\xff"),
        results=(result(),),
    ),
]


@pytest.mark.parametrize("frame", COMMANDS, ids=lambda frame: type(frame).__name__)
def test_every_command_arrives_as_it_was_sent(frame: object) -> None:
    assert decode_frame(encode_frame(frame), (WorkerOptions, *COMMAND_TYPES)) == frame


@pytest.mark.parametrize("frame", REPORTS, ids=lambda frame: type(frame).__name__)
def test_every_report_arrives_as_it_was_sent(frame: object) -> None:
    assert decode_frame(encode_frame(frame), REPORT_TYPES) == frame


def test_a_frame_names_its_type_and_holds_plain_json() -> None:
    data = json.loads(encode_frame(RunReport(RUN, StepStarted(step_id=STEP, at=AT))))
    assert data == {
        "type": "RunReport",
        "run_id": str(RUN),
        "event": {"type": "StepStarted", "step_id": str(STEP), "at": AT.isoformat()},
    }
    step = json.loads(encode_frame(AuthoringExec(request=1, step=job().steps[0])))["step"]
    assert isinstance(step["compiled_code"], str)  # marshal's bytes, as base64


def test_the_zygote_request_is_a_frame_too() -> None:
    request = ForkRequest(
        env={"PATH": "/usr/bin"},
        cwd="/run",
        uid=1000,
        sandbox=SandboxNamespaces(mnt=1, pid=2, ipc=3),
        groups=2,
    )
    assert decode_frame(encode_frame(request), (ForkRequest,)) == request
    with pytest.raises(UnreadableFrame, match="unknown frame type 'ForkRequest'"):
        decode_frame(encode_frame(request), REPORT_TYPES)
    forged = {"type": "ForkRequest", "env": {}, "cwd": "/", "uid": "0"}
    with pytest.raises(UnreadableFrame, match=r"expected int, not str @ \$\.uid"):
        decode_frame(json.dumps(forged).encode(), (ForkRequest,))


def test_nothing_but_an_object_is_a_frame() -> None:
    for data, message in [
        (b"\x80\x04K\x01.", "not a JSON frame"),
        (b"[1, 2]", "a frame is a JSON object, not list"),
        (b'"WorkerReady"', "a frame is a JSON object, not str"),
        (b"[" * 100_000, "not a JSON frame"),
        (b'{"pid": 3}', "unknown frame type (none)"),
        (b'{"type": ["WorkerReady"], "pid": 3}', "unknown frame type (a list that is no type name)"),
    ]:
        with pytest.raises(UnreadableFrame, match=message.replace("(", r"\(").replace(")", r"\)")):
            decode_frame(data, REPORT_TYPES)


class _Exploit:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.system, (f"touch {self.path}",))


def test_a_pickle_is_never_unpickled(tmp_path: Path) -> None:
    planted = tmp_path / "pwned"
    for data in (pickle.dumps(_Exploit(planted)), pickle.dumps(WorkerReady(pid=3))):
        with pytest.raises(UnreadableFrame, match="not a JSON frame"):
            decode_frame(data, REPORT_TYPES)
    assert not planted.exists()


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"type": "Exploit"}, "unknown frame type 'Exploit'"),
        ({"type": "__import__"}, "unknown frame type '__import__'"),
        ({"type": "StartRun", "job": {}}, "unknown frame type 'StartRun'"),  # a command is no report
        ({"type": "WorkerOptions", "browser": {}}, "unknown frame type 'WorkerOptions'"),
        ({"type": "WorkerReady", "pid": 3, "planted": 1}, r"extra fields found \(planted\) @ \$"),
        ({"type": "WorkerReady"}, r"required field missing @ \$\.pid"),
        ({"type": "WorkerReady", "pid": "3"}, r"'WorkerReady' with expected int, not str @ \$\.pid"),
        ({"type": "WorkerReady", "pid": True}, r"expected int, not bool @ \$\.pid"),
        ({"type": "WorkerReady", "pid": 3.5}, r"expected int, not float @ \$\.pid"),
        ({"type": "SessionReleased", "run_id": "not a uuid"}, r"\$\.run_id"),
        ({"type": "SessionReleased", "run_id": 12}, r"\$\.run_id"),
        ({"type": "RunReport", "run_id": str(RUN), "event": {"type": "Exploit"}}, r"\$\.event"),
        ({"type": "RunReport", "run_id": str(RUN), "event": "LogEvent"}, r"\$\.event"),
        (
            {
                "type": "RunReport",
                "run_id": str(RUN),
                "event": {"type": "LogEvent", "at": AT.isoformat(), "level": "info", "message": ["x"]},
            },
            r"expected str, not list @ \$\.event\.message",
        ),
        (
            {
                "type": "RunReport",
                "run_id": str(RUN),
                "event": {"type": "ArtifactSaved", "name": "x", "planted": True},
            },
            r"extra fields found \(planted\) @ \$\.event",
        ),
        (
            {
                "type": "RunReport",
                "run_id": str(RUN),
                "event": {
                    "type": "StepFinished",
                    "result": {"step_id": str(STEP), "order": 1, "status": "won"},
                },
            },
            r"\$\.event\.result\.status",
        ),
        (
            {
                "type": "AuthoringReply",
                "request": 1,
                "ok": True,
                "error": None,
                "results": "abc",
                "page": {"url": None, "title": None, "snapshot": None, "screenshot": "not base64!"},
            },
            r"\$\.page\.screenshot.*\$\.results|\$\.results.*\$\.page\.screenshot",
        ),
        (
            {"type": "AuthoringReply", "request": 1, "ok": "yes", "error": None, "page": None},
            r"expected bool, not str @ \$\.ok",
        ),
    ],
)
def test_a_forged_report_is_refused_in_words(frame: dict[str, object], message: str) -> None:
    with pytest.raises(UnreadableFrame, match=message):
        decode_frame(json.dumps(frame).encode(), REPORT_TYPES)


def test_a_refused_frame_shows_at_most_a_few_problems_and_no_long_text() -> None:
    frame = {"type": "WorkerReady", "pid": 1, **{f"k{i}" * 100: i for i in range(50)}}
    with pytest.raises(UnreadableFrame) as refused:
        decode_frame(json.dumps(frame).encode(), REPORT_TYPES)
    assert len(str(refused.value)) < 1000


@pytest.fixture
def channels() -> Iterator[tuple[Channel, Channel]]:
    ours, theirs = socket.socketpair()
    pool, worker = Channel(ours), Channel(theirs)
    yield pool, worker
    pool.close()
    worker.close()


def test_a_channel_carries_frames_and_reads_on_after_a_refused_one(channels: tuple[Channel, Channel]) -> None:
    pool, worker = channels
    worker.send(WorkerReady(pid=1))
    worker.send_bytes(b'{"type": "Exploit"}')
    worker.send(SessionReleased(run_id=RUN))
    assert pool.receive(REPORT_TYPES, 1024) == WorkerReady(pid=1)
    with pytest.raises(UnreadableFrame, match="Exploit"):
        pool.receive(REPORT_TYPES, 1024)
    assert pool.receive(REPORT_TYPES, 1024) == SessionReleased(run_id=RUN)


def test_an_oversized_frame_is_skipped_unread_and_the_next_one_read(
    channels: tuple[Channel, Channel],
) -> None:
    pool, worker = channels
    big = encode_frame(RunReport(RUN, LogEvent(at=AT, level="info", message="x" * 200_000)))
    sender = threading.Thread(target=lambda: (worker.send_bytes(big), worker.send(WorkerReady(pid=2))))
    sender.start()
    with pytest.raises(OversizedFrame, match=f"a frame of {len(big)} bytes, over the limit of 4096"):
        pool.receive(REPORT_TYPES, 4096)
    assert pool.receive(REPORT_TYPES, 4096) == WorkerReady(pid=2)
    sender.join()


def test_a_frame_cut_short_is_the_end_of_the_channel(channels: tuple[Channel, Channel]) -> None:
    pool, worker = channels
    worker._socket.sendall(b"\x00\x00\x01\x00{")  # a header promising 256 bytes, then one
    worker.close()
    with pytest.raises(EOFError):
        pool.receive(REPORT_TYPES, 1024)


def test_a_burst_of_frames_is_read_ahead_and_every_frame_comes_whole_and_in_order(
    channels: tuple[Channel, Channel],
) -> None:
    # A loud step's lines: thousands of small frames in one burst, one read taking many of them (and
    # the start of the next); a big frame among them, and one over the limit, skipped from what was read.
    pool, worker = channels
    lines = [RunReport(RUN, LogEvent(at=AT, level="info", message=f"line {i}")) for i in range(3000)]
    big = RunReport(RUN, LogEvent(at=AT, level="info", message="y" * 150_000))
    over = encode_frame(RunReport(RUN, LogEvent(at=AT, level="info", message="z" * 5000)))

    def send() -> None:
        for line in lines[:1500]:
            worker.send(line)
        worker.send(big)
        worker.send_bytes(over)
        for line in lines[1500:]:
            worker.send(line)

    sender = threading.Thread(target=send)
    sender.start()
    got = [pool.receive(REPORT_TYPES, 4096) for _ in range(1500)]
    assert pool.receive(REPORT_TYPES, 200_000) == big
    with pytest.raises(OversizedFrame):
        pool.receive(REPORT_TYPES, 4096)
    got += [pool.receive(REPORT_TYPES, 4096) for _ in range(1500)]
    sender.join()
    assert got == lines


def test_only_frame_classes_are_sent() -> None:
    with pytest.raises(TypeError, match="not a frame"):
        encode_frame({"type": "WorkerReady", "pid": 1})


def _generated() -> int:
    """How many functions cattrs wrote so far (each is registered with linecache under its name)."""
    return sum(1 for name in linecache.cache if name.startswith("<cattrs generated"))


def test_after_prepare_frames_a_fork_reads_and_writes_every_frame_with_code_made_before() -> None:
    # The zygote calls it before it forks: its workers write no converter code of their own. Checked in
    # a fork, as a worker is one: its only thread is the one checking, where in this process another
    # test's thread may make code of its own meanwhile (the count is of every converter's code).
    prepare_frames()
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, use of fork()": it only checks
        child = os.fork()
    if child == 0:
        try:
            made = _generated()
            same = all(
                decode_frame(encode_frame(frame), (type(frame),)) == frame for frame in [*COMMANDS, *REPORTS]
            )
            os.write(write, f"{same} {_generated() - made}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        said = answer.read()
    os.waitpid(child, 0)
    assert said == "True 0", "every frame read back as it was, and no converter code made: " + said


def test_an_id_seen_before_is_read_as_the_same_id_and_a_bad_one_still_refused() -> None:
    frame = encode_frame(
        RunReport(run_id=RUN, event=LogEvent(at=AT, level="info", message="m", step_id=STEP))
    )
    first = decode_frame(frame, REPORT_TYPES)
    again = decode_frame(frame, REPORT_TYPES)
    assert (
        first
        == again
        == RunReport(run_id=RUN, event=LogEvent(at=AT, level="info", message="m", step_id=STEP))
    )
    forged = {
        "type": "RunReport",
        "run_id": str(RUN)[:-1] + "g",
        "event": {"type": "ArtifactSaved", "name": "x"},
    }
    with pytest.raises(UnreadableFrame, match=r"\$\.run_id"):
        decode_frame(json.dumps(forged).encode(), REPORT_TYPES)


def test_the_ids_kept_are_bounded_whatever_a_worker_sends() -> None:
    for _ in range(3 * protocol._IDS_KEPT):
        frame = {
            "type": "RunReport",
            "run_id": str(uuid.uuid4()),
            "event": {"type": "ArtifactSaved", "name": "x"},
        }
        decode_frame(json.dumps(frame).encode(), REPORT_TYPES)
    assert len(protocol._IDS) <= protocol._IDS_KEPT
