"""What scoped tokens, ``/metrics``' request timing and the audit log add to a request of the dashboard mix.

Three instances of the real server, each over a SQLite file of its own with 200 scenarios of two steps:

- *with*: as a team runs it: ``SCENARIOKIT_API_TOKENS`` holds a named ``write`` token and every
  request carries it (the scope check), the metrics middleware times every request into
  ``scenariokit_http_request_duration_seconds``, and every create writes its audit entry;
- *without*: the same server with the three taken out: no tokens, no scope or metrics middleware,
  and its creates write no audit entry;
- *control*: a second *without*, alike in every way: what it reads against the first is the bench's
  own noise and bias (which instance was made first, its file, its place in memory), the floor under
  which a share means nothing.

Requests go to the three in turn, one at a time (three pages of 20 scenarios, then a create with two
steps, the dashboard's mix), the order rotated through all six for each kind of request, so all see
the same machine at the same moments. Measured twice:

1. *In the application*: the three applications (``create_app``) on aiohttp's test servers in this
   process. The CPU each request costs inside ``Application._handle`` (every middleware, the view,
   the store, the JSON; ``time.process_time`` while the client waits) is recorded per instance, and
   the medians of pages and creates make the mix. The HTTP parsing and writing around it is left out:
   the finest view of the three's own cost, and the largest share of it.
2. *The whole server*: three ``scenariokit serve`` processes (*without* and *control* are
   ``bench/api.py --serve-without-ops``), the scheduler off. Each process's whole CPU over the rounds
   (from ``/proc``: HTTP, the access log, the store's thread, everything a request costs it, exact to
   10 ms over seconds of CPU), divided by the requests: what caps the requests a second a user gets.

3. *The whole server, in instructions*: the same three processes under valgrind's callgrind, counting
   off while each starts, is seeded and warmed, and on for exactly ``--counted-rounds`` requests of the
   mix: the instructions a request costs. A count, not a time: it does not move with the machine's
   speed or with what else runs on it, so the control reads within a fraction of a percent and a share
   of a few percent can be told from noise. It counts work, not cycles (a cache miss costs no
   instruction); the CPU of 1 and 2 says what that work takes on this machine. Left out, with a note,
   where valgrind is not installed.

Each prints the mix's CPU (or instructions) per instance and the share the team operations add,
against the 5% target, with the control's share beside it.

    python bench/ops_cost.py [--rounds 400] [--server-rounds 3000] [--counted-rounds 200]

A measure given 0 rounds is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import attrs
from _shared import (
    CALLGRIND_ENV,
    CALLGRIND_START,
    callgrind_installed,
    count_instructions,
    process_seconds,
    scenariokit_serve,
    time_applications,
    under_callgrind,
)
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
    THIS_FILE,
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


async def in_turn(clients: tuple[aiohttp.ClientSession, ...], rounds: int) -> None:
    """``rounds`` requests of the mix to each client, one at a time, in every order in turn."""
    orders = list(itertools.permutations(clients))
    for index in range(rounds):
        # the order rotates for each kind of request: a create is every fourth request, so a rotation
        # by index alone would send every create through the same few orders
        for http in orders[(index + index // 4) % len(orders)]:
            await request(http, 1000 + index)


async def in_the_application(rounds: int) -> dict[str, float]:
    """The mix's CPU in the application (medians of pages and creates), by instance; prints the medians."""
    time_applications(record_cpu, time.process_time)
    leave_out_audit()
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
            await in_turn(instances, rounds)
    medians = {key: statistics.median(values) for key, values in SAMPLES.items()}
    print(f"{rounds} requests to each (75% pages, 25% creates), CPU in the application, medians:")
    mix = {}
    for label in LABELLED:
        page, create = medians[(label, "GET")], medians[(label, "POST")]
        mix[label] = (1 - CREATE_SHARE) * page + CREATE_SHARE * create
        print(f"  {label:8s} a page {page:.3f} ms, a create {create:.3f} ms, the mix {mix[label]:.3f} ms")
    return mix


@attrs.frozen
class ServerOf:
    """How one of the three instances runs as a ``scenariokit serve`` process of its own."""

    headers: dict[str, str]  # what each of its requests carries
    env: dict[str, str]  # its settings, beyond those every instance has
    argv: tuple[str, ...]  # what ``sys.executable`` runs


def server_of(label: str) -> ServerOf:
    """The *with* instance as a team runs it; *without* and *control* as api.py's server without them."""
    if label == "with":
        token = {"Authorization": f"Bearer {OPS_TOKEN}"}
        serve = (str(Path(sys.executable).parent / "scenariokit"), "serve")
        return ServerOf(token, {"SCENARIOKIT_API_TOKENS": OPS_TOKENS}, serve)
    return ServerOf({}, {}, (THIS_FILE, "--serve-without-ops"))


