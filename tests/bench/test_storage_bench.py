"""bench/storage.py measures for real: page 1 of the runs, by every sort and the dashboard's filters, of
the audit log, by every filter, and of the scenarios, by every order, each with its verdict against the
target, and a search of the scenarios beside them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_every_first_page_is_timed_on_both_stores(tmp_path: Path) -> None:
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "storage.py"), "--runs", "2000", "--audit-entries", "3000",
         "--scenarios", "3000", "--repeat", "3"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    out = answer.stdout
    audit_pages = re.findall(r"page 1, audit .+ms .+\(target ≤ 50 ms: (met|MISSED)\)", out)
    stores = 1 if "PostgreSQL skipped" in out else 2
    assert len(audit_pages) == 6 * stores, out
    assert "seeded 3,000 audit entries" in out
    assert re.search(r"page 1 by createdAt desc .+\(target ≤ 50 ms: (met|MISSED)\)", out), out
    listings = r"(?:runs|failed runs|a scenario's runs|an environment's runs)"
    filtered = re.findall(rf"page 1, {listings} .+ms .+\(target", out)
    assert len(filtered) == 6 * stores, out
    assert "seeded 3,000 scenarios" in out
    scenario_pages = re.findall(
        r"page 1, scenarios \((?:library|REST)\) by .+\(target ≤ 50 ms: (met|MISSED)\)", out
    )
    assert len(scenario_pages) == 12 * stores, out
    searches = re.findall(
        r"page 1, scenarios \((?:library|REST)\) named like 1% .+\(a search: no target\)", out
    )
    assert len(searches) == 2 * stores, out
