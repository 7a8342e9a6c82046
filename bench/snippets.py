"""What a store full of snippets costs a run that calls two: the claim's work and the frame to the worker.

A team's store gathers snippets (logins, cart helpers, cookie banners) while each scenario calls a
few. The scheduler resolves a run's job when it claims the run (``RunService.claim``: the revision,
the credentials, the snippets) and sends it to the worker in one frame. This benchmark puts a
scenario of three steps, one calling ``await runSnippet("login", ...)`` (which calls ``fill``), into
a store that also holds ``--snippets`` other snippets of about 450 bytes each, and measures, on
SQLite and on PostgreSQL:

- *literal aliases*: that scenario, whose code names the snippets it calls;
- *a computed alias*: the same scenario with the alias built at run time
  (``runSnippet("log" + "in", ...)``), for which no reading of the code can tell which snippet runs, so
  the job carries every snippet: what every run cost before wave 3, session 13;
- *the baseline*: the first scenario in a store holding only the two snippets it calls.

Printed: the median milliseconds of resolving the job (``RunService._job_of``, the claim's part that
grows with the store), the bytes of the worker's ``StartRun`` frame and the milliseconds of encoding
it (the scheduler) and decoding it (the worker), each against the baseline.

    python bench/snippets.py [--snippets 300] [--repeat 200] [--sqlite-only]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scenariokit.domain.job import RunJob
from scenariokit.domain.model import Run
from scenariokit.formats.inputs import EnvironmentInput, RunInput, ScenarioInput, SnippetInput, StepInput
from scenariokit.runner.protocol import StartRun, decode_frame, encode_frame
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"

LOGIN = (
    "await runSnippet('fill', ['#user', args[0]])\n"
    "await runSnippet('fill', ['#password', args[1]])\n"
    "await page.get_by_role('button', name='Sign in').click()\n"
)
FILL = "await page.locator(args[0]).fill(args[1])\n"


def other_snippet(index: int) -> str:
    """A snippet the scenario never calls, of a realistic size (about 450 bytes)."""
    return "".join(
        f"await page.goto(helpers.getEnvUrl() + '/admin/section-{index}/page-{line}')\n"
        f"await expect(page.get_by_role('heading', name='Section {index}')).to_be_visible()\n"
        for line in range(3)
    )


def steps(login_call: str) -> list[StepInput]:
    return [
        StepInput(exec_code="await page.goto(helpers.getEnvUrl())"),
        StepInput(exec_code=f"await {login_call}"),
        StepInput(exec_code="await expect(page.get_by_role('status')).to_have_text('Welcome ada')"),
    ]


async def seeded(url: str, others: int) -> tuple[Services, dict[str, Run]]:
    """Services over a new store at ``url``: the two snippets, ``others`` more, a run of each scenario."""
    services = Services(await open_store(url, secret_key="bench"))
    env = await services.environments.create(EnvironmentInput(name="shop", data={"url": "http://127.0.0.1"}))
    await services.snippets.create(SnippetInput(alias="login", title="Log in", code=LOGIN))
    await services.snippets.create(SnippetInput(alias="fill", title="Fill a field", code=FILL))
    for index in range(others):
        await services.snippets.create(
            SnippetInput(
                alias=f"admin-{index:03d}", title=f"Admin section {index}", code=other_snippet(index)
            )
        )
    calls = {
        "literal": "runSnippet('login', ['ada', 'secret'])",
        "computed": "runSnippet('log' + 'in', ['ada', 'secret'])",
    }
    runs = {}
    for name, call in calls.items():
        scenario = await services.scenarios.create(ScenarioInput(name=name, steps=steps(call)))
        runs[name] = await services.runs.create(RunInput(scenario_id=scenario.id, environment_id=env.id))
    return services, runs


async def measure(
    url: Callable[[], str], others: int, repeat: int, rounds: int = 5
) -> dict[str, tuple[float, int, float]]:
    """(median ms of resolving the job, bytes of its frame, ms of coding it), by case.

    Over two new stores (``url()`` names each). The three cases are measured in ``rounds`` rounds,
    each in another order, ``repeat / rounds`` times each: the machine drifts, and all see the same
    moments.
    """
    stores = [await seeded(url(), 0), await seeded(url(), others)]
    (alone, small), (full, large) = stores
    cases = {
        "alone": (alone, small["literal"]),
        "literal": (full, large["literal"]),
        "computed": (full, large["computed"]),
    }
    samples: dict[str, list[float]] = {key: [] for key in cases}
    sizes, wire = {}, {}
    try:
        for key, (services, run) in cases.items():  # warm: statements prepared
            job, _ = await services.runs._job_of(run)
            sizes[key] = len(encode_frame(StartRun(job)))
            wire[key] = _frame_ms(job, repeat)
        order = list(cases)
        for round_ in range(rounds):
            shift = round_ % len(order)
            for key in order[shift:] + order[:shift]:
                services, run = cases[key]
                for _ in range(max(1, repeat // rounds)):
                    began = time.perf_counter()
                    await services.runs._job_of(run)
                    samples[key].append((time.perf_counter() - began) * 1000)
    finally:
        for services, _ in stores:
            if isinstance(services.store, SqlStore) and services.store.dialect == "postgresql":
                await services.store.drop_schema()
            await services.store.close()
    return {key: (statistics.median(values), sizes[key], wire[key]) for key, values in samples.items()}


def _frame_ms(job: RunJob, repeat: int) -> float:
    """Median ms of encoding the job's frame (the scheduler) and decoding it (the worker)."""
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        decode_frame(encode_frame(StartRun(job)), (StartRun,))
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--snippets", type=int, default=300, help="snippets in the store the scenario never calls"
    )
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    labels = {
        "alone": "the baseline: only the two snippets it calls in the store",
        "literal": f"literal aliases, {args.snippets} other snippets in the store",
        "computed": f"a computed alias, {args.snippets} other snippets (every snippet sent)",
    }
    with tempfile.TemporaryDirectory() as tmp:
        files = iter(range(10))
        stores = [("SQLite", lambda: f"sqlite:///{Path(tmp) / f'bench-{next(files)}.db'}")]
        if not args.sqlite_only:
            stores.append(("PostgreSQL", lambda: f"{PG_URL}?schema={unique_schema('bench')}"))
        print(
            f"a run's job with {args.snippets} snippets in the store the scenario never calls, "
            f"median of {args.repeat}"
        )
        for name, url in stores:
            try:
                results = await measure(url, args.snippets, args.repeat)
            except OSError as exc:
                print(f"  {name}: skipped, no server reachable ({exc})")
                continue
            base_ms, base_bytes, base_wire = results["alone"]
            print(f"  {name}:")
            for key, label in labels.items():
                ms, size, wire = results[key]
                line = f"    {label:68s} job {ms:6.3f} ms, frame {size:7,d} bytes coded in {wire:5.3f} ms"
                if key != "alone":
                    line += f" ({ms / base_ms:.2f}x, {size / base_bytes:.1f}x, {wire / base_wire:.1f}x)"
                print(line)


if __name__ == "__main__":
    asyncio.run(main())
