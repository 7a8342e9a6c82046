"""bench/snippets.py measures for real: a run calling two snippets is given two, however full the store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_frame_of_a_run_calling_two_snippets_does_not_grow_with_the_store(tmp_path: Path) -> None:
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "snippets.py"), "--snippets", "40", "--repeat", "10",
         "--sqlite-only"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    frames = {
        case: int(found.group(1).replace(",", ""))
        for case in ("the baseline", "literal aliases", "a computed alias")
        for line in answer.stdout.splitlines()
        if line.strip().startswith(case) and (found := re.search(r"frame +([\d,]+) bytes", line))
    }
    assert frames["literal aliases"] == frames["the baseline"]
    # every snippet, about 450 bytes each
    assert frames["a computed alias"] > frames["the baseline"] + 40 * 400
