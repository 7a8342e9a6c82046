"""Use cases of scenario revisions (docs/revisions.md): keep one per change, read, compare, restore.

:func:`record_revision` is the one rule every write of a scenario goes through (REST, MCP, YAML
import, authoring saves, the library, a restore), inside the unit of work that writes the scenario:
a write that changes the content stores the next revision, one that changes nothing stores none.
"""

from __future__ import annotations

import uuid

import attrs

from scenariokit.domain.errors import Conflict, NotFound
from scenariokit.domain.model import Scenario, utcnow
from scenariokit.domain.revisions import (
    Origin,
    Revision,
    RevisionDiff,
    RevisionInfo,
    RevisionSource,
    content_of,
    diff_contents,
    new_revision,
)
from scenariokit.formats.queries import Page, RevisionQuery
from scenariokit.storage.ports import UnitOfWork

from .base import ServiceBase, require
from .caller import current_token_name


def signed(origin: Origin) -> Origin:
    """``origin`` with the name of the token the current call came with, when it names none itself."""
    if origin.token_name is not None:
        return origin
    name = current_token_name()
    return origin if name is None else attrs.evolve(origin, token_name=name)


async def record_revision(uow: UnitOfWork, old: Scenario, new: Scenario, origin: Origin) -> Scenario | None:
    """``new`` at its next revision, stored in ``uow``; None when ``new`` holds what ``old`` held.

    ``old`` is the scenario as stored, read under its lock: revision numbers follow each other per
    scenario, the lock keeps two writers from taking the same one. (A new scenario's revision 1 is
    stored with it: ``ScenarioService.add``.)
    """
    if content_of(old) == content_of(new):
        return None
    number = old.revision + 1
    new = attrs.evolve(new, revision=number)
    await uow.revisions.add(new_revision(new, signed(origin)))
    return new


async def revision_of(uow: UnitOfWork, scenario_id: uuid.UUID, number: int) -> Revision:
    """Revision ``number`` of a scenario; NotFound for an unknown scenario or revision."""
    found = await uow.revisions.get(scenario_id, number)
    if found is None:
        require(await uow.scenarios.get(scenario_id), "scenario", scenario_id)
        raise NotFound("revision", number)
    return found


class RevisionService(ServiceBase):
    """A scenario's revisions: list them, read one, compare two, restore one as a new revision."""

    async def list(self, scenario_id: uuid.UUID, query: RevisionQuery | None = None) -> Page[RevisionInfo]:
        """One page of the scenario's revisions, newest first, without their content."""
        async with self.ctx.uow(readonly=True) as uow:
            page = await uow.revisions.list(scenario_id, query or RevisionQuery())
            if page.total == 0:  # every stored scenario has revision 1 at least: is there one?
                require(await uow.scenarios.get(scenario_id), "scenario", scenario_id)
            return page

    async def get(self, scenario_id: uuid.UUID, number: int) -> Revision:
        """Revision ``number`` with the whole scenario it held."""
        async with self.ctx.uow(readonly=True) as uow:
            return await revision_of(uow, scenario_id, number)

    async def diff(self, scenario_id: uuid.UUID, older: int, newer: int) -> RevisionDiff:
        """What changed from revision ``older`` to ``newer`` (either way round: ``from`` is the first)."""
        async with self.ctx.uow(readonly=True) as uow:
            a = await revision_of(uow, scenario_id, older)
            b = a if newer == older else await revision_of(uow, scenario_id, newer)
        return diff_contents(scenario_id, a, b)

    async def restore(self, scenario_id: uuid.UUID, number: int, *, origin: Origin | None = None) -> Scenario:
        """Make the scenario hold what revision ``number`` held, as a new revision (source ``restore``).

        History is never rewritten: the restored content becomes the next revision. Restoring the
        content the scenario already holds makes none. A step id of that revision now held by another
        scenario (given away by an import since) gets a new id.
        """
        origin = (origin or Origin()).through(RevisionSource.RESTORE)
        async with self.ctx.uow() as uow:
            old = require(await uow.scenarios.get(scenario_id, lock=True), "scenario", scenario_id)
            revision = await revision_of(uow, scenario_id, number)
            wanted = revision.as_scenario(old)
            await _check_still_there(uow, revision)
            owners = await uow.scenarios.step_owners([step.id for step in wanted.steps])
            taken = {ident for ident, owner in owners.items() if owner != scenario_id}
            if taken:
                steps = tuple(
                    attrs.evolve(step, id=uuid.uuid4()) if step.id in taken else step for step in wanted.steps
                )
                wanted = attrs.evolve(wanted, steps=steps)
            saved = await save_scenario(uow, old, wanted, origin)
            await uow.commit()
        return saved


async def _check_still_there(uow: UnitOfWork, revision: Revision) -> None:
    """Conflict when the environment or a credential the revision names was deleted since."""
    content = revision.content
    missing = []
    if content.environment_id is not None and await uow.environments.get(content.environment_id) is None:
        missing.append(f"environment {content.environment_id}")
    ids = [link.credential_id for link in content.credentials]
    found = {credential.id for credential in await uow.credentials.get_many(ids)} if ids else set()
    missing.extend(f"credential {ident}" for ident in ids if ident not in found)
    if missing:
        raise Conflict(
            f"revision {revision.number} names records deleted since: {', '.join(missing)}; "
            "change the scenario instead"
        )


async def save_scenario(uow: UnitOfWork, old: Scenario, new: Scenario, origin: Origin) -> Scenario:
    """Write ``new`` over ``old`` (locked) with its revision, in ``uow``; the caller commits.

    A write that changes nothing writes nothing and answers ``old``.
    """
    revised = await record_revision(uow, old, new, origin)
    if revised is None:
        return old
    revised = attrs.evolve(revised, updated_at=max(utcnow(), old.updated_at))
    await uow.scenarios.update(revised)
    if revised.name != old.name:
        await uow.runs.rename_scenario(revised.id, revised.name)
    return revised
