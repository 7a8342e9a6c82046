"""The YAML format of export and import (docs/yaml.md): writing streams, and loading them safely.

Writing: one entity per document, keys in a fixed readable order, multi-line text as literal blocks
(``|``) wherever a literal block gives the string back exactly, a double-quoted scalar elsewhere.

Loading: the node graph is composed by ruamel.yaml's safe loader and turned into plain data here, so
nothing but maps, lists, strings, numbers, booleans and nulls can come out of it: any other tag is
refused. Aliases are expanded against a node budget, so a "billion laughs" stream is refused after a
few thousand nodes instead of exhausting memory. Every mapping keeps the line it came from, so a
refusal names the document and the line.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import cattrs
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from scenariokit.domain.errors import TooLarge, ValidationError
from scenariokit.domain.json_values import MAX_INT, MIN_INT, TOO_BIG
from scenariokit.domain.model import Credential, Environment, Retries, Scenario, Snippet
from scenariokit.domain.schedule import Schedule

#: Largest YAML text accepted, in bytes of UTF-8 (the REST body limit).
MAX_YAML_BYTES = 5 * 1024 * 1024
#: How many nodes alias expansion may add to a stream in all.
MAX_ALIAS_NODES = 10_000
#: Deepest nesting of maps and lists accepted.
MAX_DEPTH = 64
#: The entity kinds, as the ``kind`` field writes them.
KINDS = ("environment", "credential", "scenario", "snippet", "schedule")

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(_TAG + name for name in ("str", "null", "bool", "int", "float", "timestamp"))
# Characters a literal block cannot carry unchanged: YAML readers turn these line breaks into "\n"
# (or take them as breaks), and the rest are not printable in YAML.
_NOT_LITERAL = frozenset("\r\x85\u2028\u2029\ufeff")
_BREAKS = frozenset("\r\x85\u2028\u2029")

_KEY_ORDER: dict[str, tuple[str, ...]] = {
    "scenario": (
        "id",
        "name",
        "description",
        "environmentId",
        "timeoutSeconds",
        "retries",
        "browser",
        "credentials",
        "steps",
    ),
    "step": ("id", "order", "title", "timeoutSeconds", "execCode"),
    "link": ("credentialId", "alias"),
    "environment": ("id", "name", "description", "data", "browser"),
    "credential": ("id", "name", "description", "username"),
    "snippet": ("id", "alias", "title", "description", "code"),
    "schedule": ("id", "scenarioId", "environmentIds", "cron", "intervalSeconds", "timezone", "enabled"),
}


# --- writing ------------------------------------------------------------------------------------


def literal_fits(text: str) -> bool:
    """Whether ``text`` is multi-line and a literal block scalar gives it back exactly."""
    if "\n" not in text:
        return False
    return all(
        ch in "\t\n"
        or (
            ch not in _NOT_LITERAL
            and (
                "\x20" <= ch <= "\x7e"
                or "\xa0" <= ch <= "\ud7ff"
                or "\ue000" <= ch <= "\ufffd"
                or "\U00010000" <= ch <= "\U0010ffff"
            )
        )
        for ch in text
    )


def _styled(value: Any) -> Any:
    """``value`` with every string that fits a literal block marked to be written as one.

    A string holding a character a reader may take for a line break is written double-quoted, where
    it is escaped: in plain or single-quoted style it would come back changed.
    """
    if isinstance(value, str):
        if literal_fits(value):
            return LiteralScalarString(value)
        return DoubleQuotedScalarString(value) if _BREAKS.intersection(value) else value
    if isinstance(value, Mapping):
        return {_styled(key): _styled(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_styled(item) for item in value]
    return value


def _dumper() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.allow_unicode = True
    yaml.width = 1 << 20  # long lines stay on one line
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.default_flow_style = False
    yaml.representer.add_representer(
        type(None), lambda representer, _: representer.represent_scalar(_TAG + "null", "null")
    )
    return yaml


def dump_document(entity: Mapping[str, Any]) -> str:
    """One entity as the text of one YAML document (no ``---`` marker)."""
    out = io.StringIO()
    _dumper().dump(_styled(entity), out)
    return out.getvalue()


def dump_stream(sections: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> str:
    """A stream: per section a ``# name`` comment line, then its entities, each its own document."""
    parts: list[str] = []
    for name, entities in sections:
        parts.append(f"# {name}\n")
        parts.extend(f"---\n{dump_document(entity)}" for entity in entities)
    return "".join(parts)


