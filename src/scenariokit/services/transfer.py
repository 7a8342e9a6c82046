"""Use cases of YAML export and import (the specification's nine export and import rules).

The format itself (documents, key order, block scalars, safe loading) lives in
:mod:`scenariokit.formats.yaml_io`; this module decides what goes into an export and how an import is checked
and written. An import is one unit of work: everything is checked first (shape, fields, references,
uniqueness) and nothing is stored unless all of it fits.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from scenariokit.domain.access import Scope
from scenariokit.domain.code import StepCodeWarning, step_warnings
from scenariokit.domain.errors import Conflict, Forbidden, ValidationError
from scenariokit.domain.model import Scenario, utcnow
from scenariokit.domain.revisions import Origin, RevisionSource
from scenariokit.formats.convert import structure_input
from scenariokit.formats.inputs import (
    CredentialInput,
    EnvironmentInput,
    ScenarioInput,
    ScheduleInput,
    SnippetInput,
)
from scenariokit.formats.yaml_io import (
    KINDS,
    MAX_YAML_BYTES,
    Entity,
    credential_document,
    dump_document,
    dump_stream,
    environment_document,
    load_entities,
    scenario_document,
    schedule_document,
    snippet_document,
)
from scenariokit.storage.ports import Repository, UnitOfWork

from . import audit
from .base import Context, ServiceBase, require
from .caller import current_caller
from .catalog import CredentialService, EnvironmentService, SnippetService
from .revisions import save_scenario
from .scenarios import ScenarioService
from .schedules import check_schedule_references, schedule_from_input

#: The kinds each import endpoint takes. A scenario export carries environments and credentials, so
#: the scenario import takes them too; every other endpoint takes only its own kind.
ACCEPTED_KINDS: dict[str, tuple[str, ...]] = {
    "scenario": ("scenario", "environment", "credential"),
    "environment": ("environment",),
    "credential": ("credential",),
    "snippet": ("snippet",),
    "schedule": ("schedule",),
}
_INPUTS: dict[str, type] = {
    "scenario": ScenarioInput,
    "environment": EnvironmentInput,
    "credential": CredentialInput,
    "snippet": SnippetInput,
    "schedule": ScheduleInput,
}
# What scenarios refer to is written before them (rule 7).
_WRITE_ORDER = ("environment", "credential", "snippet", "scenario", "schedule")
_CHUNK = 500


@attrs.frozen
class ImportReport:
    """What an import did: the ids it created and updated, per kind, in document order."""

    created: dict[str, tuple[uuid.UUID, ...]]
    updated: dict[str, tuple[uuid.UUID, ...]]
    #: mistakes in the imported scenarios' step code, reported, not refused (docs/step-code.md)
    warnings: tuple[StepCodeWarning, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON body: ``created`` and ``updated`` ids per kind, ``counts`` of both, ``warnings``."""
        return {
            "warnings": [warning.to_json() for warning in self.warnings],
            "created": {kind: [str(i) for i in ids] for kind, ids in self.created.items()},
            "updated": {kind: [str(i) for i in ids] for kind, ids in self.updated.items()},
            "counts": {
                "created": sum(len(ids) for ids in self.created.values()),
                "updated": sum(len(ids) for ids in self.updated.values()),
            },
        }


#: What importing each kind needs of the caller's token (the scopes of its own routes).
IMPORT_SCOPES = {"credential": Scope.ADMIN, "schedule": Scope.ADMIN}


def _check_scope(items: Sequence[_Item]) -> None:
    """Refuse an import holding a kind the caller's token may not write (a credential in a scenario
    stream, say), before anything is stored."""
    caller = current_caller()
    for item in items:
        needed = IMPORT_SCOPES.get(item.kind, Scope.WRITE)
        if not caller.allows(needed):
            raise Forbidden(
                f"{item.entity.where} (line {item.entity.line}): importing a {item.kind} needs a token "
                f"with scope {needed.label!r}"
            )


def _named(kind: str, record: Any) -> str:
    name = getattr(record, "alias", None) if kind == "snippet" else getattr(record, "name", None)
    return f"{kind} {name!r}" if name is not None else kind