async def whole_servers(rounds: int) -> dict[str, float]:
    """The CPU a request of the mix costs each of three ``scenariokit serve`` processes, all of it (HTTP,
    the access log, the store's thread): the same three instances, each a server of its own."""
    env = {"SCENARIOKIT_RUN_SCHEDULER": "false"}
    async with contextlib.AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        pids, clients = [], []
        for label in LABELLED:
            (tmp / label).mkdir()
            instance = server_of(label)
            command = (sys.executable, *instance.argv)
            label_env = {**env, **instance.env}
            served = scenariokit_serve(tmp / label, settle=0.2, env_extra=label_env, command=command)
            server = await stack.enter_async_context(served)
            await seed(server.url, 200, instance.headers or None)
            client = aiohttp.ClientSession(server.url, headers=instance.headers)
            clients.append(await stack.enter_async_context(client))
            pids.append(server.pid)
        for index in range(40):
            for http in clients:
                await request(http, index)
        began = [process_seconds(pid) for pid in pids]
        await in_turn(tuple(clients), rounds)
        spent = [process_seconds(pid) - before for pid, before in zip(pids, began, strict=True)]
    print(f"{rounds} requests to each of three servers, the server process's whole CPU (from /proc):")
    mix = {}
    for label, seconds in zip(LABELLED, spent, strict=True):
        mix[label] = seconds * 1000 / rounds
        print(f"  {label:8s} the mix {mix[label]:.3f} ms a request")
    return mix


async def counted_servers(rounds: int) -> dict[str, float] | None:
    """The instructions a request of the mix costs each of three ``scenariokit serve`` processes, all of
    it as :func:`whole_servers` (HTTP, the access log, the store's thread), counted by valgrind's
    callgrind: a count, not a time, so the same on a machine whose speed drifts, whatever else it runs.

    Each server runs under callgrind with its counting off while it starts, is seeded and warmed, and on
    for exactly the ``rounds`` requests of the mix (``callgrind_control -i on``, then ``-d`` dumps the
    count). The three are loaded at once: a count does not depend on what the other core does.
    """
    if not callgrind_installed():
        print("instructions: valgrind is not installed (apt-get install -y valgrind): left out")
        return None
    env = {"SCENARIOKIT_RUN_SCHEDULER": "false", **CALLGRIND_ENV}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)

        async def count(label: str) -> int:
            folder = tmp / label
            folder.mkdir()
            instance = server_of(label)
            command = under_callgrind(folder, *instance.argv)
            served = scenariokit_serve(
                folder, settle=0, env_extra={**env, **instance.env}, command=command,
                healthy_within=CALLGRIND_START,
            )  # fmt: skip
            async with served as server, aiohttp.ClientSession(server.url, headers=instance.headers) as http:
                await seed(server.url, 200, instance.headers or None)
                for index in range(40):  # warm: statements prepared, caches filled
                    await request(http, index)

                async def the_mix() -> None:
                    for index in range(rounds):
                        await request(http, 1000 + index)

                return await count_instructions(server.pid, folder, the_mix)

        counts = await asyncio.gather(*(count(label) for label in LABELLED))
    print(f"{rounds} requests to each of three servers under callgrind, the instructions they cost:")
    mix = {}
    for label, instructions in zip(LABELLED, counts, strict=True):
        mix[label] = instructions / rounds
        print(f"  {label:8s} the mix {mix[label] / 1e6:.3f} million instructions a request")
    return mix


def verdict(where: str, mix: dict[str, float]) -> None:
    """The share the team operations add to ``mix``, against the target, with the control's beside it."""
    if mix["without"] <= 0:  # /proc counts CPU in clock ticks: too few requests may show none at all
        print(f"{where}: no CPU seen for the server without the team operations: too few requests to tell")
        return
    share = mix["with"] / mix["without"] - 1
    noise = mix["control"] / mix["without"] - 1
    met = "met" if share <= TARGET_OPS_SHARE else "NOT met"
    print(f"{where}: scoped tokens, /metrics' request timing and the audit log add {share:+.1%} to a request"
          f" of the mix (target ≤ +{TARGET_OPS_SHARE:.0%}: {met}); the control, alike to 'without',"
          f" reads {noise:+.1%}: the bench's own noise and bias")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=400, help="requests to each application (0 leaves this measure out)"
    )
    parser.add_argument(
        "--server-rounds", type=int, default=3000,
        help="requests to each whole server (0 leaves this measure out)",
    )  # fmt: skip
    parser.add_argument(
        "--counted-rounds", type=int, default=200,
        help="requests to each whole server under callgrind (0 leaves the count out)",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"load average at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    application = await in_the_application(args.rounds) if args.rounds else None
    servers = await whole_servers(args.server_rounds) if args.server_rounds else None
    counted = await counted_servers(args.counted_rounds) if args.counted_rounds else None
    for where, mix in [
        ("in the application", application),
        ("the whole server", servers),
        ("the whole server, in instructions", counted),
    ]:
        if mix is not None:
            verdict(where, mix)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