def _timeout(value: float | None) -> float | int | None:
    # Stores keep timeouts as floats; a whole number reads better without ".0" and comes back equal.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _ordered(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: data[key] for key in _KEY_ORDER[kind] if key in data}


def scenario_document(conv: cattrs.Converter, scenario: Scenario) -> dict[str, Any]:
    """A scenario as exported: its fields, credential links and steps (timestamps are not exported)."""
    data = _ordered("scenario", conv.unstructure(scenario))
    data["timeoutSeconds"] = _timeout(scenario.timeout_seconds)
    if scenario.retries == Retries():  # the default says nothing: an export without retries stays as it was
        del data["retries"]
    else:
        data["retries"]["backoffSeconds"] = _timeout(scenario.retries.backoff_seconds)
    if not data["browser"]:  # none set says nothing: an export without settings stays as it was
        del data["browser"]
    data["credentials"] = [_ordered("link", link) for link in data["credentials"]]
    steps = []
    for step, raw in zip(scenario.steps, data["steps"], strict=True):
        item = _ordered("step", raw)
        item["timeoutSeconds"] = _timeout(step.timeout_seconds)
        steps.append(item)
    data["steps"] = steps
    return {"kind": "scenario", **data}


def environment_document(conv: cattrs.Converter, environment: Environment) -> dict[str, Any]:
    """An environment as exported (``browser`` only when it sets something)."""
    data = _ordered("environment", conv.unstructure(environment))
    if not data["browser"]:
        del data["browser"]
    return {"kind": "environment", **data}


def credential_document(
    conv: cattrs.Converter, credential: Credential, *, include_secret: bool
) -> dict[str, Any]:
    """A credential as exported; its secret only when asked for."""
    data = {"kind": "credential", **_ordered("credential", conv.unstructure(credential))}
    if include_secret:
        data["secret"] = credential.secret
    return data


def schedule_document(conv: cattrs.Converter, schedule: Schedule) -> dict[str, Any]:
    """A schedule as exported: what it runs and when (its fire times are the store's, not exported)."""
    data = _ordered("schedule", conv.unstructure(schedule))
    if schedule.cron is None:
        del data["cron"]
    else:
        del data["intervalSeconds"]
    return {"kind": "schedule", **data}


def snippet_document(conv: cattrs.Converter, snippet: Snippet) -> dict[str, Any]:
    """A snippet as exported."""
    return {"kind": "snippet", **_ordered("snippet", conv.unstructure(snippet))}


# --- loading ------------------------------------------------------------------------------------


@attrs.frozen
class Entity:
    """One mapping of an imported stream, with where it stands in it."""

    data: dict[str, Any]
    #: ``documents[2]`` for a single-object document, ``documents[2][0]`` for an item of a list document.
    where: str
    #: 1-based line of the mapping.
    line: int
    #: 1-based line of each field inside the entity, by path (``steps[0].execCode``).
    lines: Mapping[str, int] = attrs.field(factory=dict)

    @property
    def kind(self) -> Any:
        """The ``kind`` the document gives, or None."""
        return self.data.get("kind")

    def line_of(self, path: str) -> int:
        """The line of ``path`` in the entity, or of the nearest enclosing field that has one."""
        while path and path != "$":
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.line

    def path(self, path: str) -> str:
        """A path inside the entity as a path of the stream (``documents[2].steps[0]``)."""
        if not path or path == "$":
            return self.where
        return f"{self.where}{path}" if path.startswith("[") else f"{self.where}.{path}"


