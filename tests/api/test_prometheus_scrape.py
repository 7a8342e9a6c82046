"""A real Prometheus scrapes a real server, with the docs' configuration and alerting rules.

Debian's ``prometheus`` binary runs with its data in the test's folder, on a free port of 127.0.0.1,
scraping every second; the test asks its HTTP API for a scenariokit series and for the rules' health.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from live_server import serve
from ruamel.yaml import YAML

from scenariokit_server import Settings

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "prometheus"
#: The whole wait for Prometheus: start, first scrapes, first rule evaluations.
WAIT_SECONDS = 20.0

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus (Debian package prometheus) is absent"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def call(url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def configuration(target: str) -> str:
    """docs/prometheus/prometheus.yml pointed at ``target``, every second, without the token file."""
    yaml = YAML(typ="safe")
    config = yaml.load((FOLDER / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(FOLDER / "alerts.yml")]
    (job,) = config["scrape_configs"]
    del job["authorization"]  # this server has no tokens
    job["static_configs"] = [{"targets": [target]}]
    out = StringIO()
    yaml.dump(config, out)
    return out.getvalue()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Starts Prometheus for a test (the test writes its configuration first) and stops it afterwards."""
    started: list[subprocess.Popen[bytes]] = []

    def start(config: str) -> str:
        (tmp_path / "prometheus.yml").write_text(config)
        port = free_port()
        log = (tmp_path / "prometheus.log").open("wb")
        command = [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        started.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))
        return f"http://127.0.0.1:{port}"

    yield start  # type: ignore[misc]
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_prometheus_scrapes_the_queue_depth_and_loads_the_alerting_rules(
    prometheus: Any, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'scraped.db'}", run_scheduler=False, artifacts_dir=tmp_path / "a"
    )
    with serve(settings) as base:
        env = call(f"{base}/api/v1/environments", {"name": "staging", "data": {}})
        scenario = call(f"{base}/api/v1/scenarios", {"name": "checkout", "steps": [{"execCode": "pass"}]})
        for _ in range(3):
            call(f"{base}/api/v1/run", {"scenarioId": scenario["id"], "environmentId": env["id"]})
        promql = prometheus(configuration(base.removeprefix("http://")))
        query = f"{promql}/api/v1/query?" + urllib.parse.urlencode({"query": "scenariokit_queue_depth"})
        deadline = time.monotonic() + WAIT_SECONDS
        found: list[dict[str, Any]] = []
        rules: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not (found and rules and _all_evaluated(rules)):
            time.sleep(0.5)
            try:
                found = call(query)["data"]["result"]
                groups = call(f"{promql}/api/v1/rules")["data"]["groups"]
                rules = [rule for group in groups for rule in group["rules"]]
            except OSError:  # not listening yet
                continue
        log = (tmp_path / "prometheus.log").read_text(errors="replace")
        assert found, f"no scenariokit_queue_depth within {WAIT_SECONDS} s\n{log}"
        (series,) = found
        assert series["metric"]["job"] == "scenariokit"
        assert series["value"][1] == "3"
        assert {rule["name"] for rule in rules} >= {
            "ScenariokitScenarioFailing", "ScenariokitQueueGrowing", "ScenariokitScheduleStalled",
        }  # fmt: skip
        assert _all_evaluated(rules), rules


def _all_evaluated(rules: list[dict[str, Any]]) -> bool:
    """Every rule was evaluated against the scraped data without an error."""
    return bool(rules) and all(rule["health"] == "ok" for rule in rules)
