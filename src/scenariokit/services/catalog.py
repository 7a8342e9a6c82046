"""Use cases of the simple resources: environments, credentials, snippets, sessions."""

from __future__ import annotations

import uuid
from typing import ClassVar, Generic, TypeVar

import attrs

from scenariokit.domain.errors import Conflict, NotFound
from scenariokit.domain.model import Credential, Environment, Session, Snippet, utcnow
from scenariokit.formats.inputs import CredentialInput, EnvironmentInput, Patch, SnippetInput
from scenariokit.formats.queries import (
    CredentialQuery,
    EnvironmentQuery,
    ListQuery,
    Page,
    SessionQuery,
    SnippetQuery,
)
from scenariokit.storage.ports import Repository, UnitOfWork

from . import audit
from .base import ServiceBase, require

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - the input type
Q = TypeVar("Q", bound=ListQuery)


class _Crud(ServiceBase, Generic[T, I, Q]):
    """List, get, create, replace, patch and delete for a resource without children."""

    kind: ClassVar[str]
    input_type: ClassVar[type]
    query_type: ClassVar[type[ListQuery]]
    writable: ClassVar[tuple[str, ...]]

    def repo(self, uow: UnitOfWork) -> Repository[T, Q]:
        raise NotImplementedError

    def build(self, command: I, old: T | None) -> T:
        """The record a command describes (``old`` is the stored one on update)."""
        fields = attrs.asdict(command, recurse=False)  # type: ignore[arg-type]
        if old is None:
            record: T = self.record_type(**fields)
            return record
        updated_at = max(utcnow(), getattr(old, "updated_at"))  # noqa: B009 - T is any record type
        return attrs.evolve(old, **fields, updated_at=updated_at)  # type: ignore[misc]

    record_type: ClassVar[type]

    async def check(self, uow: UnitOfWork, record: T, old: T | None) -> None:
        """Refuse a write that breaks a rule of this resource (uniqueness …)."""

    def describe(self, record: T) -> str:
        """The record as the audit log names it (its name; never a secret)."""
        return f"{self.kind} {getattr(record, 'name', '')!r}"

    async def before_delete(self, uow: UnitOfWork, ident: uuid.UUID) -> None:
        """Refuse a delete that would break other records."""

    async def list(self, query: Q | None = None) -> Page[T]:
        """One page of records."""
        async with self.ctx.uow(readonly=True) as uow:
            return await self.repo(uow).list(query or self.query_type())  # type: ignore[arg-type]

    async def get(self, ident: uuid.UUID) -> T:
        """One record, or NotFound."""
        async with self.ctx.uow(readonly=True) as uow:
            return require(await self.repo(uow).get(ident), self.kind, ident)

    async def create(self, command: I) -> T:
        """Create a record."""
        record = self.build(command, None)
        async with self.ctx.uow() as uow:
            await self.check(uow, record, None)
            await self.repo(uow).add(record)
            await audit.record(uow, "create", self.kind, record.id, f"created {self.describe(record)}")  # type: ignore[attr-defined]
            await uow.commit()
        return record

    async def replace(self, ident: uuid.UUID, command: I) -> T:
        """Replace a record (PUT)."""
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, ident)
            return await self._write(uow, command, old)

    async def update(self, ident: uuid.UUID, patch: Patch[I]) -> T:
        """Change some fields of a record (PATCH); fields not named keep their value.

        Read, merge and write happen in one unit of work with the record locked, so two PATCHes of
        different fields of one record both survive.
        """
        async with self.ctx.uow() as uow:
            old = await self._locked(uow, ident)
            current = {name: getattr(old, name) for name in self.writable}
            command: I = patch.applied_to(current, self.input_type)
            return await self._write(uow, command, old)

    async def _locked(self, uow: UnitOfWork, ident: uuid.UUID) -> T:
        return require(await self.repo(uow).get(ident, lock=True), self.kind, ident)

    async def _write(self, uow: UnitOfWork, command: I, old: T) -> T:
        record = self.build(command, old)
        await self.check(uow, record, old)
        await self.repo(uow).update(record)
        await audit.record(uow, "update", self.kind, record.id, f"changed {self.describe(record)}")  # type: ignore[attr-defined]
        await uow.commit()
        return record

    async def delete(self, ident: uuid.UUID) -> None:
        """Delete a record."""
        async with self.ctx.uow() as uow:
            await self.before_delete(uow, ident)
            if not await self.repo(uow).delete(ident):
                raise NotFound(self.kind, ident)
            await audit.record(uow, "delete", self.kind, ident, f"deleted {self.kind} {ident}")
            await uow.commit()