def refusal(where: str, line: int | None, why: str) -> ValidationError:
    """The ValidationError for a stream refused at ``where``, naming the line."""
    at = f" (line {line})" if line is not None else ""
    return ValidationError(f"{where}{at}: {why}", {where: f"line {line}: {why}" if line is not None else why})


class _Builder:
    """Turns composed nodes into plain data, refusing tags, duplicate keys and expansion bombs."""

    def __init__(self, yaml: YAML, max_alias_nodes: int) -> None:
        self._constructor = yaml.constructor
        self._budget = max_alias_nodes
        self._seen: set[int] = set()
        self._active: set[int] = set()

    def start_document(self) -> None:
        """Forget the nodes of the last document: anchors do not cross documents, and ids get reused."""
        self._seen.clear()

    def build(self, node: Node, where: str, lines: dict[str, int], path: str = "", depth: int = 0) -> Any:
        """The plain data of ``node`` at ``path`` of the entity at ``where``; records field lines."""
        line = node.start_mark.line + 1
        at = f"{where}.{path}" if path and not path.startswith("[") else f"{where}{path}"
        if id(node) in self._active:
            raise refusal(at, line, "a recursive alias is not allowed")
        if id(node) in self._seen:
            self._budget -= 1
            if self._budget < 0:
                raise TooLarge(
                    f"{at} (line {line}): aliases expand to too many nodes; the stream was not expanded"
                )
        self._seen.add(id(node))
        if depth > MAX_DEPTH:
            raise refusal(at, line, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ScalarNode):
            return self._scalar(node, at, line)
        self._active.add(id(node))
        try:
            if isinstance(node, MappingNode) and node.tag == _TAG + "map":
                return self._mapping(node, where, lines, path, depth)
            if isinstance(node, SequenceNode) and node.tag == _TAG + "seq":
                items = []
                for index, item in enumerate(node.value):
                    lines[f"{path}[{index}]"] = item.start_mark.line + 1
                    items.append(self.build(item, where, lines, f"{path}[{index}]", depth + 1))
                return items
        finally:
            self._active.discard(id(node))
        raise refusal(at, line, f"the tag {_tag_name(node.tag)} is not allowed: only plain YAML data loads")

    def _mapping(self, node: MappingNode, where: str, lines: dict[str, int], path: str, depth: int) -> Any:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == _TAG + "merge":
                raise refusal(
                    where + (f".{path}" if path else ""), key_line, "merge keys (<<) are not supported"
                )
            key = (
                self.build(key_node, where, lines, path, depth + 1)
                if isinstance(key_node, ScalarNode)
                else None
            )
            if not isinstance(key, str):
                raise refusal(where + (f".{path}" if path else ""), key_line, "mapping keys must be strings")
            child = f"{path}.{key}" if path else key
            if key in result:
                raise refusal(f"{where}.{child}", key_line, f"the key {key!r} appears twice")
            lines[child] = key_line
            result[key] = self.build(value_node, where, lines, child, depth + 1)
        return result

    def _scalar(self, node: ScalarNode, at: str, line: int) -> Any:
        if node.tag not in _SCALAR_TAGS:
            raise refusal(
                at, line, f"the tag {_tag_name(node.tag)} is not allowed: only plain YAML data loads"
            )
        if node.tag == _TAG + "str":
            return str(node.value)
        if node.tag == _TAG + "timestamp":
            return str(node.value)  # JSON has no timestamps: a date stays the text it was written as
        try:
            value = self._constructor.construct_object(node, deep=True)
        except (YAMLError, ValueError, TypeError):  # the value is not echoed: it may be a secret
            raise refusal(at, line, f"not a valid {_tag_name(node.tag)} value") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise refusal(at, line, "numbers must be finite (JSON has no NaN or infinity)")
        if isinstance(value, int) and not isinstance(value, bool) and not MIN_INT <= value <= MAX_INT:
            raise refusal(at, line, TOO_BIG)  # JSON's rule; a huge int could not even be printed
        return value


