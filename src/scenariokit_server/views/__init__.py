"""The REST views, one module per resource, and the few helpers every view uses to parse and answer.

A view parses the request with these helpers, calls one application service and shapes the result
with :mod:`scenariokit.formats.presenters`. Errors are raised, never answered here: the problem middleware in
:mod:`scenariokit_server.errors` turns them into responses.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import orjson
from aiohttp import web
from multidict import MultiMapping

from scenariokit.domain.errors import InvalidQuery, ValidationError
from scenariokit.domain.json_values import decode_json
from scenariokit.domain.model import FieldError
from scenariokit.domain.revisions import Origin, RevisionSource
from scenariokit.formats.convert import UNSTORABLE, UNSTORABLE_MESSAGE, structure_input, unstorable_path
from scenariokit.formats.presenters import API_PATH
from scenariokit_server import keys

API_PREFIX = API_PATH  # one place: the presenters write artifact URLs under it
T = TypeVar("T")


def path_id(request: web.Request, name: str = "id") -> uuid.UUID:
    """The UUID in path segment ``name``; 400 naming it when it is not a UUID."""
    raw = request.match_info[name]
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise ValidationError(
            f"{name} in the path must be a UUID", {name: f"{raw!r} is not a UUID"}
        ) from None


#: the path segments :func:`path_number` reads (a revision's number), its digits at most, its largest
PATH_NUMBERS = ("number", "from", "to")
PATH_NUMBER_DIGITS = 9
MAX_PATH_NUMBER = 10**PATH_NUMBER_DIGITS - 1


def path_number(request: web.Request, name: str) -> int:
    """The positive whole number in path segment ``name`` (a revision); 400 naming it otherwise."""
    raw = request.match_info[name]
    if not raw.isascii() or not raw.isdigit() or len(raw) > PATH_NUMBER_DIGITS or int(raw) < 1:
        raise ValidationError(
            f"{name} in the path must be a positive whole number",
            {name: f"{raw[:40]!r} is not a positive whole number"},
        )
    return int(raw)


def origin(request: web.Request, source: RevisionSource = RevisionSource.REST) -> Origin:
    """Who writes a scenario through REST: the door, the token's name, the ``message`` query parameter.

    The message is kept with the revision the write makes (docs/revisions.md); the token's name is
    the request's caller's (``services.caller``), filled in where the revision is made.
    """
    message = query_params(request).get("message")
    try:
        return Origin(source=source, token_name=None, message=message)
    except FieldError as exc:
        raise InvalidQuery("invalid message", {"message": exc.message}) from None


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object.

    400 when it is malformed, not an object, nested too deep, holds a number no store keeps or text
    no store can keep (NUL, lone surrogates): the rule of :mod:`scenariokit.domain.json_values`.
    """
    data = decode_json(await request.read())
    if not isinstance(data, dict):
        raise ValidationError("the request body must be a JSON object", {"$": "must be a JSON object"})
    bad = unstorable_path(data)
    if bad is not None:
        raise ValidationError("the request body holds unstorable text", {bad or "$": UNSTORABLE_MESSAGE})
    return data


async def body_as(request: web.Request, cls: type[T], what: str) -> T:
    """The JSON body as the typed command ``cls`` the service takes (``Patch[...]`` for a PATCH).

    One structuring, by the application's converter: a bad field is a 400 naming its JSON path.
    """
    return structure_input(keys.services(request).converter, await json_body(request), cls, what=what)


def query_params(request: web.Request) -> MultiMapping[str]:
    """The query-string parameters, refused (400) when one holds text no store keeps."""
    for name, value in request.query.items():
        if UNSTORABLE.search(name) or UNSTORABLE.search(value):
            raise InvalidQuery(f"invalid {name}", {name: UNSTORABLE_MESSAGE})
    return request.query


def only_params(params: Mapping[str, str], allowed: Iterable[str]) -> None:
    """Refuse (400) query parameters outside ``allowed``."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidQuery("unknown query parameter", {name: "unknown query parameter" for name in unknown})


def flag_param(params: MultiMapping[str], name: str) -> bool:
    """A boolean query parameter: ``true|false|1|0`` (false when absent), else 400 naming it."""
    raw = params.get(name)
    if raw is None:  # given empty (``includeSecrets=``) it is refused: a flag is true or false
        return False
    value = {"true": True, "1": True, "false": False, "0": False}.get(raw.lower())
    if value is None:
        raise InvalidQuery(f"invalid {name}", {name: "must be one of: true, false, 1, 0"})
    return value


def ids_param(params: MultiMapping[str], name: str) -> list[uuid.UUID] | None:
    """A list of UUIDs given as a repeated and/or comma-separated parameter; None when absent."""
    parts = [part.strip() for raw in params.getall(name, []) for part in raw.split(",")]
    parts = [part for part in parts if part]
    if not parts:
        return None
    try:
        return [uuid.UUID(part) for part in parts]
    except ValueError:
        raise InvalidQuery(f"invalid {name}", {name: "must be UUIDs, repeated or comma-separated"}) from None


JSON_CONTENT_TYPE = "application/json"


def dumps(data: Any) -> bytes:
    """``data`` as UTF-8 JSON: orjson, the encoding cost of a page being most of what a list costs.

    Always valid JSON: a non-finite float cannot be stored (:mod:`scenariokit.domain.json_values`), and
    orjson writes none as ``NaN``. What orjson refuses (a non-string key, a lone surrogate) falls back to
    the standard encoder, which refuses a non-finite float too.
    """
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        return json.dumps(data, allow_nan=False).encode()


def json_response(
    data: Any,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    content_type: str = JSON_CONTENT_TYPE,
) -> web.Response:
    """The one JSON response of the server: every view's answer and every problem document."""
    return web.Response(body=dumps(data), status=status, headers=headers, content_type=content_type)


def ok(data: Any) -> web.Response:
    """200 with a JSON body."""
    return json_response(data)


def created(data: Any, location: str) -> web.Response:
    """201 with the new resource and its URL in ``Location``."""
    return json_response(data, status=201, headers={"Location": location})


def no_content() -> web.Response:
    """204 with an empty body."""
    return web.Response(status=204)


def yaml_response(text: str) -> web.Response:
    """200 with a YAML document."""
    return web.Response(text=text, content_type="application/yaml")
