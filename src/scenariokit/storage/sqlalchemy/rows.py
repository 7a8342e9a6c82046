"""The row format: how domain values become table rows and come back, through a converter of storage's own.

Three rules hold for every table (docs/architecture.md, "Storage"):

- **Columns are fields.** A row's columns are the value's attrs fields under their own names. A
  :class:`RowMap` states only what differs: a column of another name, an encrypted column, a field
  kept in a child table. A new field is stored once its column exists; nothing else is written for it.
- **Reads never validate.** A value read from a row is built by :func:`restorer`, which sets the
  fields (running attrs converters, which only normalise) without the validators: a rule tightened
  later (a shorter name, a stricter alias) must not make what is already stored unreadable. Writes
  are checked where values are made — the domain's constructors — not here.
- **JSON columns hold the stored shape.** A JSON column (a run's error, step results, timings) holds a
  document in the shape :func:`make_storage_converter` owns: camelCase keys, UUIDs as strings, ISO 8601
  times — the shape these columns had when the API's converter wrote them. The API's shapes
  (:mod:`scenariokit.formats.convert`) may change now without a row having to be migrated.
"""

from __future__ import annotations

import enum
import json
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, Generic, TypeVar

import attrs
import cattrs
import sqlalchemy as sa

from scenariokit.domain.json_values import MAX_INT, MIN_INT
from scenariokit.domain.model import camel
from scenariokit.storage.secrets import SecretBox

T = TypeVar("T", bound=attrs.AttrsInstance)


# --- building values without their validators ----------------------------------------------------


_REQUIRED, _VALUE, _FACTORY = 0, 1, 2


def _convert(converter: Any, value: Any, instance: Any, field: attrs.Attribute[Any]) -> Any:
    if isinstance(converter, attrs.Converter):  # attrs' stubs do not declare what it holds
        extra = [instance] if getattr(converter, "takes_self", False) else []
        if getattr(converter, "takes_field", False):
            extra.append(field)
        return getattr(converter, "converter")(value, *extra)  # noqa: B009
    return converter(value)


def restorer(cls: type[T]) -> Callable[[Mapping[str, Any]], T]:
    """A constructor of the attrs class ``cls`` that does not run its validators.

    Fields missing from the mapping take their defaults; converters run (they normalise, they do not
    judge). Unlike :func:`attrs.validators.disabled`, which switches validation off for every thread
    of the process at once, this touches no global state: a write validating in another thread or task
    at the same moment still validates.
    """
    post_init = getattr(cls, "__attrs_post_init__", None)
    # What to do for each field, worked out once: reading a page builds hundreds of values.
    plan: list[tuple[str, int, Any, bool, Any]] = []
    for field in attrs.fields(cls):
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            how, made, takes_self = _FACTORY, default.factory, default.takes_self
        elif default is not attrs.NOTHING:
            how, made, takes_self = _VALUE, default, False
        else:
            how, made, takes_self = _REQUIRED, None, False
        convert = None if field.converter is None else partial(_convert, field.converter, field=field)
        plan.append((field.name, how, made, takes_self, convert))

    def restore(values: Mapping[str, Any]) -> T:
        instance = object.__new__(cls)
        for name, how, made, takes_self, convert in plan:
            if name in values:
                value = values[name]
            elif how == _FACTORY:
                value = made(instance) if takes_self else made()
            elif how == _VALUE:
                value = made
            else:
                raise TypeError(f"a stored {cls.__name__} has no {name!r}")
            if convert is not None:
                value = convert(value, instance)
            object.__setattr__(instance, name, value)  # frozen classes: how attrs' __init__ sets them
        if post_init is not None:
            post_init(instance)
        return instance

    return restore


# --- the storage converter -------------------------------------------------------------------------