def _tag_name(tag: str | None) -> str:
    tag = tag or "?"
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


def _decode(text: str | bytes, max_bytes: int) -> str:
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise TooLarge(f"the YAML text is {size} bytes; at most {max_bytes} are accepted")
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            "the YAML text is not UTF-8", {"documents": f"byte {exc.start} is not UTF-8: {exc.reason}"}
        ) from None


def _documents(yaml: YAML, text: str) -> Iterator[tuple[int, Node | None]]:
    index = 0  # the document being composed, named when it fails
    try:
        for node in yaml.compose_all(text):
            yield index, node
            index += 1
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        why = " ".join(part for part in (exc.context, exc.problem) if part) or "malformed YAML"
        raise refusal(
            f"documents[{index}]", mark.line + 1 if mark else None, f"malformed YAML: {why}"
        ) from None
    except YAMLError as exc:  # the reader's: a character YAML does not allow
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        why = getattr(exc, "reason", None) or str(exc)
        character = getattr(exc, "character", None)
        if character is not None:
            why = f"character {chr(character) if isinstance(character, int) else character!r}: {why}"
        raise refusal(f"documents[{index}]", line, f"malformed YAML: {why}") from None
    except RecursionError:
        raise refusal(f"documents[{index}]", None, "nested too deeply") from None


def _check_flow_nesting(text: str) -> None:
    # ruamel's pure-Python scanner keeps a possible simple key per open flow level of the current line
    # and walks them all for every token: a short line of a few hundred "[" costs it seconds. Such a
    # line is refused before scanning; nesting that deep is refused later anyway.
    for number, line in enumerate(text.splitlines(), start=1):
        if line.count("[") + line.count("{") <= MAX_DEPTH:
            continue
        depth = 0
        for ch in line:
            if ch in "[{":
                depth += 1
                if depth > MAX_DEPTH:
                    raise refusal(
                        "documents", number, f"flow collections nested deeper than {MAX_DEPTH} levels"
                    )
            elif ch in "]}" and depth:
                depth -= 1


def load_entities(
    text: str | bytes, *, max_bytes: int = MAX_YAML_BYTES, max_alias_nodes: int = MAX_ALIAS_NODES
) -> list[Entity]:
    """The entities of a YAML stream, safely loaded.

    A document is one mapping (the older single-object format) or a list of mappings (the newer
    format); empty documents are skipped. Raises TooLarge over ``max_bytes`` or when aliases would add
    more than ``max_alias_nodes`` nodes, and ValidationError (naming document and line) for anything
    that is not plain YAML data of that shape.
    """
    source = _decode(text, max_bytes)
    _check_flow_nesting(source)
    yaml = YAML(typ="safe", pure=True)
    builder = _Builder(yaml, max_alias_nodes)
    entities: list[Entity] = []
    for index, node in _documents(yaml, source):
        where = f"documents[{index}]"
        builder.start_document()
        if node is None or (isinstance(node, ScalarNode) and node.tag == _TAG + "null"):
            continue
        if isinstance(node, SequenceNode) and node.tag == _TAG + "seq":
            items = [(f"{where}[{i}]", item) for i, item in enumerate(node.value)]
        else:
            items = [(where, node)]
        for item_where, item in items:
            lines: dict[str, int] = {}
            data = builder.build(item, item_where, lines)
            if not isinstance(data, dict):
                raise refusal(
                    item_where,
                    item.start_mark.line + 1,
                    "a document must be a mapping (one entity) or a list of mappings",
                )
            entities.append(Entity(data=data, where=item_where, line=item.start_mark.line + 1, lines=lines))
    return entities
