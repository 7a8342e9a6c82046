"""``bench/cpu.py``'s report: the CPU per run it compares, and what it compares it with.

Nothing here measures speed; the bench itself runs by hand or with ``nox -s bench``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import cpu  # noqa: E402 - bench/ is a folder of scripts, not a package


@attrs.define
class Sampled:
    """What :func:`cpu.report` reads of a :class:`_shared.CpuSampler` after its window."""

    parts: dict[str, float]
    parent: float
    exact: float | None
    machine: float

    def by_component(self) -> dict[str, float]:
        return dict(self.parts)


@pytest.fixture(autouse=True)
def no_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "_bare", {})


def test_the_exact_count_is_compared_with_the_bare_script_at_the_same_concurrency_then_one_at_a_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cpu._bare.update({1: 0.500, 2: 0.400})
    # 10 runs: the samples see 4.0 s (browser 3.0, the scheduler process 1.0); the group counted 4.4 s
    sampled = Sampled(parts={"browser": 3.0}, parent=1.0, exact=4.4, machine=4.6)
    per_run = cpu.report("scenariokit", 10, 5.0, sampled, "scheduler process", at_once=2)
    out = capsys.readouterr().out
    assert per_run == pytest.approx(0.44)
    assert (
        "440 ms CPU per run (counted exactly), 1.10x the bare script's 2 at once, 0.88x its one at a time"
        in out
    )
    assert "missed by the samples                   40 ms" in out
    assert "outside the bench                       20 ms" in out


def test_the_plain_scripts_line_gives_no_ratio_to_the_bare_scripts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cpu._bare.update({1: 0.500, 2: 0.400})
    sampled = Sampled(parts={"browser": 3.0}, parent=0.3, exact=3.3, machine=3.4)
    per_run = cpu.report(
        "plain Playwright script (its own flags), 2 at once",
        10,
        5.0,
        sampled,
        "script's Python",
        at_once=2,
        compared=False,
    )
    out = capsys.readouterr().out
    assert per_run == pytest.approx(0.33)
    assert "330 ms CPU per run (counted exactly); load" in out


def test_the_bench_s_own_calls_are_left_out_of_both_counts(capsys: pytest.CaptureFixture[str]) -> None:
    work = cpu.SchedulerWork(loop=0.5, bench=0.2, activity=None)
    sampled = Sampled(parts={"browser": 3.0}, parent=1.2, exact=4.6, machine=4.8)
    per_run = cpu.report("scenariokit", 10, 5.0, sampled, "scheduler process", work, at_once=2)
    out = capsys.readouterr().out
    assert per_run == pytest.approx(0.44)  # 4.6 - 0.2 over 10 runs
    assert "scheduler process                      100 ms" in out  # 1.2 - 0.2
    assert "outside the bench                       20 ms" in out


def test_without_a_control_group_the_sampled_sum_stands_in_and_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpu.GROUP, "reason", "no cpuacct group at /sys/fs/cgroup/cpuacct (Permission denied)")
    sampled = Sampled(parts={"browser": 3.0}, parent=1.0, exact=None, machine=4.5)
    per_run = cpu.report("bare Playwright script", 10, 5.0, sampled, "script's Python")
    out = capsys.readouterr().out
    assert per_run == pytest.approx(0.40)
    assert "400 ms CPU per run (sampled);" in out
    assert "left out, no cpuacct group at /sys/fs/cgroup/cpuacct (Permission denied)" in out
    assert "missed by the samples" not in out


def test_the_rounds_verdict_is_their_median_against_the_bare_script_s_cpu() -> None:
    assert cpu.ceiling_line([1.02, 0.96, 0.99]) == "median 0.99x (0.96x-1.02x); target <= 1.00x: met"
    assert cpu.ceiling_line([1.14]) == "median 1.14x; target <= 1.00x: NOT met"