@attrs.frozen
class _Item:
    """One checked entity of an import: its kind, explicit id (if any) and input command."""

    kind: str
    entity: Entity
    ident: uuid.UUID | None
    command: Any


class _Refusals:
    """The problems found in an import, keyed by stream path, each with its line."""

    def __init__(self) -> None:
        self.found: dict[str, tuple[int, str]] = {}

    def add(self, entity: Entity, path: str, why: str) -> None:
        self.found.setdefault(entity.path(path), (entity.line_of(path), why))

    def raise_any(self, what: str) -> None:
        if not self.found:
            return
        (first, (line, why)), more = next(iter(self.found.items())), len(self.found) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ValidationError(
            f"{what}: {first} (line {line}): {why}{tail}",
            {path: f"line {line}: {why}" for path, (line, why) in self.found.items()},
        )


def check_kind(kind: str, what: str) -> None:
    """Refuse (ValidationError naming ``kind``) a kind that is not an export and import kind."""
    if kind not in ACCEPTED_KINDS:
        raise ValidationError(
            f"unknown {what} kind {kind!r}", {"kind": f"must be one of {', '.join(ACCEPTED_KINDS)}"}
        )


def _by_name(records: Iterable[Any]) -> list[Any]:
    # Exports are ordered by what they show, not by when records were stored, so that exporting an
    # import of an export gives the same text.
    return sorted(records, key=lambda record: (getattr(record, "name", ""), str(record.id)))


