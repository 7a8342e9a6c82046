"""Conversion between the domain and its camelCase JSON shapes (docs/rest.md, "Conventions").

One converter per boundary, made by :func:`make_converter`; never cattrs' global one. Structuring
failures become :class:`~scenariokit.domain.errors.ValidationError` whose ``errors`` name each field by
its JSON path, ready for a 400 body.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import typing
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from scenariokit.domain import browser, model
from scenariokit.domain.audit import AuditEntry
from scenariokit.domain.errors import ValidationError
from scenariokit.domain.json_values import check_json
from scenariokit.domain.model import FieldError, FieldErrors, camel
from scenariokit.domain.schedule import Schedule
from scenariokit.formats import inputs

T = TypeVar("T")

#: Fields a client may send back from a read but that are never written (ignored on input).
READ_ONLY_FIELDS = frozenset(
    {"id", "createdAt", "updatedAt", "hasSecret", "kind", "lastFiredAt", "nextFireAt"}
)

_INPUT_CLASSES = (
    inputs.StepInput,
    inputs.LinkInput,
    inputs.StepOrderInput,
    inputs.ScenarioInput,
    inputs.EnvironmentInput,
    inputs.CredentialInput,
    inputs.SnippetInput,
    inputs.RunInput,
    inputs.RunBatchInput,
    inputs.ScheduleInput,
    inputs.AuthoringStartInput,
    inputs.AuthoringExecInput,
    inputs.AuthoringSaveInput,
)
#: Values whose unset keys (None) are left out of their JSON: ``browser: {}`` says "nothing set".
_SPARSE_CLASSES = (browser.Viewport, browser.Geolocation, browser.HttpCredentials, browser.BrowserSettings)
_MODEL_CLASSES = (  # a class after those it holds: a hook is made with the hooks of its fields
    *_SPARSE_CLASSES,
    model.Retries,
    model.Step,
    model.CredentialLink,
    model.Scenario,
    model.Environment,
    model.Credential,
    model.Snippet,
    model.Session,
    model.RunError,
    model.StepResult,
    model.RunAttempt,
    model.StepTiming,
    model.RunTimings,
    model.Run,
    model.RunLogEntry,
    model.LastFailure,
    Schedule,
    AuditEntry,
)


def format_time(value: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: Any) -> datetime:
    """Parse an ISO 8601 timestamp; a naive one is taken as UTC."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError("must be an ISO 8601 timestamp")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _structure_uuid(value: Any, _: type) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a UUID string")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a UUID") from None


def _strict(kind: type) -> Any:
    def structure(value: Any, _: type) -> Any:
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError("must be a number")
            if not math.isfinite(value):
                raise ValueError("must be a finite number")
            return value
        if kind is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise ValueError(f"must be {_KIND_NAMES[kind]}")
        return value

    return structure


_KIND_NAMES = {str: "a string", int: "a whole number", bool: "true or false", float: "a number"}


def _structure_enum(value: Any, kind: type[enum.Enum]) -> enum.Enum:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in kind)
        raise ValueError(f"must be one of: {allowed}") from None


def _enum_value(value: enum.Enum) -> Any:
    return value.value


def _structure_dict(value: Any, _: type) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return dict(value)


def _is_tuple_of_items(kind: Any) -> bool:
    args = typing.get_args(kind)
    return typing.get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis


