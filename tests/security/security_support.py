"""What the hostile-step suite shares: the secrets it plants and the store it attacks."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import attrs

import scenariokit

#: the linked secret, with a space and a quote so that every encoding differs from it
SECRET = 'Hunter2 Sup3r"S3cret!'
#: a second scenario's secret (the masker-patching attack prints it from another run)
VICTIM_SECRET = "Victim-Pa55word/+=?&"
#: a credential no scenario links: no run may ever see it
UNLINKED_SECRET = "OtherTenantSecret-42"


@attrs.frozen
class Hostile:
    """What the hostile steps attack, and how to run them."""

    kit: scenariokit.Kit
    mode: str
    #: how its workers come to exist: ``zygote`` (forked) or ``exec``
    started: str
    folder: Path
    database: Path
    key: Path
    artifacts: Path
    env_id: uuid.UUID
    credential_id: uuid.UUID
    victim_credential_id: uuid.UUID
    key_text: str
    #: a name only this store's attacks use (files they plant carry it)
    mark: str

    async def run(
        self,
        name: str,
        *steps: str,
        credential: uuid.UUID | None = None,
        step_timeout: float = 30,
        environment_id: uuid.UUID | None = None,
    ) -> Any:
        """Run a scenario of ``steps`` (linked to ``credential`` as ``admin``) to its end."""
        body: dict[str, Any] = {
            "name": name,
            "steps": [
                {"title": f"step {n}", "execCode": code, "timeoutSeconds": step_timeout}
                for n, code in enumerate(steps, start=1)
            ],
        }
        if credential is not None:
            body["credentials"] = [{"credentialId": str(credential), "alias": "admin"}]
        scenario = await self.kit.scenarios.create(body)
        return await self.kit.run(scenario.id, environment_id=environment_id or self.env_id, timeout=240)