def _dedupe(idents: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    return list(dict.fromkeys(idents))


class TransferService(ServiceBase):
    """Export records to YAML and import YAML, upserting by id in one transaction."""

    #: Largest YAML text an import takes, in bytes.
    max_bytes = MAX_YAML_BYTES

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        # Imported records are built by the same rules as REST create and replace.
        self._scenarios = ScenarioService(context)
        self._catalog: dict[str, Any] = {
            "environment": EnvironmentService(context),
            "credential": CredentialService(context),
            "snippet": SnippetService(context),
        }

    # --- export ---------------------------------------------------------------------------------

    async def export_scenarios(
        self,
        ids: Sequence[uuid.UUID] | None = None,
        *,
        include_environment: bool = False,
        credential_ids: Sequence[uuid.UUID] = (),
        include_secrets: bool = False,
    ) -> str:
        """A YAML stream of scenarios (all when ``ids`` is None), sorted by name then id.

        The ``# environments`` section (the scenarios' environments) is written only with
        ``include_environment``; the ``# credentials`` section holds exactly the credentials in
        ``credential_ids`` (their secrets only with ``include_secrets``); ``# scenarios`` comes last.
        """
        conv = self.ctx.converter
        async with self.ctx.uow(readonly=True) as uow:
            wanted = _dedupe(ids) if ids is not None else await uow.scenarios.all_ids()
            scenarios = {s.id: s for s in await self._get_many(uow.scenarios, wanted)}
            for ident in wanted:
                require(scenarios.get(ident), "scenario", ident)
            environments = []
            if include_environment:
                env_ids = _dedupe([s.environment_id for s in scenarios.values() if s.environment_id])
                environments = await self._get_many(uow.environments, env_ids)
            cred_ids = _dedupe(credential_ids)
            credentials = {c.id: c for c in await self._get_many(uow.credentials, cred_ids)}
            for ident in cred_ids:
                require(credentials.get(ident), "credential", ident)
        sections: list[tuple[str, list[dict[str, Any]]]] = []
        if include_environment:
            sections.append(("environments", [environment_document(conv, e) for e in _by_name(environments)]))
        if cred_ids:
            creds = _by_name(credentials.values())
            sections.append(
                ("credentials", [credential_document(conv, c, include_secret=include_secrets) for c in creds])
            )
        sections.append(("scenarios", [scenario_document(conv, s) for s in _by_name(scenarios.values())]))
        return await asyncio.to_thread(dump_stream, sections)

    async def export_environment(self, ident: uuid.UUID, *, include_secrets: bool = False) -> str:
        """One environment as a single YAML document (environments hold no secrets: the flag is moot)."""
        async with self.ctx.uow(readonly=True) as uow:
            environment = require(await uow.environments.get(ident), "environment", ident)
        return dump_document(environment_document(self.ctx.converter, environment))

    async def export_credential(self, ident: uuid.UUID, *, include_secrets: bool = False) -> str:
        """One credential as a single YAML document; its secret only with ``include_secrets``."""
        async with self.ctx.uow(readonly=True) as uow:
            credential = require(await uow.credentials.get(ident), "credential", ident)
        return dump_document(
            credential_document(self.ctx.converter, credential, include_secret=include_secrets)
        )

    async def export_schedule(self, ident: uuid.UUID) -> str:
        """One schedule as a single YAML document."""
        async with self.ctx.uow(readonly=True) as uow:
            schedule = require(await uow.schedules.get(ident), "schedule", ident)
        return dump_document(schedule_document(self.ctx.converter, schedule))

    async def export_snippet(self, ident: uuid.UUID) -> str:
        """One snippet as a single YAML document."""
        async with self.ctx.uow(readonly=True) as uow:
            snippet = require(await uow.snippets.get(ident), "snippet", ident)
        return dump_document(snippet_document(self.ctx.converter, snippet))

    async def export(
        self,
        kind: str,
        ids: Sequence[uuid.UUID] | None = None,
        *,
        include_environment: bool = False,
        credential_ids: Sequence[uuid.UUID] = (),
    ) -> str:
        """A YAML stream of records of one ``kind``, as the export endpoints write them (never a secret).

        Scenarios are exported as :meth:`export_scenarios` does (all when ``ids`` is None); the other
        kinds one record per id, as their single exports, each its own document of the stream.
        """
        check_kind(kind, "export")
        if kind == "scenario":
            return await self.export_scenarios(
                ids, include_environment=include_environment, credential_ids=credential_ids
            )
        if include_environment or credential_ids:
            where = "includeEnvironment" if include_environment else "credentialIds"
            raise ValidationError(f"{where} is for scenario exports", {where: "only with kind scenario"})
        if not ids:
            why = f"name the {kind}s to export (kind scenario alone exports all)"
            raise ValidationError(f"invalid export: {why}", {"ids": why})
        single = {
            "environment": self.export_environment,
            "credential": self.export_credential,
            "snippet": self.export_snippet,
            "schedule": self.export_schedule,
        }[kind]
        documents = [await single(ident) for ident in _dedupe(ids)]
        return "".join(f"---\n{document}" for document in documents)

    # --- import ---------------------------------------------------------------------------------

    async def import_yaml(
        self, text: str | bytes, *, kind: str, origin: Origin | None = None
    ) -> ImportReport:
        """Upsert every entity of a YAML stream posted to the ``kind`` endpoint, in one transaction.

        Documents may be single mappings or lists of mappings; an entity without ``kind`` takes the
        endpoint's. Environments and credentials are written first, then snippets, then scenarios with
        their links; an existing id is overwritten, an unknown id is created as given, no id gets a new
        one. A scenario's steps are replaced by the document's. Any problem raises (ValidationError,
        TooLarge, Conflict) and nothing is stored. Each scenario it changes gets a revision of source
        ``import`` (a document's ``revision`` is ignored); one it leaves as it was gets none.
        """
        origin = (origin or Origin()).through(RevisionSource.IMPORT)
        check_kind(kind, "import")
        # Parsing is pure Python and CPU-bound: a thread keeps a large import from stalling the event loop.
        entities = await asyncio.to_thread(load_entities, text, max_bytes=self.max_bytes)
        items = self._check(entities, kind)
        _check_scope(items)
        async with self.ctx.uow() as uow:
            await self._check_references(uow, items)
            report = await self._write(uow, items, ACCEPTED_KINDS[kind], origin)
            await uow.commit()
        return report

    def _check(self, entities: Sequence[Entity], endpoint: str) -> list[_Item]:
        """Each entity structured by the same inputs and domain rules as REST, or every problem named."""
        refusals = _Refusals()
        items: list[_Item] = []
        ids: dict[tuple[str, uuid.UUID], Entity] = {}
        step_ids: dict[uuid.UUID, Entity] = {}
        aliases: dict[str, Entity] = {}
        for entity in entities:
            kind = entity.kind if entity.kind is not None else endpoint
            if kind not in KINDS:
                refusals.add(entity, "kind", f"unknown kind {kind!r}; kinds are {', '.join(KINDS)}")
                continue
            if kind not in ACCEPTED_KINDS[endpoint]:
                accepted = ", ".join(ACCEPTED_KINDS[endpoint])
                refusals.add(
                    entity, "kind", f"a {kind} does not fit the {endpoint} import (it takes {accepted})"
                )
                continue
            ident = self._ident(entity, refusals)
            if ident is not None:
                if (kind, ident) in ids:
                    first = ids[kind, ident]
                    refusals.add(entity, "id", f"the same {kind} id is in {first.where} (line {first.line})")
                ids.setdefault((kind, ident), entity)
            try:
                command: Any = structure_input(self.ctx.converter, entity.data, _INPUTS[kind], what=kind)
                if kind == "scenario":
                    command = attrs.evolve(
                        command, steps=command.steps or (), credentials=command.credentials or ()
                    )
                    # The domain's own checks too (unique aliases and step ids, bounds).
                    self._scenarios.scenario_from_input(command)
            except ValidationError as exc:
                for path, why in exc.errors.items():
                    refusals.add(entity, path, why)
                continue
            if kind == "scenario":
                for index, step in enumerate(command.steps):
                    holder = step_ids.setdefault(step.id, entity) if step.id else entity
                    if holder is not entity:
                        refusals.add(
                            entity, f"steps[{index}].id", f"step id {step.id} is also in {holder.where}"
                        )
            if kind == "snippet":
                holder = aliases.setdefault(command.alias, entity)
                if holder is not entity:
                    refusals.add(entity, "alias", f"the alias {command.alias!r} is also in {holder.where}")
            items.append(_Item(kind=kind, entity=entity, ident=ident, command=command))
        refusals.raise_any("the import was refused")
        return items

    def _ident(self, entity: Entity, refusals: _Refusals) -> uuid.UUID | None:
        raw = entity.data.get("id")
        if raw is None:
            return None
        try:
            ident: uuid.UUID = self.ctx.converter.structure(raw, uuid.UUID)
        except ValueError as exc:
            refusals.add(entity, "id", str(exc))
            return None
        return ident

    async def _check_references(self, uow: UnitOfWork, items: Sequence[_Item]) -> None:
        """Every environment and credential a scenario names is in the stream or in the store; every
        scenario and environment a schedule names is in the store."""
        refusals = _Refusals()
        for item in items:
            if item.kind == "schedule":
                try:
                    await check_schedule_references(uow, item.command)
                except ValidationError as exc:
                    for path, why in exc.errors.items():
                        refusals.add(item.entity, path, f"{why} in the store")
        refusals.raise_any("the import refers to missing records")
        scenarios = [item for item in items if item.kind == "scenario"]
        if not scenarios:
            return
        streamed = {(item.kind, item.ident) for item in items if item.ident is not None}
        env_ids = {s.command.environment_id for s in scenarios if s.command.environment_id}
        cred_ids = {link.credential_id for s in scenarios for link in s.command.credentials}
        env_ids -= {ident for kind, ident in streamed if kind == "environment"}
        cred_ids -= {ident for kind, ident in streamed if kind == "credential"}
        known = {("environment", e.id) for e in await self._get_many(uow.environments, list(env_ids))}
        known |= {("credential", c.id) for c in await self._get_many(uow.credentials, list(cred_ids))}
        known |= streamed
        refusals = _Refusals()
        for item in scenarios:
            env_id = item.command.environment_id
            if env_id is not None and ("environment", env_id) not in known:
                refusals.add(
                    item.entity,
                    "environmentId",
                    f"no environment with id {env_id} in the store or the import",
                )
            for index, link in enumerate(item.command.credentials):
                if ("credential", link.credential_id) not in known:
                    refusals.add(
                        item.entity,
                        f"credentials[{index}].credentialId",
                        f"no credential with id {link.credential_id} in the store or the import",
                    )
        refusals.raise_any("the import refers to missing records")

    async def _write(
        self, uow: UnitOfWork, items: Sequence[_Item], kinds: Sequence[str], origin: Origin
    ) -> ImportReport:
        created: dict[str, list[uuid.UUID]] = {kind: [] for kind in kinds}
        updated: dict[str, list[uuid.UUID]] = {kind: [] for kind in kinds}
        warnings: list[StepCodeWarning] = []
        for kind in _WRITE_ORDER:
            batch = [item for item in items if item.kind == kind]
            if not batch:
                continue
            repo: Repository[Any, Any] = getattr(uow, f"{kind}s")
            idents = [i.ident for i in batch if i.ident]
            if kind == "scenario":
                await uow.scenarios.lock(idents)  # their revisions are numbered under the lock
            stored = {r.id: r for r in await self._get_many(repo, idents)}
            if kind == "scenario":
                await self._free_step_ids(uow, batch, stored)
            for item in batch:
                old = stored.get(item.ident) if item.ident is not None else None
                record = self._record(item, old)
                if kind == "scenario":
                    warnings += step_warnings(record.steps, scenario_id=record.id)
                if kind == "snippet":
                    try:
                        await self._catalog["snippet"].check(uow, record, old)
                    except Conflict as exc:
                        raise Conflict(f"{item.entity.where} (line {item.entity.line}): {exc}") from None
                if kind == "scenario":
                    if old is None:
                        await self._scenarios.add(uow, record, origin)
                    else:
                        await save_scenario(uow, old, record, origin)
                    (created if old is None else updated)[kind].append(record.id)
                elif old is None:
                    await repo.add(record)
                    created[kind].append(record.id)
                else:
                    await repo.update(record)
                    updated[kind].append(record.id)
                done = "updated" if old is not None else "created"
                await audit.record(uow, "import", kind, record.id, f"{done} {_named(kind, record)} by import")
        return ImportReport(
            created={kind: tuple(ids) for kind, ids in created.items()},
            updated={kind: tuple(ids) for kind, ids in updated.items()},
            warnings=tuple(warnings),
        )

    def _record(self, item: _Item, old: Any) -> Any:
        """The record an imported entity describes, built by the same rules as REST create/replace."""
        if item.kind == "scenario":
            record: Any = self._scenarios.scenario_from_input(item.command, old)
        elif item.kind == "schedule":
            record = schedule_from_input(item.command, old)
        else:
            record = self._catalog[item.kind].build(item.command, old)
        if old is not None:
            return attrs.evolve(record, updated_at=max(utcnow(), old.updated_at))
        return attrs.evolve(record, id=item.ident) if item.ident is not None else record

    async def _free_step_ids(
        self, uow: UnitOfWork, batch: Sequence[_Item], stored: dict[Any, Scenario]
    ) -> None:
        """Make the imported step ids free to use, or refuse those another scenario holds.

        A step id stored under a scenario of this import is released by emptying that scenario first
        (its steps are replaced anyway); one held by a scenario outside the import is a Conflict.
        """
        wanted: dict[uuid.UUID, tuple[_Item, int]] = {}
        for item in batch:
            for index, step in enumerate(item.command.steps):
                if step.id is not None:
                    wanted[step.id] = (item, index)
        if not wanted:
            return
        owners = await uow.scenarios.step_owners(list(wanted))
        for step_id, owner in owners.items():
            if owner not in stored:
                item, index = wanted[step_id]
                path = f"steps[{index}].id"
                raise Conflict(
                    f"{item.entity.path(path)} (line {item.entity.line_of(path)}): step {step_id} "
                    f"belongs to scenario {owner}, which this import does not replace; "
                    "leave the step id out to get a new one"
                )
        donors = {
            owners[sid] for sid, (item, _) in wanted.items() if sid in owners and owners[sid] != item.ident
        }
        for donor in donors:
            await uow.scenarios.update(attrs.evolve(stored[donor], steps=()))

    @staticmethod
    async def _get_many(repo: Repository[Any, Any], idents: Sequence[uuid.UUID]) -> list[Any]:
        found: list[Any] = []
        for start in range(0, len(idents), _CHUNK):
            found.extend(await repo.get_many(idents[start : start + _CHUNK]))
        return found