def _list_only(kind: Any, converter: cattrs.Converter) -> Any:
    """A JSON list of items: an object or a string, which cattrs would iterate, is refused."""
    items = homogenous_tuple_structure_factory(kind, converter)

    def structure(value: Any, kind: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise ValueError("must be a list")
        return items(value, kind)

    return structure


def _rename_overrides(cls: type) -> dict[str, Any]:
    return {
        field.name: override(rename=camel(field.name))
        for field in attrs.fields(cls)
        if camel(field.name) != field.name
    }


class _Unset:
    """The value of a field a PATCH does not name (None is a value a PATCH may give)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


def _unless_unset(validator: Callable[..., Any]) -> Callable[..., Any]:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not UNSET:
            validator(instance, attribute, value)

    return check


@functools.cache
def changes_class(cls: type) -> type:
    """``cls`` with every field optional (absent: :data:`UNSET`) and the same rules for a given one.

    The structuring target of ``Patch[cls]``: cattrs checks the fields a PATCH names with the hooks
    and validators of the full input, so a bad value gets the same words at the same JSON path.
    """
    hints = typing.get_type_hints(cls)
    these = {
        field.name: attrs.field(
            default=UNSET,
            validator=_unless_unset(field.validator) if field.validator else None,
            type=hints[field.name],
            metadata=field.metadata,
        )
        for field in attrs.fields(cls)
    }
    changes = attrs.make_class(f"{cls.__name__}Changes", these, frozen=True, repr=False)
    return model.reports_every_field(changes)


def _is_patch(kind: Any) -> bool:
    return typing.get_origin(kind) is inputs.Patch


def _patch_structure(kind: Any, converter: cattrs.Converter) -> Callable[[Any, Any], inputs.Patch[Any]]:
    (target,) = typing.get_args(kind)
    changes = changes_class(target)
    structure: Callable[[Any, Any], Any] = make_dict_structure_fn(
        changes, converter, _cattrs_forbid_extra_keys=True, **_rename_overrides(changes)
    )

    def patch(value: Any, _: Any) -> inputs.Patch[Any]:
        given = structure(value, changes)
        return inputs.Patch(
            {
                field.name: value
                for field in attrs.fields(changes)
                if (value := getattr(given, field.name)) is not UNSET
            }
        )

    return patch


def _scenario_alias(data: Mapping[str, Any]) -> dict[str, Any]:
    """A run's ``scenario`` (an id, or the ``{"id", "name"}`` object a run answers) as ``scenarioId``."""
    body = {key: value for key, value in data.items() if key != "scenario"}
    scenario = data["scenario"]
    if isinstance(scenario, Mapping):
        unknown = sorted(set(scenario) - {"id", "name"})
        if "id" not in scenario or unknown:
            raise FieldErrors(
                [FieldError(f"scenario.{key}", "unknown field") for key in unknown]
                or [FieldError("scenario.id", "is required")]
            )
        scenario = scenario["id"]
    if "scenarioId" in data and data["scenarioId"] != scenario:
        raise FieldError("scenario", "names another scenario than scenarioId; give one")
    return {**body, "scenarioId": scenario}


def _run_input_structure(converter: cattrs.Converter, cls: type[T]) -> Callable[[Any, Any], T]:
    """A run request's hook: camelCase names, and the ``scenario`` alias of ``scenarioId`` resolved first."""
    structure = make_dict_structure_fn(
        cls, converter, _cattrs_forbid_extra_keys=True, **_rename_overrides(cls)
    )

    def run_input(value: Any, kind: Any) -> T:
        if isinstance(value, Mapping) and "scenario" in value:
            value = _scenario_alias(value)
        return structure(value, kind)

    return run_input


def _objects_only(structure: Callable[[Any, Any], T]) -> Callable[[Any, Any], T]:
    """A class's hook that refuses anything but a JSON object in words (cattrs would try to iterate it)."""

    def structure_object(value: Any, kind: Any) -> T:
        if not isinstance(value, Mapping):
            raise ValueError("must be a JSON object")
        return structure(value, kind)

    return structure_object


def make_converter() -> cattrs.Converter:
    """A converter for scenariokit's JSON shapes: camelCase keys, UUID strings, ISO timestamps.

    Unknown keys are refused when structuring; output omits nothing (policy on secrets and masked
    tokens lives in :mod:`scenariokit.formats.presenters`).
    """
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(uuid.UUID, _structure_uuid)
    converter.register_unstructure_hook(uuid.UUID, str)
    converter.register_structure_hook(datetime, lambda value, _: parse_time(value))
    converter.register_unstructure_hook(datetime, format_time)
    for kind in (str, int, bool, float):
        converter.register_structure_hook(kind, _strict(kind))
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _structure_dict)
    converter.register_structure_hook_factory(_is_tuple_of_items, partial(_list_only, converter=converter))
    converter.register_unstructure_hook(enum.Enum, lambda value: value.value)
    # Per class: the str hook above would otherwise win for StrEnums (str precedes Enum in the MRO).
    for enum_type in (
        model.RunStatus,
        model.StepStatus,
        model.RunErrorKind,
        model.SessionStatus,
        model.Backoff,
        browser.ColorScheme,
        browser.VideoMode,
    ):
        converter.register_structure_hook(enum_type, _structure_enum)
        converter.register_unstructure_hook(enum_type, _enum_value)  # a plain str, YAML too
    for cls in _MODEL_CLASSES + _INPUT_CLASSES:  # models first: an input may hold one (Retries)
        overrides = _rename_overrides(cls)
        structure = make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)
        converter.register_structure_hook(cls, _objects_only(structure))
        unstructure = make_dict_unstructure_fn(
            cls, converter, _cattrs_omit_if_default=cls in _SPARSE_CLASSES, **overrides
        )
        converter.register_unstructure_hook(cls, unstructure)
    for run_request in (inputs.RunInput, inputs.RunBatchInput):
        converter.register_structure_hook(run_request, _run_input_structure(converter, run_request))
    converter.register_structure_hook_factory(_is_patch, partial(_patch_structure, converter=converter))
    return converter


