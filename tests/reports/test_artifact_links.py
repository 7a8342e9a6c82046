"""Signed artifact links (scenariokit_server.trace.ArtifactLinks): what one opens, and what it does not."""

from __future__ import annotations

import uuid
from urllib.parse import quote

from aiohttp.test_utils import make_mocked_request

from scenariokit.domain.model import Run
from scenariokit_server.trace import LINK_SECONDS, ArtifactLinks

NOW = 1_800_000_000.0
RUN = uuid.UUID("6f4515f0-9222-4bfe-bf16-210012b801c8")
LINKS = ArtifactLinks.for_tokens(("a-token-of-sixteen-chars",))


def allowed(url: str, *, method: str = "GET", now: float = NOW, links: ArtifactLinks = LINKS) -> bool:
    return links.allows(make_mocked_request(method, url), now=now)


def test_a_link_opens_its_file_until_it_expires() -> None:
    url = LINKS.url(RUN, "trace.zip", now=NOW)
    assert url.startswith(f"/api/v1/run/{RUN}/artifacts/trace.zip?expires={int(NOW) + LINK_SECONDS}&sig=")
    assert allowed(url)
    assert allowed(url, now=NOW + LINK_SECONDS)
    assert not allowed(url, now=NOW + LINK_SECONDS + 1)
    assert not allowed(url, method="DELETE") and not allowed(url, method="POST")


def test_a_link_opens_nothing_else() -> None:
    url = LINKS.url(RUN, "trace.zip", now=NOW)
    path, query = url.split("?")
    expires = query.split("&")[0].split("=")[1]
    other = uuid.UUID("00000000-0000-4000-8000-000000000000")
    refused = [
        url.replace("trace.zip", "step-2.png"),
        url.replace(str(RUN), str(other)),
        url.replace(f"expires={expires}", f"expires={int(expires) + 1}"),
        url.replace(f"expires={expires}", "expires=%C2%B2"),  # a digit, but not an ASCII one
        url.replace(f"expires={expires}", "expires=" + "9" * 21),
        url + "&sig=again",
        url + "&extra=1",
        path,
        f"/api/v1/run/{RUN}?{query}",
        f"/api/v1/run/{RUN}/cancel?{query}",
        f"/api/v1/scenarios?{query}",
        f"/api/v1/run/not-a-uuid/artifacts/trace.zip?{query}",
    ]
    for candidate in refused:
        assert not allowed(candidate), candidate
    assert not allowed(url, links=ArtifactLinks.for_tokens(("another-token-of-16chars",)))
    assert not allowed(url, links=ArtifactLinks()), "without tokens nothing is signed, nothing is let by"


def test_without_tokens_links_are_plain_and_the_viewer_url_names_the_trace() -> None:
    run = Run(scenario_id=RUN, environment_id=RUN, id=RUN, artifacts=("step-2.png", "trace.zip"))
    plain = ArtifactLinks()
    assert plain.url(RUN, "step-2.png") == f"/api/v1/run/{RUN}/artifacts/step-2.png"
    trace = quote(f"/api/v1/run/{RUN}/artifacts/trace.zip", safe="")
    assert plain.viewer_url(run) == f"/trace/index.html?trace={trace}"
    assert plain.viewer_url(Run(scenario_id=RUN, environment_id=RUN, artifacts=("step-1.png",))) is None
    signed = LINKS.viewer_url(run, now=NOW)
    assert signed is not None and quote(LINKS.url(RUN, "trace.zip", now=NOW), safe="") in signed
