"""``run_scenario`` over MCP takes ``environmentIds``: a batch of runs, as REST queues it."""

from __future__ import annotations

import uuid

from mcp_support import Served, call, connect, fail


async def test_run_scenario_with_environment_ids_queues_a_batch(server: Served) -> None:
    async with connect(server.mcp_url) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        schema = tools["run_scenario"].input_schema
        assert set(schema["required"]) == {"scenarioId"}
        assert schema["properties"]["environmentIds"]["maxItems"] == 20

        scenario = await call(mcp, "create_scenario", name="smoke")
        envs = [
            await call(mcp, "create_environment", name=f"env-{i}", data={"url": f"http://h{i}"})
            for i in range(3)
        ]
        ids = [env["id"] for env in envs]
        batch = await call(mcp, "run_scenario", scenarioId=scenario["id"], environmentIds=ids)
        assert [run["environment"]["id"] for run in batch["runs"]] == ids
        assert {run["batchId"] for run in batch["runs"]} == {batch["batchId"]}

        missing = str(uuid.uuid4())
        refused = await fail(mcp, "run_scenario", scenarioId=scenario["id"], environmentIds=[ids[0], missing])
        assert refused.structured_content["errors"] == {
            "environmentIds[1]": f"no environment with id {missing}"
        }
        neither = await fail(mcp, "run_scenario", scenarioId=scenario["id"])
        assert "environmentId" in neither.structured_content["errors"]
        single = await call(mcp, "run_scenario", scenarioId=scenario["id"], environmentId=ids[0])
        assert single["batchId"] is None
