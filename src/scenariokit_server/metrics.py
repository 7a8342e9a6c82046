"""The service's Prometheus series: one registry per application, written by ``prometheus_client``.

Counters and histograms move as things happen in this process (a run finishes, a request is
answered); the gauges about the whole store (the queue, each scenario's last outcome, the schedules'
lag) and this process's workers are read when Prometheus scrapes. docs/deployment.md, "Metrics",
lists every series.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import attrs
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_urldispatcher import AbstractResource
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from scenariokit.domain.model import Run, RunErrorKind, RunStatus
from scenariokit.plugins import hookimpl
from scenariokit.services import Readout

if TYPE_CHECKING:
    from scenariokit.runner.parent.scheduler import Scheduler

log = logging.getLogger(__name__)

#: The exposition's content type (Prometheus text format 0.0.4).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The ``route`` of a request no route matched (404, 405): never its path, which anyone can vary.
UNMATCHED_ROUTE = "unmatched"
#: Methods labelled as themselves; any other (a client may send any token) is ``OTHER``.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: ``error_kind`` of a run that passed.
NO_ERROR = "none"
#: Seconds: runs take from about a second to the hour a scenario may last.
RUN_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
#: Seconds: most requests take milliseconds; a run's wait or an import, seconds.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
WORKER_STATES = ("idle", "busy", "session")


class ServiceMetrics:
    """The series of one application, in a registry of its own (never ``prometheus_client``'s global one)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.runs = Counter(
            "scenariokit_runs",
            "Runs finished by this process, by status and error kind (none for a pass).",
            ["status", "error_kind"],
            registry=self.registry,
        )
        self.run_duration = Histogram(
            "scenariokit_run_duration_seconds",
            "Duration of the runs finished by this process, from start to finish.",
            buckets=RUN_BUCKETS,
            registry=self.registry,
        )
        self.http = RequestDurations(HTTP_BUCKETS)
        self.registry.register(self.http)
        # Every outcome exists from the start at 0, so increase() and alerts see the first one.
        self.runs.labels(RunStatus.PASS.value, NO_ERROR)
        for kind in RunErrorKind:
            self.runs.labels(RunStatus.FAIL.value, kind.value)
        self.readings = _Readings()
        self.registry.register(self.readings)

    # --- what happens -----------------------------------------------------------------------------

    @hookimpl
    def scenariokit_run_finished(self, run: Run) -> None:
        """Count a run this process finished (the hook fires once its outcome is stored). It takes the
        run alone, so a server whose only listener this is reads neither its scenario nor its streak."""
        kind = run.error.kind.value if run.error is not None else NO_ERROR
        self.runs.labels(run.status.value, kind).inc()
        if run.duration_ms is not None:
            self.run_duration.observe(run.duration_ms / 1000)

    def observe_request(self, request: web.Request, status: int, seconds: float) -> None:
        """Record one answered request, under its route template (never its path), method and status."""
        method = request.method if request.method in KNOWN_METHODS else "OTHER"
        self.http.observe(request.match_info.route.resource, method, status, seconds)

    # --- a scrape ---------------------------------------------------------------------------------

    def exposition(self, readout: Readout | None, scheduler: Scheduler | None, *, draining: bool) -> bytes:
        """The text Prometheus reads: this registry, with the store's figures read just before.

        ``readout`` None: the store did not answer; its series are left out and ``scenariokit_store_up``
        says 0. Synchronous from setting the readings to writing them, so concurrent scrapes never mix.
        """
        self.readings.readout = readout
        self.readings.scheduler = scheduler
        self.readings.draining = draining
        return generate_latest(self.registry)


@attrs.define
class _Durations:
    """One series of :class:`RequestDurations`: its labels, its count per bucket (not cumulative, the
    last past every bound), the sum of its seconds, and when it began (Unix time)."""

    labels: tuple[str, str, str]
    counts: list[int]
    total: float = 0.0
    created: float = attrs.field(factory=time.time)


