"""Step code as an attacker writes it, run through the real scheduler, worker processes and Chromium.

Each attack is a step that logs what it saw (``ATTACK name: ...``) and swallows its own errors, so one
run carries many attacks. With bubblewrap every attack sees nothing of the service. Without it (``off``)
the environment scrub, the private directories, one run per worker, masking and the limits still hold;
what only the sandbox stops (the store's files, other processes, the file system) is asserted with it.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import glob
import json
import os
import re
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from security_support import SECRET, UNLINKED_SECRET, VICTIM_SECRET, Hostile

from scenariokit.domain.model import RunErrorKind, RunStatus
from scenariokit.runner.confinement.cgroups import available_controllers
from scenariokit.runner.confinement.sandbox import WORKER_UIDS
from scenariokit.runner.protocol import MAX_REPORT_BYTES

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]


def attack(name: str, body: str) -> str:
    """A step running ``body`` (which sets ``seen``) and logging what it saw or why it was stopped."""
    return (
        "try:\n"
        + textwrap.indent(textwrap.dedent(body).strip(), "    ")
        + "\nexcept BaseException as exc:\n"
        + "    seen = 'blocked: ' + type(exc).__name__ + ': ' + str(exc)\n"
        + f"print('ATTACK {name}:', repr(seen))\n"
    )


def seen(result: Any) -> dict[str, Any]:
    """What each attack logged, by name (its value as the step printed it)."""
    found = {}
    for line in result.logs.items:
        if line.message.startswith("ATTACK "):
            name, _, value = line.message[len("ATTACK ") :].partition(": ")
            try:
                found[name] = ast.literal_eval(value)
            except (ValueError, SyntaxError):  # masked output need not be a literal any more
                found[name] = value
    return found


def blocked(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("blocked: ")


def every_text(result: Any) -> str:
    """The run log, the step errors and the run error: everything a run shows."""
    run = result.run
    parts = [line.message for line in result.logs.items]
    parts += [step.error or "" for step in run.step_results]
    parts.append(run.error.message if run.error else "")
    return "\n".join(parts)


def encodings(secret: str) -> list[str]:
    """The forms of a secret the contract names, computed here independently of the masker."""
    return [
        secret,
        quote(secret),
        quote(secret, safe=""),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        repr(secret)[1:-1],
        base64.b64encode(secret.encode()).decode(),
        secret[: len(secret) // 2 + 1],  # a split line shows no part long enough to read
        secret[len(secret) // 2 - 1 :],
    ]


def exists(path: Path) -> bool:
    return path.exists()


async def gone_soon(path: Path, seconds: float = 15.0) -> bool:
    """Whether ``path`` is gone within ``seconds``: a worker's folder goes once the worker is stopped,
    after its run's outcome is stored, so a loaded machine may still be removing it."""
    deadline = time.monotonic() + seconds
    while exists(path) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not exists(path)


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def assert_nothing_leaked(text: str, *secrets: str) -> None:
    for secret in secrets:
        for form in encodings(secret):
            assert form not in text, f"{form!r} leaked"


# --- what the service holds -------------------------------------------------------------------------

SNOOPING = [
    attack("database", "seen = open(helpers.env['db'], 'rb').read(64)"),
    attack("key file", "seen = open(helpers.env['key']).read()"),
    attack("store folder", "import os\nseen = sorted(os.listdir(helpers.env['folder']))"),
    attack("server cwd", "import os\nseen = sorted(os.listdir(helpers.env['cwd']))"),
    attack(
        "pid 1 environ",
        "data = open('/proc/1/environ', 'rb').read().decode('latin-1')\n"
        "seen = sorted(v.split('=')[0] for v in data.split('\\0') if v)",
    ),
    attack(
        "parent environ",
        "import os\ndata = open(f'/proc/{os.getppid()}/environ', 'rb').read().decode('latin-1')\n"
        "seen = sorted(v.split('=')[0] for v in data.split('\\0') if v)",
    ),
    attack(
        "parent cmdline",
        "import os\nseen = open(f'/proc/{os.getppid()}/cmdline', 'rb').read().decode('latin-1')",
    ),
    attack(
        "every process",
        "import os\nseen = []\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        data = open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except OSError:\n"
        "        continue\n"
        "    if b'SCENARIOKIT_' in data:\n"
        "        seen.append(pid)",
    ),
    attack("os.environ", "import os\nseen = sorted(os.environ)"),
    attack("pool folders", "import glob\nseen = glob.glob('/tmp/scenariokit-pool-*/*')"),
    attack("user", "import os\nseen = os.getuid()"),
]