_PATH_PART = re.compile(r"\[(?:'|\")?([^\]'\"]+)(?:'|\")?\]|\.(\w+)")


def _error_path(path: str) -> str:
    parts: list[str] = []
    for bracket, attr in _PATH_PART.findall(path):
        if attr:
            parts.append(attr)
        elif bracket.isdigit():
            if parts:
                parts[-1] += f"[{bracket}]"
            else:
                parts.append(f"[{bracket}]")
        else:
            parts.append(bracket)
    return ".".join(parts)


def _collect(exc: BaseException, path: str, errors: dict[str, str]) -> None:
    if isinstance(exc, ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            errors[_join(path, key)] = "unknown field"
        return
    if isinstance(exc, ClassValidationError | IterableValidationError):
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            name = getattr(note, "name", None)
            index = getattr(note, "index", None)
            if name is not None:
                inner_path = _join(path, camel(str(name)))
            else:
                inner_path = f"{path}[{index}]"
            _collect(inner, inner_path, errors)
        for inner in without:
            _collect(inner, path, errors)
        return
    if isinstance(exc, FieldError):
        errors[_join(path, exc.field)] = exc.message
        return
    if isinstance(exc, FieldErrors):
        for field, message in exc.errors.items():
            errors[_join(path, field)] = message
        return
    if isinstance(exc, KeyError):
        errors[path or "$"] = "is required"
        return
    if isinstance(exc, TypeError) and "required" in str(exc) and "argument" in str(exc):
        for missing in re.findall(r"'(\w+)'", str(exc)):
            errors[_join(path, camel(missing))] = "is required"
        return
    errors[path or "$"] = str(exc) or type(exc).__name__


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def errors_of(exc: BaseException) -> dict[str, str]:
    """Map a cattrs/attrs structuring failure to ``{json.path: message}``."""
    errors: dict[str, str] = {}
    _collect(exc, "", errors)
    return errors


#: Text no store keeps: PostgreSQL refuses NUL, and no database encodes an unpaired surrogate.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
UNSTORABLE_MESSAGE = "must not contain NUL characters or unpaired surrogates"


def unstorable_path(value: Any, path: str = "") -> str | None:
    """The JSON path of the first string (key or value) holding NUL or a lone surrogate, else None."""
    if isinstance(value, str):
        return path if UNSTORABLE.search(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and UNSTORABLE.search(key):
                return inner
            if (found := unstorable_path(item, inner)) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := unstorable_path(item, f"{path}[{index}]")) is not None:
                return found
    return None


def structure_input(converter: cattrs.Converter, data: Any, cls: type[T], *, what: str | None = None) -> T:
    """Structure ``data`` (decoded JSON) into ``cls``, or raise a ValidationError naming each bad field.

    Read-only fields a client may echo back from a read (``id``, ``createdAt`` …) are ignored.
    """
    label = what or cls.__name__.removesuffix("Input").lower()
    if not isinstance(data, Mapping):
        raise ValidationError(f"the {label} must be a JSON object", {"$": "must be a JSON object"})
    cleaned = {key: value for key, value in data.items() if key not in READ_ONLY_FIELDS}
    if data.get("id") is not None:  # ignored, but an id echoed back is still an id (OpenAPI says so)
        try:
            _structure_uuid(data["id"], uuid.UUID)
        except ValueError as exc:
            raise ValidationError(f"invalid {label}", {"id": str(exc)}) from None
    bad = unstorable_path(cleaned)
    if bad is not None:
        raise ValidationError(f"invalid {label}: unstorable text", {bad or "$": UNSTORABLE_MESSAGE})
    check_json(cleaned, what=label)
    try:
        return converter.structure(cleaned, cls)
    except (cattrs.BaseValidationError, FieldError, ValueError, TypeError, KeyError) as exc:
        errors = errors_of(exc)
        raise ValidationError(f"invalid {label}", errors) from None


def structure_run_request(converter: cattrs.Converter, data: Any) -> inputs.RunInput | inputs.RunBatchInput:
    """A request to run a scenario: ``environmentIds`` asks for a batch (a run per environment), else one."""
    if isinstance(data, Mapping) and "environmentIds" in data:
        if "environmentId" in data:
            why = "give environmentId or environmentIds, not both"
            raise ValidationError(f"invalid run: {why}", {"environmentIds": why})
        return structure_input(converter, data, inputs.RunBatchInput, what="run")
    return structure_input(converter, data, inputs.RunInput, what="run")
