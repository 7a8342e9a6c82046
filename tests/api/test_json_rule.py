"""One JSON rule for every body: depth 64, finite numbers, 64-bit whole numbers, never a server fault."""

from __future__ import annotations

import pytest
from api_support import API, Client, problem_of

from scenariokit.domain.json_values import MAX_DEPTH

JSON = {"Content-Type": "application/json"}


def _deep(depth: int) -> str:
    """A body ``depth`` levels deep in all: the environment object around nested ``data``."""
    inner = '{"a": ' * (depth - 1) + "1" + "}" * (depth - 1)
    return '{"name": "deep", "data": ' + inner + "}"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (_deep(MAX_DEPTH + 1), "64 deep"),
        (_deep(100_000), "64 deep"),
        ('{"name": "x", "data": ' + "[" * 100_000 + "]" * 100_000 + "}", "64 deep"),
        ('{"name": "x", "data": {"v": NaN}}', "NaN"),
        ('{"name": "x", "data": {"v": Infinity}}', "Infinity"),
        ('{"name": "x", "data": {"v": 1e400}}', "64-bit float"),
        ('{"name": "x", "data": {"v": 9223372036854775808}}', "whole numbers"),
        ('{"name": "x", "data": {"v": ' + "1" * 5000 + "}}", "whole numbers"),
    ],
)
async def test_a_body_the_rule_refuses_gets_400_and_stores_nothing(
    client: Client, body: str, why: str
) -> None:
    problem = await problem_of(await client.post(f"{API}/environments", data=body, headers=JSON), 400)
    assert why in problem["errors"]["$"]
    assert (await (await client.get(f"{API}/environments")).json())["total"] == 0


async def test_a_body_at_the_limit_is_kept_and_read_back(client: Client) -> None:
    response = await client.post(f"{API}/environments", data=_deep(MAX_DEPTH), headers=JSON)
    assert response.status == 201, await response.text()
    edge = '{"name": "edges", "data": {"max": 9223372036854775807, "min": -9223372036854775808, "f": 1e308}}'
    assert (await client.post(f"{API}/environments", data=edge, headers=JSON)).status == 201
    listed = await client.get(f"{API}/environments")
    assert listed.status == 200 and (await listed.json())["total"] == 2
    for item in (await listed.json())["items"]:
        assert (await client.get(f"{API}/environments/{item['id']}/export")).status == 200


async def test_a_yaml_integer_of_5000_digits_is_refused_with_its_line(client: Client) -> None:
    text = "kind: environment\nname: big\ndata:\n  n: " + "9" * 5000 + "\n"
    response = await client.post(
        f"{API}/environments/import", data=text, headers={"Content-Type": "application/yaml"}
    )
    problem = await problem_of(response, 400)
    assert "documents[0].data.n (line 4)" in problem["detail"]
    assert (await (await client.get(f"{API}/environments")).json())["total"] == 0