ESCALATING = [
    # a worker holds no capability (one forked into an ordinary user's sandbox entered its user
    # namespace, where it had them all: docs/security.md), so it cannot lift the mounts hiding the host
    attack(
        "capabilities",
        "seen = {line.split(':')[0]: line.split(':')[1].strip() for line in open('/proc/self/status')\n"
        "        if line.startswith(('Cap', 'NoNewPrivs'))}",
    ),
    attack(
        "unmount hidden",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "done = libc.umount2(helpers.env['cwd'].encode(), 2)\n"
        "seen = [done, ctypes.get_errno(), 'pyproject.toml' in os.listdir(helpers.env['cwd'])]",
    ),
]

FORGING = [
    # frames the scheduler must refuse, each logged: a pickle that would run code were it unpickled,
    # a type no frame has, an unknown field, a field of the wrong type, a frame over the size limit
    attack(
        "forged report",
        "import gc, json\nfrom scenariokit.runner.protocol import MAX_REPORT_BYTES, Channel\n"
        "pickled = b\"cos\\nsystem\\n(S'touch /tmp/scenariokit-pwned-\" + helpers.env['mark'].encode()"
        ' + b"\'\\ntR."\n'
        "frames = [pickled, json.dumps({'type': 'Exploit', 'cmd': 'touch'}).encode(),\n"
        "          json.dumps({'type': 'WorkerReady', 'pid': 1, 'planted': 1}).encode(),\n"
        "          json.dumps({'type': 'WorkerReady', 'pid': 'one'}).encode(),\n"
        "          json.dumps({'type': 'RunReport', 'run_id': 'x', 'event': {'type': 'Exploit'}}).encode(),\n"
        "          b' ' * (MAX_REPORT_BYTES + 1)]\n"
        "channels = [o for o in gc.get_objects() if isinstance(o, Channel)]\n"
        "for channel in channels:\n"
        "    for frame in frames:\n"
        "        channel.send_bytes(frame)\n"
        "del frames\n"
        "seen = len(channels)",
    ),
]

#: what the scheduler's log says of each forged frame
REFUSED = (
    "not a JSON frame",
    "unknown frame type 'Exploit'",
    "extra fields found (planted)",
    "expected int, not str @ $.pid",
    "a frame of type 'RunReport' with",
    f"over the limit of {MAX_REPORT_BYTES}",
)


def assert_forgeries_refused(log: str) -> None:
    """Each forged frame was refused and logged, naming the worker."""
    for refusal in REFUSED:
        assert re.search(
            rf"unreadable report from worker \d+( \(run [0-9a-f-]+\))?: .*{re.escape(refusal)}", log
        ), refusal


WRITING = [
    attack(
        "write artifacts",
        "import os\nos.makedirs(helpers.env['artifacts'], exist_ok=True)\n"
        "open(os.path.join(helpers.env['artifacts'], 'planted'), 'w').write('x')\nseen = 'written'",
    ),
    attack(
        "write store folder",
        "import os\nopen(os.path.join(helpers.env['folder'], 'planted'), 'w').write('x')\nseen = 'written'",
    ),
    attack(
        "write host tmp",
        "open('/tmp/scenariokit-planted-' + helpers.env['mark'], 'w').write('x')\nseen = 'written'",
    ),
    attack("write own dir", "open('own-file', 'w').write('mine')\nseen = 'written'"),
]

LEAKING = [
    "from urllib.parse import quote, quote_plus\nimport base64, json\n"
    "s = helpers.credentials['admin'].secret\n"
    "print('plain', s)\nprint('quote', quote(s), quote(s, safe=''))\nprint('quote_plus', quote_plus(s))\n"
    "print('json', json.dumps({'pw': s}))\nprint('repr', repr(s))\n"
    "print('b64', base64.b64encode(s.encode()).decode())\n"
    "print('basic', base64.b64encode(('alice:' + s).encode()).decode())\n"
    "print('split', s[:10])\nprint(s[10:], 'end of split')\n"
    "log(f'log {s!r}', 'warning')",
    "import os, sys\ns = helpers.credentials['admin'].secret\n"
    "sys.stdout.write('stdout ' + s + '\\n'); sys.stdout.flush()\n"
    "sys.stderr.write('stderr ' + s + '\\n'); sys.stderr.flush()\n"
    "os.write(1, ('fd1 ' + s + '\\n').encode())\nos.write(2, ('fd2 ' + s + '\\n').encode())\n"
    "print('to stderr', s, file=sys.stderr)",
    # an ordinary failure: the URL in Playwright's message carries the secret URL-encoded
    "await page.goto('http://127.0.0.1:9/login?pw=' + helpers.credentials['admin'].secret, timeout=5000)",
]


