"""bench/ops_cost.py measures three real applications in turn: with the team operations, without, and a
control alike to 'without' whose share is the bench's own noise; first inside the application, then as
three whole ``scenariokit serve`` processes, and those three again under valgrind's callgrind, whose count
of instructions does not drift with the machine's speed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_share_is_printed_with_the_control_s_beside_it(tmp_path: Path) -> None:
    # the whole servers' CPU is read from /proc in clock ticks (10 ms): on a fast machine 12 requests
    # cost a server less than one, so they get 300
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ops_cost.py"), "--rounds", "12", "--server-rounds", "300",
         "--counted-rounds", "0"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    lines = answer.stdout.splitlines()
    medians = [line.split()[0] for line in lines if "a page " in line and "a create " in line]
    assert medians == ["with", "without", "control"], answer.stdout
    servers = [line.split()[0] for line in lines if re.search(r"the mix \d+\.\d+ ms a request$", line)]
    assert servers == ["with", "without", "control"], answer.stdout
    shares = [line for line in lines if "scoped tokens, /metrics' request timing" in line]
    where = [line.split(":")[0] for line in shares]
    assert where == ["in the application", "the whole server"], answer.stdout
    for share in shares:
        assert re.search(r"add [+-]\d+\.\d% to a request of the mix \(target ≤ \+5%: (met|NOT met)\)", share)
        assert re.search(r"the control, alike to 'without', reads [+-]\d+\.\d%", share), share


@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="valgrind is not installed")
def test_the_share_is_also_counted_in_instructions(tmp_path: Path) -> None:
    # the timed measures are the test above's: this one counts only
    argv = ["--rounds", "0", "--server-rounds", "0", "--counted-rounds", "8"]
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ops_cost.py"), *argv],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    lines = answer.stdout.splitlines()
    counted = [line.split()[0] for line in lines if re.search(r"the mix \d+\.\d+ million instructions", line)]
    assert counted == ["with", "without", "control"], answer.stdout
    verdicts = [line.split(":")[0] for line in lines if "add " in line and "to a request of the mix" in line]
    assert verdicts == ["the whole server, in instructions"], answer.stdout
    (share,) = [line for line in lines if line.startswith("the whole server, in instructions:")]
    assert re.search(r"add [+-]\d+\.\d% to a request of the mix \(target ≤ \+5%: (met|NOT met)\)", share)
    # a count of the same work: 'without' and its control differ by what differs between the two runs
    # (the request ids, the times), not by the machine's speed
    control = re.search(r"the control, alike to 'without', reads ([+-]\d+\.\d)%", share)
    assert control is not None and abs(float(control.group(1))) < 2.0, share