def format_time(value: datetime) -> str:
    """A time in a JSON column: ISO 8601 in UTC with a ``Z``, to the microsecond it holds."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(value: Any) -> datetime:
    """A stored time back: a datetime as the driver gave it, or ISO 8601 text (naive means UTC)."""
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _structure_uuid(value: Any, _: type) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def admits_none(kind: Any) -> bool:
    """Whether a field of this type may hold None (elsewhere a stored null means: the default)."""
    return kind is Any or type(None) in typing.get_args(kind)


#: types read back exactly as they were written: no coercion, which would be a rule of its own
_AS_STORED = (str, int, float, bool)


def _is_enum(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, enum.Enum)


def _restore_hook(cls: type[Any], converter: cattrs.Converter, *, keys: Callable[[str], str]) -> Any:
    """How a stored document becomes ``cls``: each field from its key, unknown keys ignored, no validators."""
    attrs.resolve_types(cls)
    restore = restorer(cls)
    plan = [
        (
            field.name,
            keys(field.name),
            field.type,
            converter.get_structure_hook(field.type),
            admits_none(field.type),
        )
        for field in attrs.fields(cls)
    ]

    def structure(data: Mapping[str, Any], _: type) -> Any:
        values: dict[str, Any] = {}
        for name, key, kind, hook, nullable in plan:
            raw = data.get(key)
            if raw is not None:
                values[name] = hook(raw, kind)
            elif nullable and key in data:
                values[name] = None
        return restore(values)

    return structure


def make_storage_converter(*, document_keys: Callable[[str], str] = camel) -> cattrs.Converter:
    """The converter of stored JSON documents: ``document_keys`` names each field (camelCase).

    Structuring is lenient where the API's converter is strict: a key it no longer knows is ignored, a
    key it lacks takes the field's default, and no validator runs — what was stored stays readable.
    """
    converter = cattrs.Converter()
    converter.register_unstructure_hook(uuid.UUID, str)
    converter.register_structure_hook(uuid.UUID, _structure_uuid)
    converter.register_unstructure_hook(datetime, format_time)
    converter.register_structure_hook(datetime, lambda value, _: parse_time(value))
    converter.register_unstructure_hook_func(_is_enum, lambda value: value.value)
    # Before cattrs' str hook, which would take a StrEnum for a plain str (str comes first in its MRO).
    converter.register_structure_hook_func(_is_enum, lambda value, kind: kind(value))
    converter.register_structure_hook_factory(attrs.has, partial(_restore_hook, keys=document_keys))
    converter.register_structure_hook_func(lambda kind: kind in _AS_STORED, lambda value, _: value)

    def unstructure_factory(cls: type[Any]) -> Any:
        attrs.resolve_types(cls)
        renames: dict[str, Any] = {
            field.name: cattrs.gen.override(rename=document_keys(field.name))
            for field in attrs.fields(cls)
            if document_keys(field.name) != field.name
        }
        return cattrs.gen.make_dict_unstructure_fn(cls, converter, **renames)

    converter.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    return converter


#: JSON columns: documents ready for the database's JSON encoder.
DOCUMENTS = make_storage_converter()
#: plain columns: UUIDs and times stay objects, the column types store them natively.
COLUMNS = DOCUMENTS.copy()
COLUMNS.register_unstructure_hook(uuid.UUID, lambda value: value)
COLUMNS.register_unstructure_hook(datetime, lambda value: value)
#: the kinds :data:`COLUMNS` writes as they are (a column of one of them, or of None, skips the converter)
_WRITTEN_AS_THEY_ARE = (*_AS_STORED, uuid.UUID, datetime)


# --- JSON columns ----------------------------------------------------------------------------------


def _stored_whole(text: str) -> int | float:
    # PostgreSQL writes a large float held in jsonb (1e300) as its digits: it was a float, so it reads back
    # as one; a whole number the JSON rule admits always fits 64 bits.
    if len(text) > 20:
        return float(text)
    value = int(text)
    return value if MIN_INT <= value <= MAX_INT else float(value)


#: How a JSON column's text is written: strict JSON (no NaN). An encoder made once: ``json.dumps`` with an
#: argument of its own makes a new one for every call.
write_json = json.JSONEncoder(allow_nan=False).encode

#: The decoder of JSON columns, made once: ``json.loads`` with an argument of its own made one for every
#: document read (about 1.6 of a step-results document's 3.9 µs).
_DECODER = json.JSONDecoder(parse_int=_stored_whole)


def read_json(text: str | bytes | bytearray) -> Any:
    """How a JSON column's text is read: numbers as they were written (:func:`_stored_whole`)."""
    if not isinstance(text, str):  # as json.loads reads bytes
        text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    return _DECODER.decode(text)


# --- rows -----------------------------------------------------------------------------------------


@attrs.frozen
class Encrypted:
    """A field kept encrypted with the store's keys in ``column``; ``as_json`` for a value that is not text.

    An empty value is stored as NULL (text when it is empty, a JSON value when it is None).
    """

    column: str
    as_json: bool = False


@attrs.frozen
class _Column:
    field: attrs.Attribute[Any]
    kind: Any  # the field's type, resolved
    name: str
    json: bool
    encrypted: Encrypted | None


