"""The words a domain rule speaks: a field's JSON name, the error naming it, every broken rule at once.

Apart from :mod:`.model` so that values beside it (:mod:`.browser`) state their rules with the same
words and :mod:`.model` can hold them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypeVar

import attrs

ALIAS_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


#: JSON names that keep an acronym in capitals, as Playwright spells them (browser settings).
_ACRONYM_NAMES = {"extra_http_headers": "extraHTTPHeaders", "ignore_https_errors": "ignoreHTTPSErrors"}


def camel(name: str) -> str:
    """The JSON (camelCase) name of a Python field name."""
    if name in _ACRONYM_NAMES:
        return _ACRONYM_NAMES[name]
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class FieldError(ValueError):
    """A validator's complaint about one field, named as it is in JSON."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class FieldErrors(ValueError):
    """Every field of one object that broke its rule, so a caller can fix them all at once."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors = {error.field: error.message for error in errors}
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors.items()))


C = TypeVar("C", bound=type)


def reports_every_field(cls: C) -> C:
    """Class decorator: a construction that breaks field rules raises :class:`FieldErrors` naming all.

    attrs' ``__init__`` assigns every field before it runs the validators, so once the first one
    complains the others can still be asked; only a failing construction pays for that.
    """
    init = vars(cls)["__init__"]  # attrs writes __init__ into the class itself

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except FieldError as first:
            raise FieldErrors([first, *_other_complaints(self, first)]) from None

    __init__.__doc__ = init.__doc__
    setattr(cls, "__init__", __init__)  # noqa: B010 (mypy refuses assigning a method)
    return cls


def _other_complaints(instance: Any, first: FieldError) -> list[FieldError]:
    found = []
    for field in attrs.fields(type(instance)):
        if field.validator is None:
            continue
        value = getattr(instance, field.name, attrs.NOTHING)
        if value is attrs.NOTHING:  # not assigned: __init__ failed before the validators ran
            continue
        try:
            field.validator(instance, field, value)
        except FieldError as error:
            if error.field != first.field:
                found.append(error)
    return found


def valid_alias(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not isinstance(value, str) or not ALIAS_PATTERN.match(value):
        raise FieldError(
            camel(attribute.name),
            "must start with a letter or underscore and hold at most 64 letters, digits, '_', '.' or '-'",
        )
