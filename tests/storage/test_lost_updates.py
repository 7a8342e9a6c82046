"""Concurrent PATCHes of one record: each is a read-merge-write under a lock, so none is lost."""

from __future__ import annotations

import asyncio

from scenariokit.services import Services


async def test_two_concurrent_scenario_patches_of_different_fields_both_survive(services: Services) -> None:
    scenario = await services.scenarios.create({"name": "checkout", "steps": [{"execCode": "first"}]})
    for round_ in range(5):
        await asyncio.gather(
            services.scenarios.update(scenario.id, {"description": f"described {round_}"}),
            services.scenarios.update(scenario.id, {"timeoutSeconds": 100 + round_}),
        )
        stored = await services.scenarios.get(scenario.id)
        assert stored.description == f"described {round_}"
        assert stored.timeout_seconds == 100 + round_
        assert stored.name == "checkout" and len(stored.steps) == 1


async def test_two_concurrent_step_patches_of_different_fields_both_survive(services: Services) -> None:
    scenario = await services.scenarios.create({"name": "checkout", "steps": [{"execCode": "first"}]})
    step_id = scenario.steps[0].id
    for round_ in range(5):
        await asyncio.gather(
            services.scenarios.update_step(scenario.id, step_id, {"title": f"title {round_}"}),
            services.scenarios.update_step(scenario.id, step_id, {"timeoutSeconds": 10 + round_}),
        )
        step = await services.scenarios.get_step(scenario.id, step_id)
        assert (step.title, step.timeout_seconds, step.exec_code) == (f"title {round_}", 10 + round_, "first")


async def test_two_concurrent_environment_patches_of_different_fields_both_survive(
    services: Services,
) -> None:
    env = await services.environments.create({"name": "staging", "data": {"url": "http://127.0.0.1:1"}})
    for round_ in range(5):
        await asyncio.gather(
            services.environments.update(env.id, {"description": f"described {round_}"}),
            services.environments.update(env.id, {"data": {"url": f"http://127.0.0.1:{round_ + 2}"}}),
        )
        stored = await services.environments.get(env.id)
        assert stored.description == f"described {round_}"
        assert stored.data == {"url": f"http://127.0.0.1:{round_ + 2}"}
        assert stored.name == "staging"