class RowMap(Generic[T]):
    """The row of one table for the attrs class ``cls``, derived from its fields.

    ``columns`` names a field's column where it differs from the field's name (a string, or
    :class:`Encrypted`); ``elsewhere`` lists the fields kept in other tables (a scenario's steps),
    which a read is given ready-made. A column the class has no field for (a lease, a parent's id) is
    the repository's own business. Every mapped column must exist: a typo fails at import.
    """

    def __init__(
        self,
        cls: type[T],
        table: sa.Table,
        *,
        columns: Mapping[str, str | Encrypted] | None = None,
        elsewhere: Iterable[str] = (),
    ) -> None:
        attrs.resolve_types(cls)
        self.cls = cls
        self.table = table
        renamed = dict(columns or {})
        skipped = set(elsewhere)
        unknown = (set(renamed) | skipped) - {field.name for field in attrs.fields(cls)}
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
        self._columns: list[_Column] = []
        for field in attrs.fields(cls):
            if field.name in skipped:
                continue
            how = renamed.get(field.name, field.name)
            name = how.column if isinstance(how, Encrypted) else how
            if name not in table.c:
                raise ValueError(f"table {table.name} has no column {name!r} for {cls.__name__}.{field.name}")
            is_json = isinstance(table.c[name].type, sa.JSON)
            encrypted = how if isinstance(how, Encrypted) else None
            self._columns.append(
                _Column(field=field, kind=field.type, name=name, json=is_json, encrypted=encrypted)
            )
        generated = table.autoincrement_column
        #: a column the database numbers (a log line's seq): left out of an insert while the value has none
        self._generated = generated.name if generated is not None else None
        self._restore = restorer(cls)
        self._kind = cls.__name__.lower()
        # per column, worked out once: its field, how a stored value becomes the field's (None: as it
        # is), whether a NULL means None (else the default), whether it is encrypted
        self._reads = [
            (
                column,
                column.field.name,
                None if column.kind in _AS_STORED else DOCUMENTS.get_structure_hook(column.kind),
                admits_none(column.kind),
            )
            for column in self._columns
        ]
        # per column, worked out once: its name, its field's, and how a value is written (None: as it
        # is: text, numbers, ids and times, which the driver takes as they are); a log line's five
        # columns were five look-ups of a hook for each line of a step's output
        self._writes = [(column.name, column.field.name, self._writer(column)) for column in self._columns]

    @classmethod
    def _writer(cls, column: _Column) -> Callable[[Any, SecretBox], Any] | None:
        """How :meth:`to_row` writes a column's value (None: as it is)."""
        if column.encrypted is not None or column.json:
            return lambda value, box: cls._written(column, value, box)
        kinds = typing.get_args(column.kind) or (column.kind,)
        plain = tuple(kind for kind in kinds if kind is not type(None))
        if all(kind in _WRITTEN_AS_THEY_ARE for kind in plain):
            return None
        hook = COLUMNS.get_unstructure_hook(column.kind)
        return lambda value, box: hook(value)

    def to_row(self, item: T, box: SecretBox) -> dict[str, Any]:
        """The columns of ``item``: as it is, since it was validated when it was made."""
        row: dict[str, Any] = {}
        for name, field, write in self._writes:
            value = getattr(item, field)
            if write is not None:
                value = write(value, box)
            if value is None and name == self._generated:
                continue
            row[name] = value
        return row

    def some_columns(self, box: SecretBox, **fields: Any) -> dict[str, Any]:
        """The columns of just these fields (by field name), written as :meth:`to_row` writes them.

        For an update of a few columns that need not read and rewrite the whole row.
        """
        writes = {field: (name, write) for name, field, write in self._writes}
        row: dict[str, Any] = {}
        for field, value in fields.items():
            name, write = writes[field]  # a field it has no column for: KeyError, as before
            row[name] = value if write is None else write(value, box)
        return row

    @classmethod
    def _written(cls, column: _Column, value: Any, box: SecretBox) -> Any:
        if column.encrypted is not None:
            return cls._encrypt(box, column.encrypted, value)
        if column.json:
            return DOCUMENTS.unstructure(value, column.kind)
        return COLUMNS.unstructure(value, column.kind)

    def from_row(self, row: sa.Row[Any], box: SecretBox, **given: Any) -> T:
        """The value a row holds, built without validators; ``given`` holds the fields kept elsewhere.

        A NULL in a column whose field does not take None gives the field's default.
        """
        return self.from_mapping(row._mapping, box, **given)

    def from_mapping(self, row: Mapping[Any, Any], box: SecretBox, **given: Any) -> T:
        """:meth:`from_row` for a row as a mapping of column names."""
        values: dict[str, Any] = dict(given)
        for column, name, hook, nullable in self._reads:
            raw = row[column.name]
            if raw is not None and column.encrypted is not None:
                raw = self._decrypt(box, column, raw, row)
            if raw is None:
                if nullable:
                    values[name] = None
                continue
            values[name] = raw if hook is None else hook(raw, column.kind)
        return self._restore(values)

    @staticmethod
    def _encrypt(box: SecretBox, how: Encrypted, value: Any) -> str | None:
        if how.as_json:
            return None if value is None else box.encrypt(json.dumps(DOCUMENTS.unstructure(value)))
        return box.encrypt(value) if value else None

    def _decrypt(self, box: SecretBox, column: _Column, raw: str, row: Mapping[Any, Any]) -> Any:
        name = f" ({row['name']!r})" if "name" in row else ""
        what = f"the {column.field.name.replace('_', ' ')} of {self._kind} {row['id']}{name}"
        text = box.decrypt(raw, what=what)
        return json.loads(text) if column.encrypted is not None and column.encrypted.as_json else text
