"""Step code attacking what a worker forked by the pool's zygote might inherit from it.

The zygote (docs/security.md, "Workers forked from a zygote") is a process of the service's user
outside any sandbox that forks every worker. A forked worker must hold nothing of it: no capability,
no way back into the host's namespaces, no descriptor of its control socket, no view of it; and a
run that tampers with everything it can reach leaves the next run's worker as clean as the first.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from security_support import Hostile
from test_hostile_steps import attack, blocked, seen

from process_checks import skip_if_left_out
from scenariokit.domain.model import RunStatus
from scenariokit.runner.confinement.sandbox import WORKER_UIDS

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

FORKED = [
    attack(
        "status",
        "fields = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())\n"
        "seen = {k: fields[k].split() for k in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff',"
        " 'CapBnd', 'CapAmb', 'NoNewPrivs')}",
    ),
    attack(
        "processes",
        "import os\nseen = {}\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    try:\n"
        "        seen[int(pid)] = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()\n"
        "    except OSError:\n"
        "        pass",
    ),
    attack(
        "setns",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nseen = {}\n"
        "for pid in ('1', 'self'):\n"
        "    for ns in ('mnt', 'pid', 'ipc', 'user', 'net'):\n"
        "        try:\n"
        "            fd = os.open(f'/proc/{pid}/ns/{ns}', os.O_RDONLY)\n"
        "        except OSError as exc:\n"
        "            seen[pid + ' ' + ns] = 'open: ' + exc.strerror\n"
        "            continue\n"
        "        ok = libc.setns(fd, 0) == 0\n"
        "        seen[pid + ' ' + ns] = 'joined' if ok else os.strerror(ctypes.get_errno())\n"
        "        os.close(fd)\n"
        "if hasattr(os, 'setns'):\n"
        "    seen['os.setns'] = 'present'",
    ),
    attack(
        "descriptors",
        "import os, socket, stat\nseen = {}\n"
        "for name in os.listdir('/proc/self/fd'):\n"
        "    fd = int(name)\n"
        "    try:\n"
        "        target = os.readlink(f'/proc/self/fd/{fd}')\n"
        "        mode = os.fstat(fd).st_mode\n"
        "    except OSError:\n"
        "        continue\n"
        "    kind = target if target.startswith('anon') else target.split(':')[0]\n"
        "    kind = 'dir' if stat.S_ISDIR(mode) else kind\n"
        "    if kind == 'anon_inode:[pidfd]':  # asyncio (3.12 and later) watches its own children so\n"
        "        info = open(f'/proc/self/fdinfo/{fd}').read().splitlines()\n"
        "        info = dict(line.split(':', 1) for line in info)\n"
        "        pid = int(info['Pid'])\n"
        "        stat_line = open(f'/proc/{pid}/stat').read() if pid > 0 else ') S 0'\n"
        "        parent = int(stat_line.rsplit(')', 1)[1].split()[1])\n"
        "        kind = 'pidfd of its own child' if parent == os.getpid() else kind\n"
        "    if stat.S_ISSOCK(mode):\n"
        "        with socket.socket(fileno=os.dup(fd)) as s:\n"
        "            kind += ' seqpacket' if s.type == socket.SOCK_SEQPACKET else ''\n"
        "    seen[fd] = kind",
    ),
    attack(
        "named sockets",
        "seen = [line.split()[-1] for line in open('/proc/net/unix').read().splitlines()[1:]\n"
        "        if 'scenariokit' in line.split()[-1] or 'zygote' in line.split()[-1]]",
    ),
    attack("signal zygote", "import os\nos.kill(int(helpers.env['zygote']), 0)\nseen = 'signalled'"),
]


async def zygote_environment(hostile: Hostile) -> Any:
    """An environment whose data names the zygote's host pid (what an attacker may guess)."""
    if hostile.started != "zygote":
        pytest.skip("its workers are started by exec")
    pool = (await hostile.kit.start_runner()).pool
    skip_if_left_out(pool, "the worker zygote")
    assert pool.zygote is not None and pool.zygote.pid is not None, "the pool forks no worker here"
    return await hostile.kit.environments.create(
        {"name": f"zygote-{pool.zygote.pid}", "data": {"zygote": str(pool.zygote.pid)}}
    )


