"""Paged list queries and their results.

A query is checked when it is built: an unknown ``orderBy``, a bad page or limit is refused here, so
nothing unchecked ever reaches an adapter, let alone SQL.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Generic, Literal, Self, TypeVar

import attrs

from scenariokit.domain.errors import InvalidQuery
from scenariokit.domain.model import RunStatus

T = TypeVar("T")
OrderDir = Literal["asc", "desc"]
MAX_LIMIT = 200
#: Keeps the row offset of any page within the 64-bit integers every database takes.
MAX_PAGE = 1_000_000_000
DEFAULT_LIMIT = 20


@attrs.frozen
class Page(Generic[T]):
    """One page of a list: its items, the total across all pages, and where it is."""

    items: tuple[T, ...]
    total: int
    page: int
    limit: int


def _int_param(params: Mapping[str, Any], name: str, default: int, low: int, high: int | None) -> int:
    raw = params.get(name)
    if raw is None:  # given empty (``page=``) is refused: the parameter is a number
        return default
    if isinstance(raw, bool):
        raise InvalidQuery(f"invalid {name}", {name: "must be a whole number"})
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidQuery(f"invalid {name}", {name: "must be a whole number"}) from None
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise InvalidQuery(f"invalid {name}", {name: f"must be a whole number {bound}"})
    return value


@attrs.frozen
class ListQuery:
    """Paging, sorting and the name filter common to every list."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("name", "createdAt", "updatedAt")
    DEFAULT_ORDER: ClassVar[tuple[str, OrderDir]] = ("updatedAt", "desc")

    page: int = 1
    limit: int = DEFAULT_LIMIT
    order_by: str = attrs.field(default=None)
    order_dir: OrderDir = attrs.field(default=None)
    q: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.order_by is None:
            object.__setattr__(self, "order_by", self.DEFAULT_ORDER[0])
        if self.order_dir is None:
            object.__setattr__(self, "order_dir", self.DEFAULT_ORDER[1])
        if self.order_by not in self.ORDER_BY:
            allowed = ", ".join(self.ORDER_BY)
            raise InvalidQuery(
                f"orderBy {self.order_by!r} is not allowed; allowed values: {allowed}",
                {"orderBy": f"must be one of: {allowed}"},
            )
        if self.order_dir not in ("asc", "desc"):
            raise InvalidQuery("invalid orderDir", {"orderDir": "must be one of: asc, desc"})
        if isinstance(self.page, bool) or not isinstance(self.page, int) or not 1 <= self.page <= MAX_PAGE:
            raise InvalidQuery("invalid page", {"page": f"must be a whole number from 1 to {MAX_PAGE}"})
        if (
            isinstance(self.limit, bool)
            or not isinstance(self.limit, int)
            or not 1 <= self.limit <= MAX_LIMIT
        ):
            raise InvalidQuery("invalid limit", {"limit": f"must be a whole number from 1 to {MAX_LIMIT}"})
        if self.q is not None and len(self.q) > 200:
            raise InvalidQuery("invalid q", {"q": "must be at most 200 characters"})

    @property
    def offset(self) -> int:
        """Rows to skip before this page."""
        return (self.page - 1) * self.limit

    @classmethod
    def known_params(cls) -> frozenset[str]:
        """The query-string parameters this query reads."""
        return frozenset({"page", "limit", "orderBy", "orderDir", "q"})

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Self:
        """Build the query from query-string parameters, refusing unknown ones."""
        unknown = sorted(set(params) - cls.known_params())
        if unknown:
            raise InvalidQuery(
                "unknown query parameter", {name: "unknown query parameter" for name in unknown}
            )
        return cls(**cls._kwargs(params))

    @classmethod
    def _kwargs(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        q = params.get("q")
        return {
            "page": _int_param(params, "page", 1, 1, MAX_PAGE),
            "limit": _int_param(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
            # given empty (``orderBy=``), they are refused: only the listed values are allowed
            "order_by": params.get("orderBy"),
            "order_dir": params.get("orderDir"),
            "q": q if q else None,
        }


@attrs.frozen
class ScenarioQuery(ListQuery):
    """List of scenarios: ``name|createdAt|updatedAt``, newest change first."""


@attrs.frozen
class EnvironmentQuery(ListQuery):
    """List of environments."""


@attrs.frozen
class CredentialQuery(ListQuery):
    """List of credentials."""


@attrs.frozen
class SnippetQuery(ListQuery):
    """List of snippets; ``q`` matches alias or title."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("alias", "title", "createdAt", "updatedAt")


@attrs.frozen
class SessionQuery(ListQuery):
    """List of saved sessions."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("name", "status", "createdAt")
    DEFAULT_ORDER: ClassVar[tuple[str, OrderDir]] = ("createdAt", "desc")


def _status(raw: Any) -> RunStatus | None:
    if raw is None:
        return None
    try:
        return RunStatus(raw)
    except ValueError:
        allowed = ", ".join(s.value for s in RunStatus)
        raise InvalidQuery("invalid status", {"status": f"must be one of: {allowed}"}) from None


def _uuid(raw: Any, name: str) -> uuid.UUID | None:
    if raw is None:
        return None
    if isinstance(raw, uuid.UUID):
        return raw
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        raise InvalidQuery(f"invalid {name}", {name: "must be a UUID"}) from None


@attrs.frozen
class RunQuery(ListQuery):
    """List of runs: ``createdAt|status|scenario.name``, newest first; filters by status, scenario,
    environment, batch and creation time."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("createdAt", "status", "scenario.name")
    DEFAULT_ORDER: ClassVar[tuple[str, OrderDir]] = ("createdAt", "desc")

    status: RunStatus | None = None
    scenario_id: uuid.UUID | None = None
    #: the runs one request queued together (``environmentIds``)
    batch_id: uuid.UUID | None = None
    environment_id: uuid.UUID | None = None
    #: runs created at or after this time
    since: datetime | None = None

    @classmethod
    def known_params(cls) -> frozenset[str]:
        return (super().known_params() | {"status", "scenarioId", "batchId", "environmentId", "since"}) - {
            "q"
        }

    @classmethod
    def _kwargs(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = super()._kwargs(params)
        kwargs["status"] = _status(params.get("status"))
        kwargs["scenario_id"] = _uuid(params.get("scenarioId"), "scenarioId")
        kwargs["batch_id"] = _uuid(params.get("batchId"), "batchId")
        kwargs["environment_id"] = _uuid(params.get("environmentId"), "environmentId")
        kwargs["since"] = _since(params.get("since"))
        return kwargs


@attrs.frozen
class RevisionQuery(ListQuery):
    """List of a scenario's revisions: by ``number``, newest first."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("number",)
    DEFAULT_ORDER: ClassVar[tuple[str, OrderDir]] = ("number", "desc")

    @classmethod
    def known_params(cls) -> frozenset[str]:
        return super().known_params() - {"q"}


@attrs.frozen
class ScheduleQuery(ListQuery):
    """List of schedules: ``createdAt|updatedAt|nextFireAt``, newest first; filters by scenario."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("createdAt", "updatedAt", "nextFireAt")
    DEFAULT_ORDER: ClassVar[tuple[str, OrderDir]] = ("createdAt", "desc")

    scenario_id: uuid.UUID | None = None

    @classmethod
    def known_params(cls) -> frozenset[str]:
        return (super().known_params() | {"scenarioId"}) - {"q"}

    @classmethod
    def _kwargs(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = super()._kwargs(params)
        kwargs["scenario_id"] = _uuid(params.get("scenarioId"), "scenarioId")
        return kwargs


@attrs.frozen
class AuditQuery(ListQuery):
    """The audit log, newest first; filters by ``resource``, ``tokenName`` and ``since`` (ISO 8601)."""

    ORDER_BY: ClassVar[tuple[str, ...]] = ("at",)
    DEFAULT_ORDER: ClassVar[tuple[str, OrderDir]] = ("at", "desc")

    resource: str | None = None
    token_name: str | None = None
    since: datetime | None = None

    @classmethod
    def known_params(cls) -> frozenset[str]:
        return (super().known_params() | {"resource", "tokenName", "since"}) - {"q"}

    @classmethod
    def _kwargs(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = super()._kwargs(params)
        for name, key in (("resource", "resource"), ("token_name", "tokenName")):
            raw = params.get(key)
            if raw is not None and not (0 < len(raw) <= 200):
                raise InvalidQuery(f"invalid {key}", {key: "must be 1 to 200 characters"})
            kwargs[name] = raw
        kwargs["since"] = _since(params.get("since"))
        return kwargs


#: An RFC 3339 leap second (``23:59:60``), read as the second before it.
_LEAP_SECOND = re.compile(r"(?<=T\d\d:\d\d:)60", re.IGNORECASE)


def _since(raw: str | None) -> datetime | None:
    """An ISO 8601 / RFC 3339 time (``Z``, an offset, or none for UTC), in UTC; 400 naming ``since``."""
    if raw is None:
        return None
    text = _LEAP_SECOND.sub("59", raw.strip())
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(text[:10] + text[10:11].upper() + text[11:])
    except ValueError:
        raise InvalidQuery(
            "invalid since", {"since": "must be an ISO 8601 time, e.g. 2026-11-26T09:00:00Z"}
        ) from None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # within a day of the first or last time there is: as far as it goes
        offset = value.utcoffset()
        return (
            datetime.min.replace(tzinfo=UTC)
            if offset and offset > timedelta(0)
            else datetime.max.replace(tzinfo=UTC)
        )


@attrs.frozen
class LogQuery:
    """A page of one run's log, filtered by a case-insensitive substring."""

    page: int = 1
    limit: int = 100
    q: str | None = None

    def __attrs_post_init__(self) -> None:
        if isinstance(self.page, bool) or not isinstance(self.page, int) or not 1 <= self.page <= MAX_PAGE:
            raise InvalidQuery("invalid page", {"page": f"must be a whole number from 1 to {MAX_PAGE}"})
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= 1000:
            raise InvalidQuery("invalid limit", {"limit": "must be a whole number from 1 to 1000"})

    @property
    def offset(self) -> int:
        """Rows to skip before this page."""
        return (self.page - 1) * self.limit

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> LogQuery:
        """Build it from query-string parameters (``page``, ``limit``, ``q``)."""
        unknown = sorted(set(params) - {"page", "limit", "q"})
        if unknown:
            raise InvalidQuery(
                "unknown query parameter", {name: "unknown query parameter" for name in unknown}
            )
        return cls(
            page=_int_param(params, "page", 1, 1, MAX_PAGE),
            limit=_int_param(params, "limit", 100, 1, 1000),
            q=params.get("q") or None,
        )


def all_order_by() -> dict[str, Sequence[str]]:
    """The allowed ``orderBy`` values of every list, for documentation."""
    return {
        "scenarios": ScenarioQuery.ORDER_BY,
        "environments": EnvironmentQuery.ORDER_BY,
        "credentials": CredentialQuery.ORDER_BY,
        "snippets": SnippetQuery.ORDER_BY,
        "sessions": SessionQuery.ORDER_BY,
        "runs": RunQuery.ORDER_BY,
    }


#: The longest window of run history a stats query may ask for, in days.
MAX_STATS_DAYS = 366
#: The window a stats query without ``days`` covers.
DEFAULT_STATS_DAYS = 30


@attrs.frozen
class StatsQuery:
    """The window of a scenario's run history: the last ``days`` days."""

    days: int = DEFAULT_STATS_DAYS

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> StatsQuery:
        """Build it from query-string parameters (``days``, 1 to :data:`MAX_STATS_DAYS`)."""
        unknown = sorted(set(params) - {"days"})
        if unknown:
            raise InvalidQuery(
                "unknown query parameter", {name: "unknown query parameter" for name in unknown}
            )
        return cls(days=_int_param(params, "days", DEFAULT_STATS_DAYS, 1, MAX_STATS_DAYS))
