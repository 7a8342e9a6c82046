"""The Prometheus files the docs ship (docs/prometheus/) pass Prometheus's own checks.

``promtool check rules`` and ``promtool test rules`` (docs/prometheus/alerts_test.yml: each alert fires
when it should and not before) on the alerting rules, ``promtool check config`` on the example
configuration, and the Grafana dashboard asks only for series the service exposes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from doc_blocks import ROOT, code_block

from scenariokit_server.metrics import ServiceMetrics

FOLDER = ROOT / "docs" / "prometheus"
DEPLOYMENT_MD = ROOT / "docs" / "deployment.md"
SUFFIXES = {"histogram": ("_bucket", "_count", "_sum"), "counter": ("_total",)}
promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian package prometheus) is absent"
)


def run_promtool(*args: str, cwd: Path = FOLDER) -> str:
    done = subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


@promtool
def test_the_alerting_rules_pass_promtool_check_rules() -> None:
    output = run_promtool("check", "rules", "alerts.yml")
    assert "SUCCESS: 4 rules found" in output


@promtool
def test_the_alerting_rules_pass_their_unit_tests() -> None:
    output = run_promtool("test", "rules", "alerts_test.yml")
    assert "SUCCESS" in output


def test_the_rules_cover_a_failing_scenario_a_growing_queue_and_a_stalled_schedule() -> None:
    text = (FOLDER / "alerts.yml").read_text()
    names = re.findall(r"- alert: (\w+)", text)
    wanted = {"ScenariokitScenarioFailing", "ScenariokitQueueGrowing", "ScenariokitScheduleStalled"}
    assert wanted <= set(names)
    tested = (FOLDER / "alerts_test.yml").read_text()
    for name in names:
        assert f"alertname: {name}" in tested, f"{name} has no unit test"


@promtool
def test_the_example_configuration_passes_promtool_check_config(tmp_path: Path) -> None:
    for name in ("prometheus.yml", "alerts.yml"):
        shutil.copy(FOLDER / name, tmp_path / name)
    (tmp_path / "scenariokit.token").write_text("a-read-token-0123456789\n")  # the file it names
    run_promtool("check", "config", "prometheus.yml", cwd=tmp_path)


def test_the_dashboard_asks_only_for_series_the_service_exposes() -> None:
    dashboard = json.loads((FOLDER / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs
    exposed = set()
    for family in ServiceMetrics().registry.collect():  # the families, also those with no sample yet
        suffixes = SUFFIXES.get(family.type, ("",))
        exposed |= {family.name + suffix for suffix in suffixes}
    for expr in exprs:
        for name in re.findall(r"\bscenariokit_\w+", expr):
            assert name in exposed, f"{name} in {expr!r}"


def test_the_guide_shows_the_configuration_file_as_it_is() -> None:
    shown = code_block(DEPLOYMENT_MD, after="## Metrics", lang="yaml")
    assert shown == (FOLDER / "prometheus.yml").read_text()


def test_the_guide_lists_every_series_the_service_exposes_and_no_other() -> None:
    text = DEPLOYMENT_MD.read_text()
    section = text[text.index("## Metrics") : text.index("### Alerting rules")]
    listed = set(re.findall(r"^\| `(scenariokit_\w+)` \|", section, flags=re.MULTILINE))
    exposed = {family.name for family in ServiceMetrics().registry.collect()}
    exposed = {f"{name}_total" if name == "scenariokit_runs" else name for name in exposed}
    assert listed == exposed


@promtool
def test_the_guides_promtool_commands_work_as_written() -> None:
    block = code_block(DEPLOYMENT_MD, after="### Alerting rules", lang="sh")
    done = subprocess.run(["bash", "-e", "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
