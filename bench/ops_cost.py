"""What scoped tokens, ``/metrics``' request timing and the audit log add to a request of the dashboard mix.

Two instances of the real application (``create_app``) on aiohttp's test servers in one process, each
over a SQLite file of its own with 200 scenarios of two steps:

- *with*: as a team runs it: ``SCENARIOKIT_API_TOKENS`` holds a named ``write`` token and every
  request carries it (the scope check), the metrics middleware times every request into
  ``scenariokit_http_request_duration_seconds``, and every create writes its audit entry;
- *without*: the same application with the three taken out: no tokens, the metrics and scope
  middlewares removed from its middleware list, and its creates write no audit entry (a middleware of
  its own says so; it costs the *without* side, so the share printed is if anything too small).

- *control*: a second *without*, alike in every way: what it reads against the first is the bench's
  own noise and bias (which instance was made first, its file, its place in memory), the floor under
  which a share means nothing.

Requests go to the three in turn, one at a time (three pages of 20 scenarios, then a create with two
steps, the dashboard's mix), the order rotated through all six for each kind of request, so all see
the same machine at the same moments. The CPU each request
costs inside the application (``Application._handle``: every middleware, the view, the store, the
JSON; ``time.process_time``, while the client waits) is recorded per instance. The HTTP parsing and
writing around it is the same for both and left out. Prints the median per page and per create, the
mix (75% pages, 25% creates) and the share the team operations add to it, against the 5% target,
with the control's share beside it.

    python bench/ops_cost.py [--rounds 400]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from _shared import time_applications
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiohttp.typedefs import Handler

import scenariokit.services.audit as audit_log
from api import (
    BENCH_KEY,
    CREATE_PATH,
    CREATE_SHARE,
    JSON_HEADERS,
    LIST_PATH,
    OPS_TOKEN,
    OPS_TOKENS,
    TARGET_OPS_SHARE,
    create_body,
    seed,
)
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit_server import Settings, create_app
from scenariokit_server.boundary import server_options

#: The team-operations middlewares the *without* instance leaves out, by name.
OPS_MIDDLEWARES = frozenset({"time_request", "authorize_request"})
#: Set while the *without* instance handles a request: its creates write no audit entry.
WITHOUT_AUDIT: contextvars.ContextVar[bool] = contextvars.ContextVar("without_audit", default=False)
#: CPU ms in the application, by instance label and method.
SAMPLES: dict[tuple[str, str], list[float]] = {}
LABELS: dict[int, str] = {}
#: The instances, as their lines are printed.
LABELLED = ("with", "without", "control")


def record_cpu(app: web.Application, request: web.Request, milliseconds: float) -> None:
    """Keep one request's CPU in the application, by instance and method, in :data:`SAMPLES`."""
    SAMPLES.setdefault((LABELS.get(id(app), "?"), request.method), []).append(milliseconds)


def leave_out_audit() -> None:
    """Audit entries are written unless the request is the *without* instance's."""
    record = audit_log.record

    async def maybe_record(*args: Any, **kwargs: Any) -> Any:
        return None if WITHOUT_AUDIT.get() else await record(*args, **kwargs)

    audit_log.record = maybe_record  # type: ignore[assignment]


@web.middleware
async def without_audit(request: web.Request, handler: Handler) -> web.StreamResponse:
    WITHOUT_AUDIT.set(True)  # this request's own context
    return await handler(request)


@contextlib.asynccontextmanager
async def instance(
    label: str, folder: str, *, ops: bool
) -> AsyncIterator[tuple[aiohttp.ClientSession, dict[str, str]]]:
    """One application on a test server over a SQLite file in ``folder``, seeded; a client session."""
    store = await open_store(f"sqlite:///{folder}/{label}.db", secret_key=BENCH_KEY)
    tokens = (OPS_TOKENS,) if ops else ()
    settings = Settings(database_url="sqlite://", run_scheduler=False, workers=1, api_tokens=tokens)
    app = create_app(settings, services=Services(store))
    if not ops:
        kept = [m for m in app.middlewares if getattr(m, "__name__", "") not in OPS_MIDDLEWARES]
        app.middlewares[:] = [without_audit, *kept]
    LABELS[id(app)] = label
    server = TestServer(app)
    await server.start_server(**server_options())
    headers = {"Authorization": f"Bearer {OPS_TOKEN}"} if ops else {}
    url = f"http://127.0.0.1:{server.port}"
    try:
        await seed(url, 200, headers or None)
        async with aiohttp.ClientSession(url, headers=headers) as http:
            yield http, headers
    finally:
        await server.close()
        await store.close()


async def request(http: aiohttp.ClientSession, index: int) -> None:
    """One request of the mix: a create every fourth, else a page."""
    if index % 4 == 3:
        sent = http.post(CREATE_PATH, data=create_body(index), headers=JSON_HEADERS)
        expected = 201
    else:
        sent = http.get(LIST_PATH)
        expected = 200
    async with sent as answer:
        await answer.read()
        if answer.status != expected:
            raise SystemExit(f"{answer.method} answered {answer.status}: {await answer.text()}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400, help="requests to each instance")
    args = parser.parse_args()
    time_applications(record_cpu, time.process_time)
    leave_out_audit()
    print(f"load average at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            instance("with", tmp, ops=True) as (with_ops, _),
            instance("without", tmp, ops=False) as (without, _),
            instance("control", tmp, ops=False) as (control, _),
        ):
            instances = (with_ops, without, control)
            for index in range(40):  # warm: statements prepared, caches filled
                for http in instances:
                    await request(http, index)
            SAMPLES.clear()
            orders = list(itertools.permutations(instances))
            for index in range(args.rounds):
                # the order rotates for each kind of request: a create is every fourth request, so a
                # rotation by index alone would send every create through the same few orders
                for http in orders[(index + index // 4) % len(orders)]:
                    await request(http, 1000 + index)
    medians = {key: statistics.median(values) for key, values in SAMPLES.items()}
    mix = {
        label: (1 - CREATE_SHARE) * medians[(label, "GET")] + CREATE_SHARE * medians[(label, "POST")]
        for label in LABELLED
    }
    share = mix["with"] / mix["without"] - 1
    noise = mix["control"] / mix["without"] - 1
    print(f"{args.rounds} requests to each (75% pages, 25% creates), CPU in the application, medians:")
    for label in LABELLED:
        page, create = medians[(label, "GET")], medians[(label, "POST")]
        print(f"  {label:8s} a page {page:.3f} ms, a create {create:.3f} ms, the mix {mix[label]:.3f} ms")
    verdict = "met" if share <= TARGET_OPS_SHARE else "NOT met"
    print(f"scoped tokens, /metrics' request timing and the audit log add {share:+.1%} to a request of the"
          f" mix (target ≤ +{TARGET_OPS_SHARE:.0%}: {verdict}); the control, alike to 'without', reads"
          f" {noise:+.1%}: the bench's own noise and bias")  # fmt: skip
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
