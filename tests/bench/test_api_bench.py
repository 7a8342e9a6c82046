"""bench/api.py's side-by-side mode runs both checkouts for real, in turn, and reads PostgreSQL's CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import api  # noqa: E402 - bench/ is a folder of scripts, not a package


def test_against_a_checkout_measures_both_in_turn_and_compares_their_medians(tmp_path: Path) -> None:
    # The other checkout is this one under another path: its servers import from there (PYTHONPATH).
    other = tmp_path / "other"
    other.symlink_to(ROOT)
    answer = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "api.py"), "--against", str(other), "--pairs", "2",
         "--requests", "48", "--no-postgres"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr
    lines = answer.stdout.splitlines()
    pairs = [line.strip() for line in lines if ", pair " in line]
    assert [line.split(":")[0] for line in pairs] == [
        "SQLite, pair 1, this checkout",
        f"SQLite, pair 1, {ROOT}",  # (the path resolved: the symlink's target)
        f"SQLite, pair 2, {ROOT}",  # the order swaps every pair
        "SQLite, pair 2, this checkout",
    ]
    assert all(", 0 errors" in line for line in pairs), pairs
    [summary] = [line for line in lines if line.startswith("SQLite: this checkout ")]
    assert "requests/s " in summary and summary.endswith("x")


@pytest.mark.postgres
def test_postgresql_s_cpu_grows_with_its_work() -> None:
    import asyncio

    import asyncpg

    async def work() -> float:
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test")
        try:
            before = api.postgres_cpu_seconds()
            await conn.fetchval("SELECT count(*) FROM generate_series(1, 3000000)")
            # read while the backend lives: an ended one counts only once the postmaster has reaped it
            return api.postgres_cpu_seconds() - before
        finally:
            await conn.close()

    assert asyncio.run(work()) >= 0.1