@pytest.mark.platform
async def test_hostile_steps_see_nothing_of_the_service_and_leak_nothing(
    hostile: Hostile, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level("DEBUG", logger="scenariokit")
    result = await hostile.run(
        "hostile", *SNOOPING, *ESCALATING, *FORGING, *WRITING, *LEAKING, credential=hostile.credential_id
    )

    found = seen(result)
    text = every_text(result)
    sandboxed = hostile.mode == "bubblewrap"
    # the run failed where it should: the last step's goto, with its message masked
    assert result.run.status is RunStatus.FAIL
    assert result.run.error is not None and result.run.error.kind is RunErrorKind.ERROR
    assert (
        result.run.error.message
        and "net::ERR_" in result.run.error.message
        and "pw=***" in result.run.error.message
    )
    # never, sandbox or not: the service's environment, the secret key, another tenant's secret
    names = found["os.environ"]
    assert not [name for name in names if name.startswith("SCENARIOKIT_")], names
    # (the driver's compile cache and its launcher, for a worker started once the pool made them:
    # read-only paths, docs/deployment.md "The driver zygote")
    assert set(names) <= {"HOME", "LANG", "PATH", "PWD", "TMPDIR", "PYTHONDONTWRITEBYTECODE",
                          "PYTHONUNBUFFERED", "LC_ALL", "LC_CTYPE", "TZ",
                          "NODE_COMPILE_CACHE", "PLAYWRIGHT_NODEJS_PATH"}  # fmt: skip
    assert found["write own dir"] == "written"
    assert found["forged report"] >= 1, "the step found its pipe to the scheduler"
    assert not exists(Path(f"/tmp/scenariokit-pwned-{hostile.mark}")), "the scheduler ran a forged pickle"
    assert_forgeries_refused(caplog.text)
    assert_nothing_leaked(text, SECRET, UNLINKED_SECRET, "service-token-that-must-not-leak")
    for line in ("plain ***", "stdout ***", "stderr ***", "fd1 ***", "fd2 ***", "quote_plus ***"):
        assert line in text, line
    assert 'json {"pw": "***"}' in text and "basic YWxpY2U6***" in text
    # nothing of it in the server's own log or output
    out, err = capfd.readouterr()
    for where in (caplog.text, out, err):
        assert_nothing_leaked(where, SECRET, UNLINKED_SECRET, hostile.key_text)
    planted = Path(f"/tmp/scenariokit-planted-{hostile.mark}")
    if not sandboxed:
        remove(planted)
        return
    for name in ("database", "key file"):
        assert blocked(found[name]), (name, found[name])
    assert_nothing_leaked(text, hostile.key_text)
    if sandboxed:
        assert found["store folder"] == [] or blocked(found["store folder"])
        assert "pyproject.toml" not in found["server cwd"]
        for name in ("pid 1 environ", "parent environ"):
            assert not [n for n in found[name] if n.startswith("SCENARIOKIT_")], found[name]
        assert found["every process"] == []
        assert found["pool folders"] == []
        # none held, and none an exec could bring (no_new_privs: set-user-id and file capabilities
        # are ignored; the bounding set is emptied too where the zygote forked the worker)
        held = found["capabilities"]
        assert [int(held[kind], 16) for kind in ("CapInh", "CapPrm", "CapEff", "CapAmb")] == [0] * 4, held
        assert held["NoNewPrivs"] == "1"
        if hostile.started == "zygote":
            assert int(held["CapBnd"], 16) == 0, held
        unmounted = found["unmount hidden"]
        assert unmounted[0] == -1 and unmounted[2] is False, unmounted
        if os.geteuid() == 0:  # a user id of its own, no name on the host, never root
            assert found["user"] in WORKER_UIDS, found["user"]
        else:
            assert found["user"] == os.geteuid()
        # writes into hidden folders land in the sandbox's own empty mounts, never on the host
        assert not list(hostile.folder.glob("planted")) and not list(hostile.artifacts.glob("planted"))
        assert not exists(planted), "the worker's /tmp is its own"


async def test_a_run_that_patches_the_masker_cannot_unmask_itself_or_a_later_run(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="scenariokit")
    patcher = await hostile.run(
        "patch the masker",
        "import scenariokit.runner.worker.stepcode as stepcode\n"
        "import scenariokit.runner.worker.masking as masking\n"
        "import scenariokit.runner.protocol as protocol, scenariokit.runner.worker.process as worker\n"
        "stepcode.mask_secrets = masking.mask_text = lambda text, secrets: text\n"
        "protocol.mask_event = worker.mask_event = lambda event, secrets: event\n"
        "import os\nopen('note.txt', 'w').write('left for the next run')\n"
        "print('cwd', os.getcwd())\nprint('mine', helpers.credentials['admin'].secret)",
        credential=hostile.credential_id,
    )
    victim = await hostile.run(
        "victim",
        attack("previous run file", "import os\nseen = os.path.exists('note.txt')"),
        "print('victim', helpers.credentials['admin'].secret)",
        credential=hostile.victim_credential_id,
    )

    assert patcher.run.status is RunStatus.PASS and victim.run.status is RunStatus.PASS
    assert "mine ***" in every_text(patcher) and "victim ***" in every_text(victim)
    assert_nothing_leaked(every_text(patcher), SECRET)
    assert_nothing_leaked(every_text(victim), VICTIM_SECRET, SECRET)
    assert_nothing_leaked(caplog.text, SECRET, VICTIM_SECRET)
    assert seen(victim)["previous run file"] is False
    cwd = next(line.message[4:] for line in patcher.logs.items if line.message.startswith("cwd "))
    if hostile.mode == "off":  # the same path inside every sandbox; outside, the directory is gone
        assert await gone_soon(Path(cwd))


# --- limits -----------------------------------------------------------------------------------------

BOMBS = {
    "memory": ("data = bytearray(8 * 1024**3)", "memory limit of 2048 MiB"),
    "file size": (
        "with open('big', 'wb') as f:\n    for _ in range(160):\n        f.write(bytes(64 * 1024**2))",
        "file size limit of 1024 MiB",
    ),
    "sparse file": (
        "with open('sparse', 'wb') as f:\n    f.seek(10 * 1024**3)\n    f.write(b'x')",
        "file size limit",
    ),
    "processes": (
        "import os, time\nfor _ in range(100000):\n    if os.fork() == 0:\n        time.sleep(120)\n"
        "        os._exit(0)",
        "process limit",
    ),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
async def test_a_bomb_fails_its_own_run_naming_the_limit_and_the_next_run_passes(
    hostile: Hostile, bomb: str
) -> None:
    if (
        bomb == "processes"
        and hostile.mode == "off"
        and os.geteuid() == 0
        and "pids" not in available_controllers()
    ):
        pytest.skip(
            "RLIMIT_NPROC does not bind root, and this machine gives no pids control group: without the "
            "sandbox the worker runs as root here"
        )
    code, limit = BOMBS[bomb]

    result = await hostile.run(f"bomb {bomb}", "print('before')", code, "print('never')")

    assert result.run.status is RunStatus.FAIL
    assert result.run.error is not None and limit in result.run.error.message, result.run.error
    assert [step.status.value for step in result.run.step_results] == ["pass", "fail", "skipped"]
    after = await hostile.run("after the bomb", "await page.goto(helpers.getEnvUrl())\nprint('fine')")
    assert after.run.status is RunStatus.PASS, after.run.error


#: fills the renderer with 64 MiB blocks until there are 4 GiB: the browser, not the worker, allocates
BROWSER_BOMB = (
    "await page.goto(helpers.getEnvUrl())\n"
    'await page.evaluate("""() => { const kept = []; for (let i = 0; i < 64; i++) {\n'
    "  const block = new Uint8Array(64 * 1024 * 1024); block.fill(i + 1); kept.push(block); }\n"
    '  return kept.length; }""")'
)


async def test_a_browser_memory_bomb_fails_its_own_run_naming_the_limit(hostile: Hostile) -> None:
    """The run's control group holds the browser too: past the memory limit the kernel kills inside
    the run's group only, and the run says which limit it reached."""
    if "memory" not in available_controllers():
        pytest.skip("this machine gives this process no memory control group: only rlimits apply")

    result = await hostile.run("browser bomb", "print('before')", BROWSER_BOMB, "print('never')")

    assert result.run.status is RunStatus.FAIL
    assert result.run.error is not None
    assert "memory limit of 2048 MiB" in result.run.error.message, result.run.error
    failed = result.run.step_results[1]
    assert failed.status.value == "fail" and failed.error and "memory limit" in failed.error
    after = await hostile.run("after the bomb", "await page.goto(helpers.getEnvUrl())\nprint('fine')")
    assert after.run.status is RunStatus.PASS, after.run.error


async def test_run_directories_are_removed_once_their_workers_are_gone(hostile: Hostile) -> None:
    import asyncio

    from scenariokit.runner.parent.executor import WARM_SPARES

    warm = 1 + WARM_SPARES  # the workers waiting for the next runs (the kit has one worker)
    spinning = await hostile.run(
        "killed at its limit", "open('left.txt', 'w').write('x')\nwhile True:\n    pass", step_timeout=2
    )
    assert spinning.run.error is not None and spinning.run.error.kind is RunErrorKind.TIMEOUT
    pool = (await hostile.kit.start_runner()).pool
    # only this pool's directory: other tests' pools in this process keep warm workers of their own
    own_runs = f"{pool._pool_dir}/run-*"
    run_dirs = glob.glob(own_runs)
    for _ in range(300):  # a loaded machine may take a while to kill and clean up
        run_dirs = glob.glob(own_runs)
        if len(run_dirs) <= warm:  # the warm workers waiting for the next runs
            break
        await asyncio.sleep(0.1)
    assert len(run_dirs) <= warm, run_dirs
    assert not glob.glob(f"{own_runs}/left.txt")
