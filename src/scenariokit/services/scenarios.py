"""Use cases of scenarios, their steps and their credential links."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import attrs

from scenariokit.domain.errors import Conflict, NotFound, ValidationError
from scenariokit.domain.model import CredentialLink, RunStatus, Scenario, Step, utcnow
from scenariokit.formats.convert import errors_of
from scenariokit.formats.inputs import LinkInput, Patch, ScenarioInput, StepInput, StepOrderInput
from scenariokit.formats.queries import Page, RunQuery, ScenarioQuery
from scenariokit.formats.records import ScenarioRecord
from scenariokit.storage.ports import UnitOfWork

from . import audit
from .base import ServiceBase, missing_reference, require

#: What a PATCH starts from: the fields of a stored scenario and step that their inputs write.
_SCENARIO_FIELDS = ("name", "description", "environment_id", "timeout_seconds", "retries", "browser")
_STEP_FIELDS = ("exec_code", "title", "order", "timeout_seconds")


def build_steps(inputs: Sequence[StepInput], *, keep_ids: bool = True) -> tuple[Step, ...]:
    """Steps from inputs, numbered 1..n: by their ``order`` where given, else in the order listed."""
    indexed = sorted(
        enumerate(inputs),
        key=lambda pair: (pair[1].order if pair[1].order is not None else pair[0] + 1, pair[0]),
    )
    steps = []
    for position, (_, item) in enumerate(indexed, start=1):
        kwargs: dict[str, Any] = {}
        if keep_ids and item.id is not None:
            kwargs["id"] = item.id
        steps.append(
            Step(
                exec_code=item.exec_code,
                title=item.title,
                order=position,
                timeout_seconds=item.timeout_seconds,
                **kwargs,
            )
        )
    return tuple(steps)


def renumber(steps: Sequence[Step]) -> tuple[Step, ...]:
    """The same steps numbered 1..n in their current sequence."""
    return tuple(attrs.evolve(step, order=i) for i, step in enumerate(steps, start=1))


class ScenarioService(ServiceBase):
    """Create, read, update and delete scenarios, steps and credential links."""

    # --- checks ---------------------------------------------------------------------------------

    async def _check_references(
        self, uow: UnitOfWork, environment_id: uuid.UUID | None, links: Sequence[LinkInput] | None
    ) -> None:
        errors: dict[str, str] = {}
        if environment_id is not None and await uow.environments.get(environment_id) is None:
            errors["environmentId"] = f"no environment with id {environment_id}"
        if links:
            found = {c.id for c in await uow.credentials.get_many([link.credential_id for link in links])}
            for i, link in enumerate(links):
                if link.credential_id not in found:
                    errors[f"credentials[{i}].credentialId"] = f"no credential with id {link.credential_id}"
        if errors:
            raise ValidationError("the scenario refers to missing records", errors)

    async def _get(self, uow: UnitOfWork, scenario_id: uuid.UUID) -> Scenario:
        return require(await uow.scenarios.get(scenario_id), "scenario", scenario_id)

    async def _locked(self, uow: UnitOfWork, scenario_id: uuid.UUID) -> Scenario:
        """The scenario, locked until ``uow`` ends: every change is a read-merge-write under it."""
        return require(await uow.scenarios.get(scenario_id, lock=True), "scenario", scenario_id)

    async def _save(self, uow: UnitOfWork, old: Scenario, new: Scenario) -> Scenario:
        new = attrs.evolve(new, updated_at=max(utcnow(), old.updated_at))
        await uow.scenarios.update(new)
        if new.name != old.name:
            await uow.runs.rename_scenario(new.id, new.name)
        await uow.commit()
        return new

    def scenario_from_input(self, data: ScenarioInput, base: Scenario | None = None) -> Scenario:
        """The scenario a checked input describes, laid over ``base`` when updating one."""
        try:
            fields: dict[str, Any] = {
                "name": data.name.strip(),
                "description": data.description,
                "environment_id": data.environment_id,
                "timeout_seconds": data.timeout_seconds,
                "retries": data.retries,
                "browser": data.browser,
            }
            if data.steps is not None:
                fields["steps"] = build_steps(data.steps)
            if data.credentials is not None:
                fields["credentials"] = tuple(
                    CredentialLink(credential_id=link.credential_id, alias=link.alias)
                    for link in data.credentials
                )
            return attrs.evolve(base, **fields) if base else Scenario(**fields)
        except ValueError as exc:
            raise ValidationError("invalid scenario", errors_of(exc)) from None

    # --- scenarios ------------------------------------------------------------------------------

    async def list(self, query: ScenarioQuery | None = None) -> Page[Scenario]:
        """One page of scenarios (newest change first unless the query says otherwise)."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.scenarios.list(query or ScenarioQuery())

    async def list_records(self, query: ScenarioQuery | None = None) -> Page[ScenarioRecord]:
        """The page :meth:`list` gives, as read records: what REST and MCP answer a list with.

        No domain value is built for a row only to be turned into JSON again
        (:func:`scenariokit.formats.presenters.scenario_record_json` shapes them).
        """
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.scenarios.list_records(query or ScenarioQuery())

    async def get(self, scenario_id: uuid.UUID) -> Scenario:
        """One scenario with its steps and links."""
        async with self.ctx.uow(readonly=True) as uow:
            return await self._get(uow, scenario_id)

    async def create(self, command: ScenarioInput) -> Scenario:
        """Create a scenario, with its steps and credential links when given."""
        scenario = self.scenario_from_input(command)
        async with self.ctx.uow() as uow:
            await self._check_references(uow, command.environment_id, command.credentials)
            if command.steps and any(s.id for s in command.steps):
                scenario = attrs.evolve(scenario, steps=build_steps(command.steps, keep_ids=False))
            await uow.scenarios.add(scenario)
            await audit.record(
                uow, "create", "scenario", scenario.id,
                f"created scenario {scenario.name!r} with {len(scenario.steps)} step(s)",
            )  # fmt: skip
            await uow.commit()
        return scenario

    async def replace(self, scenario_id: uuid.UUID, command: ScenarioInput) -> Scenario:
        """Replace a scenario's fields (PUT); its steps and links too when the body gives them."""
        async with self.ctx.uow() as uow:
            return await self._replace(uow, await self._locked(uow, scenario_id), command)

    async def _replace(self, uow: UnitOfWork, old: Scenario, command: ScenarioInput) -> Scenario:
        await self._check_references(uow, command.environment_id, command.credentials)
        new = self.scenario_from_input(command, old)
        if command.steps is not None:
            known = {step.id for step in old.steps}
            kept = [s if s.id in known else attrs.evolve(s, id=None) for s in command.steps]
            new = attrs.evolve(new, steps=build_steps(kept))
        await audit.record(uow, "update", "scenario", old.id, f"changed scenario {new.name!r}")
        return await self._save(uow, old, new)

    async def update(self, scenario_id: uuid.UUID, patch: Patch[ScenarioInput]) -> Scenario:
        """Change some fields of a scenario (PATCH); fields not named keep their value.

        Read, merge and write happen in one unit of work with the scenario locked, so two PATCHes of
        different fields both survive. Steps and links change only when the patch gives them.
        """
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            current = {name: getattr(old, name) for name in _SCENARIO_FIELDS}
            return await self._replace(uow, old, patch.applied_to(current, ScenarioInput))

    async def delete(self, scenario_id: uuid.UUID) -> None:
        """Delete a scenario with its steps, credential links and finished runs.

        While a run of it is in progress the delete is refused (:class:`Conflict`): the run's worker
        still writes its log and result, so the run must be cancelled or finish first.
        """
        async with self.ctx.uow() as uow:
            running = await uow.runs.list(
                RunQuery(status=RunStatus.IN_PROGRESS, scenario_id=scenario_id, limit=1)
            )
            if running.total:
                raise Conflict(
                    f"scenario {scenario_id} has {running.total} run(s) in progress; cancel them or let "
                    "them finish first"
                )
            if not await uow.scenarios.delete(scenario_id):
                raise NotFound("scenario", scenario_id)
            await audit.record(uow, "delete", "scenario", scenario_id, f"deleted scenario {scenario_id}")
            await uow.commit()

    # --- steps ----------------------------------------------------------------------------------

    async def list_steps(self, scenario_id: uuid.UUID) -> tuple[Step, ...]:
        """The steps of a scenario in order."""
        return (await self.get(scenario_id)).steps

    async def get_step(self, scenario_id: uuid.UUID, step_id: uuid.UUID) -> Step:
        """One step of a scenario."""
        scenario = await self.get(scenario_id)
        return require(scenario.step(step_id), "step", step_id)

    def _step(self, command: StepInput, **fields: Any) -> Step:
        return Step(
            exec_code=command.exec_code,
            title=command.title,
            timeout_seconds=command.timeout_seconds,
            **fields,
        )

    @staticmethod
    def _insert(steps: Sequence[Step], step: Step, order: int | None) -> tuple[Step, ...]:
        position = len(steps) if order is None else min(max(order, 1), len(steps) + 1) - 1
        placed = list(steps)
        placed.insert(position, step)
        return renumber(placed)

    async def add_step(self, scenario_id: uuid.UUID, command: StepInput) -> Step:
        """Add a step: at ``order`` when given (later steps move down), else at the end."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            step = self._step(command)
            steps = self._insert(old.steps, step, command.order)
            await audit.record(uow, "create", "step", step.id, f"added a step to scenario {old.name!r}")
            saved = await self._save(uow, old, attrs.evolve(old, steps=steps))
        return require(saved.step(step.id), "step", step.id)

    async def replace_step(self, scenario_id: uuid.UUID, step_id: uuid.UUID, command: StepInput) -> Step:
        """Replace a step (PUT); a new ``order`` moves it."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            return await self._replace_step(uow, old, step_id, command)

    async def _replace_step(
        self, uow: UnitOfWork, old: Scenario, step_id: uuid.UUID, command: StepInput
    ) -> Step:
        current = require(old.step(step_id), "step", step_id)
        others = [s for s in old.steps if s.id != step_id]
        step = self._step(command, id=step_id)
        order = command.order if command.order is not None else current.order
        await audit.record(uow, "update", "step", step_id, f"changed step {order} of scenario {old.name!r}")
        saved = await self._save(uow, old, attrs.evolve(old, steps=self._insert(others, step, order)))
        return require(saved.step(step_id), "step", step_id)

    async def update_step(self, scenario_id: uuid.UUID, step_id: uuid.UUID, patch: Patch[StepInput]) -> Step:
        """Change some fields of a step (PATCH), read and written under one lock of its scenario."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            step = require(old.step(step_id), "step", step_id)
            current = {name: getattr(step, name) for name in _STEP_FIELDS}
            return await self._replace_step(uow, old, step_id, patch.applied_to(current, StepInput))

    async def delete_step(self, scenario_id: uuid.UUID, step_id: uuid.UUID) -> None:
        """Delete a step; the steps after it move up."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            require(old.step(step_id), "step", step_id)
            steps = renumber([s for s in old.steps if s.id != step_id])
            await audit.record(uow, "delete", "step", step_id, f"deleted a step of scenario {old.name!r}")
            await self._save(uow, old, attrs.evolve(old, steps=steps))

    async def reorder_steps(self, scenario_id: uuid.UUID, command: StepOrderInput) -> tuple[Step, ...]:
        """Put the steps in the order of ``stepIds`` (every step id, once) and number them 1..n."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            by_id = {step.id: step for step in old.steps}
            wanted = list(command.step_ids)
            if len(set(wanted)) != len(wanted) or set(wanted) != set(by_id):
                raise ValidationError(
                    "stepIds must name every step of the scenario exactly once",
                    {"stepIds": f"must be a permutation of the scenario's {len(by_id)} step ids"},
                )
            steps = renumber([by_id[ident] for ident in wanted])
            await audit.record(uow, "update", "scenario", old.id, f"reordered the steps of {old.name!r}")
            saved = await self._save(uow, old, attrs.evolve(old, steps=steps))
        return saved.steps

    # --- credential links -----------------------------------------------------------------------

    async def list_links(self, scenario_id: uuid.UUID) -> tuple[CredentialLink, ...]:
        """The credentials linked to a scenario, with their aliases."""
        return (await self.get(scenario_id)).credentials

    async def link_credential(self, scenario_id: uuid.UUID, command: LinkInput) -> CredentialLink:
        """Link a credential under an alias (unique within the scenario)."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            if await uow.credentials.get(command.credential_id) is None:
                raise missing_reference("credentialId", "credential", command.credential_id)
            if old.link(command.credential_id) is not None:
                raise Conflict(f"credential {command.credential_id} is already linked to this scenario")
            if any(link.alias == command.alias for link in old.credentials):
                raise Conflict(f"alias {command.alias!r} is already used in this scenario")
            link = CredentialLink(credential_id=command.credential_id, alias=command.alias)
            await audit.record(
                uow, "link", "scenario", old.id,
                f"linked credential {command.credential_id} as {command.alias!r} to {old.name!r}",
            )  # fmt: skip
            await self._save(uow, old, attrs.evolve(old, credentials=(*old.credentials, link)))
        return link

    async def unlink_credential(self, scenario_id: uuid.UUID, credential_id: uuid.UUID) -> None:
        """Remove a credential link."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, scenario_id)
            removed = old.link(credential_id)
            if removed is None:
                raise NotFound("credential link", credential_id)
            used = old.browser.http_credentials
            if used is not None and used.credential == removed.alias:
                raise Conflict(
                    f"alias {removed.alias!r} answers the scenario's HTTP authentication "
                    "(browser.httpCredentials); change its browser settings first"
                )
            links = tuple(link for link in old.credentials if link.credential_id != credential_id)
            await audit.record(
                uow, "unlink", "scenario", old.id, f"unlinked credential {credential_id} from {old.name!r}"
            )
            await self._save(uow, old, attrs.evolve(old, credentials=links))
