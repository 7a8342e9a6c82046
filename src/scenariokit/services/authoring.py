"""Use cases of agent authoring (docs/authoring.md): start a live session, exec code, look, save, end.

The live part (a sandboxed worker holding the browser) is the :class:`~.base.AuthoringControl` the
scheduler sets; here are the rules: what a session starts from (an environment, maybe a saved
session, maybe the first ``upToStep`` steps of a scenario, the credentials its code may read), and
what saving writes (the replayed steps, then the execs that passed or those named in ``keep``, in
order, as a new scenario or in place of a scenario's steps after ``upToStep``), in one unit of work.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import attrs

from scenariokit.domain.authoring import (
    AuthoredExec,
    AuthoringRecord,
    AuthoringStarted,
    ExecOutcome,
    PageLook,
)
from scenariokit.domain.browser import NO_BROWSER_SETTINGS, run_settings
from scenariokit.domain.errors import Conflict, ValidationError
from scenariokit.domain.job import CredentialValue, RunJob, browser_job_fields, step_job
from scenariokit.domain.model import CredentialLink, FieldError, Scenario, Step
from scenariokit.domain.revisions import Origin, RevisionSource
from scenariokit.formats.inputs import AuthoringExecInput, AuthoringSaveInput, AuthoringStartInput
from scenariokit.storage.ports import UnitOfWork

from . import audit
from .base import ServiceBase, missing_reference, require
from .revisions import save_scenario
from .scenarios import ScenarioService, renumber


class AuthoringService(ServiceBase):
    """Live authoring sessions: the agent's exploration, kept as a scenario of the code that ran."""

    async def start(self, command: AuthoringStartInput) -> AuthoringStarted:
        """Open a live browser from an environment (a saved session, a scenario's first steps replayed)."""
        authoring_id = uuid.uuid4()
        async with self.ctx.uow(readonly=True) as uow:
            environment = await uow.environments.get(command.environment_id)
            if environment is None:
                raise missing_reference("environmentId", "environment", command.environment_id)
            scenario = None
            if command.scenario_id is not None:
                scenario = await uow.scenarios.get(command.scenario_id)
                if scenario is None:
                    raise missing_reference("scenarioId", "scenario", command.scenario_id)
            up_to = _up_to_step(command, scenario)
            replayed = scenario.steps[:up_to] if scenario is not None else ()
            links = await self._links(uow, scenario, command)
            state = None
            if command.session_id is not None:
                session = await uow.sessions.get(command.session_id)
                if session is None or session.storage_state is None:
                    raise missing_reference("sessionId", "saved session", command.session_id)
                state = session.storage_state
            found = {c.id: c for c in await uow.credentials.get_many([x.credential_id for x in links])}
            snippets = await uow.snippets.code_by_alias()  # code typed later may call any
        steps = tuple(step_job(step) for step in replayed)
        for step in steps:
            if step.syntax_error is not None:
                line, message = step.syntax_error
                raise ValidationError(
                    "a step to replay does not compile",
                    {"upToStep": f"step {step.order} does not compile: {message} (line {line})"},
                )
        try:
            browser = run_settings(
                environment.browser,
                scenario.browser if scenario is not None else NO_BROWSER_SETTINGS,
                {link.alias for link in links},
            )
        except FieldError as exc:
            why = f"environment {environment.name!r}: {exc.message}"
            raise ValidationError(f"invalid authoring session: {why}", {exc.field: why}) from None
        # what an agent explores is what a run will see; a session records no video (it has no end
        # a recording would be kept for)
        browser = attrs.evolve(browser, video=None)
        job = RunJob(
            run_id=authoring_id,
            scenario_id=scenario.id if scenario is not None else authoring_id,
            scenario_name=scenario.name if scenario is not None else "authoring",
            steps=steps,
            env_name=environment.name,
            env_data=dict(environment.data),
            credentials=tuple(
                CredentialValue(alias=link.alias, username=cred.username, secret=cred.secret)
                for link in links
                if (cred := found.get(link.credential_id)) is not None
            ),
            snippets=snippets,
            storage_state=state,
            artifacts_dir=Path("artifacts"),
            trace="off",
            **browser_job_fields(browser),
        )
        record = AuthoringRecord(
            id=authoring_id,
            environment_id=environment.id,
            scenario_id=scenario.id if scenario is not None else None,
            up_to_step=up_to,
            replayed=tuple(replayed),
            links=links,
            session_id=command.session_id,
        )
        return await self.ctx.authoring.open(record, job)

    async def _links(
        self, uow: UnitOfWork, scenario: Scenario | None, command: AuthoringStartInput
    ) -> tuple[CredentialLink, ...]:
        """The scenario's credential links plus those the start names (each alias once)."""
        links = list(scenario.credentials) if scenario is not None else []
        extra = command.credentials or ()
        if extra:
            known = {c.id for c in await uow.credentials.get_many([link.credential_id for link in extra])}
            errors: dict[str, str] = {}
            aliases = {link.alias: link.credential_id for link in links}
            for i, link in enumerate(extra):
                if link.credential_id not in known:
                    errors[f"credentials[{i}].credentialId"] = f"no credential with id {link.credential_id}"
                elif aliases.get(link.alias, link.credential_id) != link.credential_id:
                    errors[f"credentials[{i}].alias"] = (
                        f"alias {link.alias!r} is already linked to another credential"
                    )
                elif link.alias not in aliases:
                    aliases[link.alias] = link.credential_id
                    links.append(CredentialLink(credential_id=link.credential_id, alias=link.alias))
            if errors:
                raise ValidationError("the session refers to missing or clashing credentials", errors)
        return tuple(links)

    async def exec(self, authoring_id: uuid.UUID, command: AuthoringExecInput) -> ExecOutcome:
        """Execute step code in the live page: ok or the error, the log, and the page after it."""
        return await self.ctx.authoring.exec(
            authoring_id,
            command.code,
            title=command.title,
            timeout_seconds=command.timeout_seconds,
            screenshot=command.screenshot,
        )

    async def look(self, authoring_id: uuid.UUID, *, screenshot: bool = False) -> PageLook:
        """The live page: URL, title, ARIA snapshot (and a screenshot when asked)."""
        return await self.ctx.authoring.look(authoring_id, screenshot=screenshot)

    async def end(self, authoring_id: uuid.UUID) -> None:
        """Close the live browser and forget the session (execs not saved are gone)."""
        await self.ctx.authoring.end(authoring_id)

    async def save(
        self, authoring_id: uuid.UUID, command: AuthoringSaveInput, *, origin: Origin | None = None
    ) -> Scenario:
        """Write the replayed steps and the kept execs as a new scenario, or into the scenario replayed.

        The session stays live: the agent may go on and save again (into the scenario it saved). The
        write is a revision of source ``authoring``, with the command's ``message``.
        """
        origin = attrs.evolve(
            (origin or Origin()).through(RevisionSource.AUTHORING),
            message=command.message if command.message is not None else (origin or Origin()).message,
        )
        record = self.ctx.authoring.record(authoring_id)
        if command.name is not None and command.scenario_id is not None:
            raise ValidationError(
                "give name (a new scenario) or scenarioId (an existing one), not both",
                {"name": "not with scenarioId", "scenarioId": "not with name"},
            )
        if command.name is None and command.scenario_id is None:
            raise ValidationError(
                "say where to save: name (a new scenario) or scenarioId (the scenario replayed)",
                {"name": "is required unless scenarioId is given"},
            )
        authored = tuple(_authored_step(item) for item in _kept(record.execs, command.keep))
        if command.name is not None:
            return await self._save_new(record, command.name.strip(), authored, origin)
        assert command.scenario_id is not None
        return await self._save_into(record, command.scenario_id, authored, origin)

    async def _save_new(
        self, record: AuthoringRecord, name: str, authored: Sequence[Step], origin: Origin
    ) -> Scenario:
        copies = [
            Step(exec_code=s.exec_code, title=s.title, timeout_seconds=s.timeout_seconds)
            for s in record.replayed
        ]
        async with self.ctx.uow() as uow:
            environment_id: uuid.UUID | None = record.environment_id
            if await uow.environments.get(record.environment_id) is None:
                environment_id = None  # deleted meanwhile: the scenario is still worth keeping
            present = {c.id for c in await uow.credentials.get_many([x.credential_id for x in record.links])}
            scenario = Scenario(
                name=name,
                environment_id=environment_id,
                credentials=tuple(link for link in record.links if link.credential_id in present),
                steps=renumber([*copies, *authored]),
            )
            scenario = await ScenarioService.add(uow, scenario, origin)
            await audit.record(
                uow, "save", "scenario", scenario.id, f"saved authoring session {record.id} as {name!r}"
            )
            await uow.commit()
        record.saved.add(scenario.id)
        return scenario

    async def _save_into(
        self, record: AuthoringRecord, scenario_id: uuid.UUID, authored: Sequence[Step], origin: Origin
    ) -> Scenario:
        if scenario_id != record.scenario_id and scenario_id not in record.saved:
            raise ValidationError(
                "a session saves into the scenario it replayed (or one it saved), else as a new one",
                {"scenarioId": "is not the scenario this session replayed or saved; give name instead"},
            )
        kept = record.up_to_step if scenario_id == record.scenario_id else len(record.replayed)
        async with self.ctx.uow() as uow:
            old = require(await uow.scenarios.get(scenario_id, lock=True), "scenario", scenario_id)
            prefix = old.steps[:kept]
            if [s.exec_code for s in prefix] != [s.exec_code for s in record.replayed[: len(prefix)]] or (
                len(prefix) < kept
            ):
                raise Conflict(
                    f"the first {kept} step(s) of scenario {scenario_id} changed since the session replayed "
                    "them; start a new session from it, or save as a new scenario with name"
                )
            links = list(old.credentials)
            for link in record.links:
                if old.link(link.credential_id) is None and all(x.alias != link.alias for x in links):
                    links.append(link)
            new = attrs.evolve(old, steps=renumber([*prefix, *authored]), credentials=tuple(links))
            saved = await save_scenario(uow, old, new, origin)
            await audit.record(
                uow, "save", "scenario", new.id, f"saved authoring session {record.id} into {new.name!r}"
            )
            await uow.commit()
        return saved


