"""bench/request_count.py counts the instructions the real server spends on a page and on a create,
under valgrind's callgrind; ``--against`` counts another checkout's code beside it (here: this one's,
so the two counts of the same work agree, which no timing on a shared machine would)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="valgrind is not installed")
def test_a_page_and_a_create_are_counted_and_compared_with_another_checkout(tmp_path: Path) -> None:
    argv = ["--requests", "3", "--no-postgres", "--against", str(ROOT)]
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "request_count.py"), *argv],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    counts = re.findall(r"SQLite, (.+): a page (\d+\.\d+) M, a create (\d+\.\d+) M", answer.stdout)
    assert [label for label, _, _ in counts] == ["this checkout", str(ROOT)], answer.stdout
    assert all(float(page) > 0 and float(create) > 0 for _, page, create in counts)
    ratio = re.search(r"against .+: a page (\d+\.\d+)x, a create (\d+\.\d+)x", answer.stdout)
    assert ratio is not None, answer.stdout
    # the same code doing the same work: the counts differ only by what differs between two runs
    assert 0.9 < float(ratio.group(1)) < 1.1 and 0.9 < float(ratio.group(2)) < 1.1, answer.stdout
