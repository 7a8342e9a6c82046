"""Step code asking the pool's driver zygote (``SCENARIOKIT_DRIVER_ZYGOTE``) for drivers it must not get.

The zygote's socket is reachable from every run (the worker asks it, and so does the launcher that is
the worker's Playwright Node). A request says ``run-driver`` and, from a worker, its environment; the
zygote places the driver from the kernel's facts about the process that connected. So a step that
names another sandbox, a pid or another command gets no driver at all, and one that asks properly
gets a driver exactly where it is itself: its own PID and mount namespaces, its own user, no
capability, no_new_privs. A step that made a user namespace of its own (and a mount namespace in it)
is refused: a root zygote, and the driver until it drops to the step's user, only enter namespaces
made by a process privileged on the host; an ordinary user's zygote only a user namespace exactly as
deep below its own as its bubblewrap makes a sandbox's, each level made by its own user (one a step
makes is deeper). In CI's platform lane this runs as an ordinary user too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from security_support import Hostile
from test_hostile_steps import attack, seen

from scenariokit.domain.model import RunStatus
from scenariokit.runner.confinement.driver_zygote import DRIVER_ZYGOTE_ENV

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module", autouse=True)
def driver_zygote_on() -> Iterator[None]:
    """Pools opened in this module run a driver zygote (set before the ``hostile`` kit opens)."""
    patch = pytest.MonkeyPatch()
    patch.setenv(DRIVER_ZYGOTE_ENV, "true")
    yield
    patch.undo()


ASK = """
import json, os, socket
folder = os.environ['PLAYWRIGHT_NODEJS_PATH'].rsplit('/', 1)[0]
def ask(payload):
    zygote = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    zygote.connect(folder + '/socket')
    stdin, feed = os.pipe()
    out, drain = os.pipe()
    socket.send_fds(zygote, [payload], [stdin, drain, 2])
    os.close(stdin)
    os.close(drain)
    zygote.settimeout(10)
    try:
        answer = zygote.recv(8)
    except OSError as exc:
        answer = type(exc).__name__.encode()
    return answer, zygote, feed, out
"""

#: a grandchild that makes a user and a mount namespace of its own, then asks properly from there
IN_OWN_NAMESPACES = (
    ASK
    + """import ctypes
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
    print(f'unshare failed: errno {ctypes.get_errno()}')
else:
    answer = ask(json.dumps(['run-driver']).encode())[0]
    print(answer.decode() or 'refused')
"""
)

#: what the step's child (in the environment Playwright gives its driver, as a launcher has) does
REQUESTING = (
    ASK
    + f"""import subprocess, sys, time
nested = subprocess.run([sys.executable, '-c', {IN_OWN_NAMESPACES!r}], capture_output=True, text=True)
nested = (nested.stdout or nested.stderr[-300:]).strip()
"""
    + """
began = time.monotonic()
idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
idle.connect(folder + '/socket')  # connected, saying nothing: holds the zygote as long as it lets it
other = [pid for pid in os.listdir('/proc') if pid.isdigit()][0]
refused = {}
for name, payload in {
    'another sandbox': json.dumps({'argv': ['run-driver'], 'sandbox': int(other), 'pid': 1}).encode(),
    'another sandbox, with an environment': json.dumps(
        {'argv': ['run-driver'], 'env': ['A=b'], 'sandbox': int(other)}).encode(),
    'an environment that is not one': json.dumps({'argv': ['run-driver'], 'env': 'A=b'}).encode(),
    'a variable without a name': json.dumps({'argv': ['run-driver'], 'env': ['=b']}).encode(),
    'extra argument': json.dumps(['run-driver', '--pid', '1']).encode(),
    'another command': json.dumps(['install', 'chromium']).encode(),
    'nothing': b'x',
}.items():
    answer, zygote, feed, out = ask(payload)
    refused[name] = answer.decode()
    for end in (feed, out):
        os.close(end)
    zygote.close()