class EnvironmentService(_Crud[Environment, EnvironmentInput, EnvironmentQuery]):
    """Environments. Deleting one unlinks it from scenarios; runs against it stay readable."""

    kind = "environment"
    input_type = EnvironmentInput
    record_type = Environment
    query_type = EnvironmentQuery
    writable = ("name", "description", "data", "browser")

    def repo(self, uow: UnitOfWork) -> Repository[Environment, EnvironmentQuery]:
        return uow.environments

    def build(self, command: EnvironmentInput, old: Environment | None) -> Environment:
        command = attrs.evolve(command, name=command.name.strip())
        return super().build(command, old)


class CredentialService(_Crud[Credential, CredentialInput, CredentialQuery]):
    """Credentials. The secret is write-only: an update without one keeps the stored secret."""

    kind = "credential"
    input_type = CredentialInput
    record_type = Credential
    query_type = CredentialQuery
    writable = ("name", "description", "username")

    def repo(self, uow: UnitOfWork) -> Repository[Credential, CredentialQuery]:
        return uow.credentials

    def build(self, command: CredentialInput, old: Credential | None) -> Credential:
        if old is not None and command.secret is None:
            command = attrs.evolve(command, secret=old.secret)
        if command.secret == "":
            command = attrs.evolve(command, secret=None)
        return super().build(attrs.evolve(command, name=command.name.strip()), old)

    async def before_delete(self, uow: UnitOfWork, ident: uuid.UUID) -> None:
        count = await uow.credentials.linked_scenarios(ident)
        if count:
            raise Conflict(f"credential {ident} is linked to {count} scenario(s); unlink it first")


class SnippetService(_Crud[Snippet, SnippetInput, SnippetQuery]):
    """Snippets, unique by alias."""

    kind = "snippet"
    input_type = SnippetInput
    record_type = Snippet
    query_type = SnippetQuery
    writable = ("alias", "title", "description", "code")

    def repo(self, uow: UnitOfWork) -> Repository[Snippet, SnippetQuery]:
        return uow.snippets

    def describe(self, record: Snippet) -> str:
        return f"snippet {record.alias!r}"

    async def check(self, uow: UnitOfWork, record: Snippet, old: Snippet | None) -> None:
        other = await uow.snippets.get_by_alias(record.alias)
        if other is not None and other.id != record.id:
            raise Conflict(f"a snippet with alias {record.alias!r} already exists")

    async def get_by_alias(self, alias: str) -> Snippet:
        """The snippet with this alias."""
        async with self.ctx.uow(readonly=True) as uow:
            return require(await uow.snippets.get_by_alias(alias), "snippet", alias)


class SessionService(ServiceBase):
    """Saved browser sessions: listed, read (masked) and deleted (which releases the live context)."""

    async def list(self, query: SessionQuery | None = None) -> Page[Session]:
        """One page of sessions."""
        async with self.ctx.uow(readonly=True) as uow:
            return await uow.sessions.list(query or SessionQuery())

    async def get(self, ident: uuid.UUID) -> Session:
        """One session."""
        async with self.ctx.uow(readonly=True) as uow:
            return require(await uow.sessions.get(ident), "session", ident)

    async def delete(self, ident: uuid.UUID) -> None:
        """Release the session's live browser context and delete it."""
        async with self.ctx.uow() as uow:
            # the delete's own row count says whether it existed: reading it first would decrypt its
            # token, and a session whose token the keys cannot read must still be deletable
            if not await uow.sessions.delete(ident):
                raise NotFound("session", ident)
            await audit.record(uow, "delete", "session", ident, f"deleted session {ident}")
            await uow.commit()
        await self.ctx.control.release_session(ident)