@pytest.mark.platform  # an ordinary user's workers enter their sandboxes otherwise (docs/security.md)
async def test_a_forked_worker_holds_nothing_of_the_zygote(hostile: Hostile) -> None:
    env = await zygote_environment(hostile)

    result = await hostile.run("forked", *FORKED, environment_id=env.id)

    assert result.run.status is RunStatus.PASS, result.run.error
    found = seen(result)
    # its descriptors: /dev/null, its output pipes, its channel and what it opened itself (on Python
    # 3.12 and later, asyncio's pidfd of the driver it started); never the zygote's control socket
    # (the one SEQPACKET socket), a folder, or a pidfd of the sandbox or of any process not its child
    descriptors = found["descriptors"]
    assert descriptors[0] == "/dev/null" and descriptors[1] == descriptors[2] == "pipe", descriptors
    assert descriptors[3] == "socket", descriptors
    assert not [fd for fd, kind in descriptors.items() if kind in {"dir", "anon_inode:[pidfd]"}], descriptors
    assert not [fd for fd, kind in descriptors.items() if "seqpacket" in kind], descriptors
    # the one named socket a worker sees is the driver zygote's, which its Playwright is meant to ask
    # (tests/security/test_hostile_driver_zygote.py replays what a step may ask it); never the zygote's
    assert [name for name in found["named sockets"] if "-driver-zygote-" not in name] == []
    joined = {name: result for name, result in found["setns"].items() if result == "joined"}
    if hostile.mode == "off":  # the service's own user, as a worker started by exec is
        return
    status = found["status"]
    if os.geteuid() == 0:
        assert int(status["Uid"][0]) in WORKER_UIDS and len(set(status["Uid"])) == 1, status
        assert status["Gid"] == status["Uid"] and status["Groups"] == [], status
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[caps][0], 16) == 0, (caps, status)
    assert status["NoNewPrivs"] == ["1"]
    # its own PID namespace: bubblewrap, its waiter, the worker and what the worker started
    processes = found["processes"]
    assert min(processes) == 1 and "bwrap" in processes[1], processes
    pythons = [pid for pid, cmd in processes.items() if "zygote_process" in cmd]
    assert len(pythons) == 1, processes  # the worker itself (forked, it keeps the zygote's command line)
    assert blocked(found["signal zygote"]), found["signal zygote"]
    assert joined == {}, found["setns"]


TAMPER = (
    "import builtins, os, signal, sys\n"
    "import scenariokit.runner.worker.process as worker\n"
    "import scenariokit.runner.confinement.zygote_process as zygote\n"
    "builtins._left_by_a_run = 'tampered'\n"
    "worker.worker_entry = zygote.serve = lambda *a: print('hijacked')\n"
    "sys.modules['json'].dumps = lambda *a, **k: 'hijacked'\n"
    "os.environ['LEFT_BY_A_RUN'] = '1'\n"
    "open(os.path.join(os.environ['TMPDIR'], 'left'), 'w').write('x')\n"
    "for pid in (1, 2) if os.getppid() == 0 else ():  # in the sandbox: bubblewrap and its waiter\n"
    "    try:\n"
    "        os.kill(pid, signal.SIGSTOP)\n"
    "    except OSError as exc:\n"
    "        print('cannot stop', pid, exc.strerror)\n"
    "        continue\n"
    "    for _ in range(50):  # a stop takes effect at once, but not before the signal is handled\n"
    "        state = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0]\n"
    "        if state in 'Tt':\n"
    "            break\n"
    "        __import__('time').sleep(0.01)\n"
    "    command = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')[0].decode()\n"
    "    print('stopped' if state in 'Tt' else 'ignored', pid, command)\n"
)
CHECK = (
    "import builtins, json, os\n"
    "import scenariokit.runner.worker.process as worker\n"
    "print('left', getattr(builtins, '_left_by_a_run', None), os.environ.get('LEFT_BY_A_RUN'),"
    " 'left' in os.listdir(os.environ['TMPDIR']), json.dumps(1), worker.worker_entry.__name__)\n"
)


@pytest.mark.platform  # an ordinary user's workers enter their sandboxes otherwise (docs/security.md)
async def test_a_run_after_one_that_tampered_with_everything_is_clean(hostile: Hostile) -> None:
    tampering = await hostile.run("tamper", TAMPER)
    assert tampering.run.status is RunStatus.PASS, tampering.run.error

    for _ in range(3):  # the workers started before it and after it alike
        after = await hostile.run("after tampering", CHECK)
        assert after.run.status is RunStatus.PASS, after.run.error
        left = [line.message for line in after.logs.items if line.message.startswith("left ")]
        assert left == ["left None None False 1 worker_entry"], left
    if hostile.mode == "bubblewrap":
        stopped = [line.message for line in tampering.logs.items if line.message.startswith("stopped")]
        if os.geteuid() == 0:
            assert stopped == [], stopped  # neither bubblewrap, its waiter, nor anything outside
        else:
            # An ordinary user's sandbox maps one user, so the waiter (the sandbox's first process,
            # which only holds it open) is the worker's own user and may be stopped, as the worker may
            # stop itself: the run still ended and was cleaned up (the runs after it are). bubblewrap,
            # the namespace's first process, ignores it; nothing outside the sandbox is in its sight.
            assert stopped in ([], ["stopped 2 /bin/sh"]), stopped