class RequestDurations:
    """``scenariokit_http_request_duration_seconds``: a histogram of request durations by route template,
    method and status, as a collector of its own.

    ``prometheus_client``'s ``Histogram`` takes a lock for each of its counts and checks its state on
    every observation; timed in place, in the application, that came to 18-25 µs of CPU a page request (a
    fortieth of a page of scenarios), and this collector's observation to under 1 µs
    (docs/performance.md, "The request timing's own histogram"). Requests are timed and scrapes
    written on the event loop's thread, so it needs no lock. The exposition is the one
    ``Histogram`` writes: cumulative ``_bucket`` series with ``le`` up to ``+Inf``, ``_count``,
    ``_sum`` and ``_created``.
    """

    NAME = "scenariokit_http_request_duration_seconds"
    HELP = "Time to answer an HTTP request, by route template, method and status."
    LABELS = ("route", "method", "status")

    def __init__(self, buckets: Iterable[float]) -> None:
        self._bounds = tuple(sorted(buckets))
        self._bucket_names = [floatToGoString(bound) for bound in self._bounds] + ["+Inf"]
        #: by (route's resource, method, status): a bounded set (the routes' resources, the known
        #: methods, the statuses the service answers), each series' labels made once
        self._series: dict[tuple[AbstractResource | None, str, int], _Durations] = {}

    def observe(self, resource: AbstractResource | None, method: str, status: int, seconds: float) -> None:
        """Count one request of ``resource`` (None: a path no route has) that took ``seconds``."""
        key = (resource, method, status)
        series = self._series.get(key)
        if series is None:
            route = resource.canonical if resource is not None else UNMATCHED_ROUTE
            series = self._series[key] = _Durations(
                (route, method, str(status)), [0] * len(self._bucket_names)
            )
        series.counts[bisect.bisect_left(self._bounds, seconds)] += 1  # the first bound >= seconds
        series.total += seconds

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self.NAME, self.HELP, labels=self.LABELS)]

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.NAME, self.HELP, labels=self.LABELS)
        for series in self._series.values():
            cumulative = itertools.accumulate(series.counts)
            family.add_metric(
                series.labels, list(zip(self._bucket_names, cumulative, strict=True)), series.total
            )
            labels = dict(zip(self.LABELS, series.labels, strict=True))
            family.samples.append(Sample(f"{self.NAME}_created", labels, series.created))
        return [family]


class _Readings:
    """A custom collector: the gauges read at scrape time (the store's readout, this process's workers)."""

    def __init__(self) -> None:
        self.readout: Readout | None = None
        self.scheduler: Scheduler | None = None
        self.draining = False

    def describe(self) -> Iterable[Metric]:
        return list(_families())

    def collect(self) -> Iterable[Metric]:
        families = {family.name: family for family in _families()}
        readout = self.readout
        families["scenariokit_store_up"].add_metric([], 1 if readout is not None else 0)
        if readout is not None:
            families["scenariokit_queue_depth"].add_metric([], readout.queue.depth)
            families["scenariokit_queue_oldest_seconds"].add_metric([], readout.oldest_queued_seconds)
            families["scenariokit_schedule_lag_seconds"].add_metric([], readout.schedule_lag_seconds)
            for outcome in readout.outcomes:
                labels = [outcome.scenario_name, str(outcome.scenario_id)]
                passed = 1 if outcome.status is RunStatus.PASS else 0
                families["scenariokit_scenario_last_status"].add_metric(labels, passed)
                if outcome.duration_seconds is not None:
                    families["scenariokit_scenario_last_duration_seconds"].add_metric(
                        labels, outcome.duration_seconds
                    )
        for state, count in _worker_counts(self.scheduler):
            families["scenariokit_workers"].add_metric([state], count)
        families["scenariokit_draining"].add_metric([], 1 if self.draining else 0)
        return families.values()


def _families() -> Iterator[GaugeMetricFamily]:
    scenario = ["scenario", "scenario_id"]
    yield GaugeMetricFamily("scenariokit_store_up", "1 when the store answered this scrape, else 0.")
    yield GaugeMetricFamily("scenariokit_queue_depth", "Runs queued and claimed by no scheduler.")
    yield GaugeMetricFamily(
        "scenariokit_queue_oldest_seconds", "How long the oldest unclaimed run has waited (0: none waits)."
    )
    yield GaugeMetricFamily(
        "scenariokit_schedule_lag_seconds",
        "How long the earliest due schedule fire is overdue (0: every fire on time).",
    )
    yield GaugeMetricFamily(
        "scenariokit_scenario_last_status",
        "The latest finished run of each scenario: 1 pass, 0 fail.",
        labels=scenario,
    )
    yield GaugeMetricFamily(
        "scenariokit_scenario_last_duration_seconds",
        "Duration of the latest finished run of each scenario.",
        labels=scenario,
    )
    yield GaugeMetricFamily(
        "scenariokit_workers", "This process's worker processes by state.", labels=["state"]
    )
    yield GaugeMetricFamily(
        "scenariokit_draining", "1 while this process drains (it was asked to stop), else 0."
    )


def _worker_counts(scheduler: Scheduler | None) -> list[tuple[str, int]]:
    """Workers waiting for a run, executing one, and holding a saved session open; 0 without a scheduler."""
    pool = getattr(scheduler, "pool", None)
    if pool is None or pool.sandbox_kind is None:  # no scheduler, or its pool has not started
        return [(state, 0) for state in WORKER_STATES]
    return [("idle", pool.ready_workers), ("busy", pool.busy_workers), ("session", pool.session_workers)]


def measure_requests(metrics: ServiceMetrics) -> Middleware:
    """A middleware timing every request into ``scenariokit_http_request_duration_seconds``.

    Outermost, so refusals (trust boundary, authentication) and problems are timed with the status
    the client received. A request whose client went away before the answer is not recorded.
    """

    @web.middleware
    async def time_request(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            metrics.observe_request(request, exc.status, time.perf_counter() - started)
            raise
        except asyncio.CancelledError:
            raise
        except Exception:
            metrics.observe_request(request, 500, time.perf_counter() - started)
            raise
        metrics.observe_request(request, response.status, time.perf_counter() - started)
        return response

    return time_request