def _up_to_step(command: AuthoringStartInput, scenario: Scenario | None) -> int:
    """How many of the scenario's steps to replay: ``upToStep``, else all of them."""
    if scenario is None:
        if command.up_to_step:
            raise ValidationError(
                "upToStep needs scenarioId", {"upToStep": "replays a scenario's steps: give scenarioId too"}
            )
        return 0
    if command.up_to_step is None:
        return len(scenario.steps)
    if command.up_to_step > len(scenario.steps):
        raise ValidationError(
            "upToStep is beyond the scenario's steps",
            {"upToStep": f"must be at most {len(scenario.steps)}, the scenario's number of steps"},
        )
    return command.up_to_step


def _kept(execs: Sequence[AuthoredExec], keep: Sequence[int] | None) -> list[AuthoredExec]:
    """The execs to save, in the order they ran: those that passed, or those ``keep`` names."""
    if keep is None:
        return [item for item in execs if item.ok]
    by_index = {item.index: item for item in execs}
    errors = {}
    for position, index in enumerate(keep):
        item = by_index.get(index)
        if item is None:
            errors[f"keep[{position}]"] = f"no exec {index} in this session (it has {len(execs)})"
        elif not item.ok:
            errors[f"keep[{position}]"] = f"exec {index} failed; only execs that passed are saved"
    if errors:
        raise ValidationError("keep names execs that cannot be saved", errors)
    return [by_index[index] for index in sorted(set(keep))]


def _authored_step(item: AuthoredExec) -> Step:
    return Step(exec_code=item.code, title=item.title, timeout_seconds=item.timeout_seconds)