answer, zygote, feed, out = ask(json.dumps(['run-driver']).encode())
drivers = {}
given = os.fstat(feed).st_ino  # the driver is the process whose standard input is that pipe
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        if pid == str(os.getpid()) or os.stat(f'/proc/{pid}/fd/0').st_ino != given:
            continue
        fields = dict(line.split(':', 1) for line in open(f'/proc/{pid}/status').read().splitlines())
        drivers[pid] = {
            'status': {k: fields[k].split() for k in ('Uid', 'Gid', 'CapEff', 'CapBnd', 'NoNewPrivs')},
            'same namespaces': all(
                os.stat(f'/proc/{pid}/ns/{ns}').st_ino == os.stat(f'/proc/self/ns/{ns}').st_ino
                for ns in ('pid', 'mnt', 'ipc')
            ),
            'cwd': os.readlink(f'/proc/{pid}/cwd') == os.getcwd(),
        }
    except OSError:
        continue
os.close(feed)  # its standard input ends: the driver exits
os.close(out)
zygote.close()
seen = {'refused': refused, 'answer': answer.decode(), 'drivers': drivers, 'uid': os.getuid(),
        'seconds': time.monotonic() - began, 'nested': nested}
print(repr(seen))
"""
)

REQUESTS = attack(
    "requests",
    f"""
import ast, subprocess, sys
from playwright._impl._driver import get_driver_env
asked = subprocess.run(
    [sys.executable, '-c', {REQUESTING!r}], env=get_driver_env(), capture_output=True, text=True
)
seen = ast.literal_eval(asked.stdout) if asked.returncode == 0 else asked.stderr[-500:]
""",
)


@pytest.mark.platform
async def test_a_step_gets_no_driver_but_its_own_and_that_one_where_it_is(hostile: Hostile) -> None:
    if hostile.started != "zygote":
        pytest.skip("the driver zygote is checked once per sandbox mode")
    pool = (await hostile.kit.start_runner()).pool
    made = await pool.node_cache_made()
    cannot_join = [note for note in pool.left_out if "cannot start a driver in a worker's sandbox" in note]
    if hostile.mode == "bubblewrap" and cannot_join:  # an ordinary user's service (docs/deployment.md)
        assert made is not None and made.zygote is None
        pytest.skip(f"left out here: {cannot_join[0]}")
    assert made is not None and made.zygote is not None, "the pool runs no driver zygote here"
    found: dict[str, object] = {}
    for _ in range(pool.size + 2):  # the spares started before the zygote was up ask no zygote
        result = await hostile.run("zygote", REQUESTS)
        assert result.run.status is RunStatus.PASS, result.run.error
        found = seen(result)["requests"]
        if isinstance(found, dict):  # else this worker's Playwright has no zygote's socket beside it
            break
    assert isinstance(found, dict), found
    assert set(found["refused"].values()) == {""}, found["refused"]  # closed without a driver
    # namespaces the step made itself (it can, here: an unprivileged user may make a user namespace)
    assert found["nested"] == "refused", found["nested"]
    assert found["answer"] == "started\n", found
    assert found["seconds"] < 4, found  # an idle connection held the zygote half a second, not longer
    drivers = found["drivers"]
    assert isinstance(drivers, dict) and len(drivers) == 1, (
        drivers
    )  # visible here: in this run's PID namespace
    for driver in drivers.values():
        assert driver["same namespaces"] and driver["cwd"], driver
        status = driver["status"]
        assert status["Uid"] == [str(found["uid"])] * 4, status
        assert int(status["CapEff"][0], 16) == 0, status
        # a root zygote's driver drops its bounding set, and so does one that entered its sandbox's
        # user namespace (an ordinary user's); another user's unsandboxed one cannot (no CAP_SETPCAP)
        if os.geteuid() == 0 or hostile.mode == "bubblewrap":
            assert int(status["CapBnd"][0], 16) == 0, status
        assert status["NoNewPrivs"] == ["1"], status
