"""The YAML format on its own: how strings are written, and what the safe loader takes and refuses."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenariokit.domain.errors import TooLarge, ValidationError
from scenariokit.formats.yaml_io import (
    MAX_ALIAS_NODES,
    dump_document,
    dump_stream,
    literal_fits,
    load_entities,
)


def round_trip(value: object) -> object:
    return load_entities(dump_document({"kind": "snippet", "value": value}))[0].data["value"]


# --- writing ------------------------------------------------------------------------------------


def test_multi_line_code_is_written_as_a_literal_block() -> None:
    text = dump_document({"kind": "snippet", "code": "line one\n  line two\n"})

    assert text == "kind: snippet\ncode: |\n  line one\n    line two\n"


@pytest.mark.parametrize(
    "code",
    [
        "no final newline\nsecond",
        "trailing spaces  \nnext",
        "ends with spaces\n   ",
        "\ttab first\n\ttab again\n",
        "keep\nblank lines\n\n\n",
        "\nstarts with a newline",
        "  starts indented\nthen not",
        "a\n---\nb\n...\n",
        "# not a comment\n- not a list\nkey: not a map\n",
        "unicode ünïcode 🚀\n中文\n",
        "\n",
    ],
)
def test_literal_blocks_give_back_the_exact_string(code: str) -> None:
    text = dump_document({"kind": "snippet", "code": code})

    assert "code: |" in text
    assert load_entities(text)[0].data["code"] == code


@pytest.mark.parametrize("code", ["windows\r\nline ends", "nel\x85break", "line\u2028sep", "bell\x07\nx"])
def test_strings_a_literal_block_cannot_carry_are_double_quoted(code: str) -> None:
    text = dump_document({"kind": "snippet", "code": code})

    assert literal_fits(code) is False
    assert 'code: "' in text
    assert load_entities(text)[0].data["code"] == code


def test_unicode_is_written_as_is() -> None:
    text = dump_document({"kind": "environment", "name": "prüfung ключ 🚀"})

    assert "name: prüfung ключ 🚀" in text


def test_none_and_empty_string_stay_distinct() -> None:
    text = dump_document({"kind": "scenario", "a": None, "b": ""})

    assert "a: null\nb: ''\n" in text
    assert load_entities(text)[0].data == {"kind": "scenario", "a": None, "b": ""}


def test_a_stream_has_a_comment_line_per_section_and_a_document_per_entity() -> None:
    sections = [("environments", [{"kind": "environment"}]), ("scenarios", [{"kind": "scenario"}] * 2)]
    text = dump_stream(sections)

    assert text == (
        "# environments\n---\nkind: environment\n# scenarios\n---\nkind: scenario\n---\nkind: scenario\n"
    )


yaml_strings = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40) | st.lists(
    st.sampled_from(["\n", "\r", "\t", " ", "x", "#", ": ", "- ", "\x85", "\u2028", "\ufeff", "'", "---"]),
    max_size=12,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(value=st.recursive(yaml_strings, lambda inner: st.dictionaries(yaml_strings, inner, max_size=3)))
def test_any_string_or_map_of_strings_comes_back_exactly(value: object) -> None:
    assert round_trip(value) == value


# --- loading ------------------------------------------------------------------------------------


def test_single_object_and_list_documents_load_in_one_stream_with_their_places() -> None:
    text = "kind: environment\nname: a\n---\n- kind: credential\n  name: b\n- name: c\n---\n# comment\n"

    entities = load_entities(text)

    assert [(e.where, e.line, e.data.get("name")) for e in entities] == [
        ("documents[0]", 1, "a"),
        ("documents[1][0]", 4, "b"),
        ("documents[1][1]", 6, "c"),
    ]


def test_field_lines_are_known_down_to_nested_items() -> None:
    text = "kind: scenario\nname: x\nsteps:\n  - title: one\n    execCode: |\n      a\n  - title: two\n"

    entity = load_entities(text)[0]

    assert entity.line_of("steps[0].execCode") == 5
    assert entity.line_of("steps[1].execCode") == 7  # missing field: the line of its step
    assert entity.line_of("unknown") == 1


def test_dates_stay_the_text_they_were_written_as() -> None:
    assert load_entities("day: 2024-01-31\n")[0].data == {"day": "2024-01-31"}


def test_small_aliases_are_expanded() -> None:
    text = "shared: &shared {url: https://x}\ncopy: *shared\n"

    assert load_entities(text)[0].data == {"shared": {"url": "https://x"}, "copy": {"url": "https://x"}}


def test_python_object_tags_are_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"kind: scenario\nname: !!python/object/apply:os.system ['touch {marker}']\n"

    with pytest.raises(ValidationError) as refused:
        load_entities(text)

    assert not marker.exists()
    assert "!!python/object/apply:os.system" in refused.value.message
    why = "the tag !!python/object/apply:os.system is not allowed: only plain YAML data loads"
    assert refused.value.errors == {"documents[0].name": f"line 2: {why}"}


@pytest.mark.parametrize(
    "text",
    [
        "x: !custom 1\n",
        "x: !!binary aGk=\n",
        "x: !!set {a, b}\n",
        "x: !!python/name:os.system\n",
        "--- !!python/object:collections.OrderedDict {}\n",
    ],
)
def test_any_tag_beyond_plain_data_is_refused(text: str) -> None:
    with pytest.raises(ValidationError, match="tag"):
        load_entities(text)


def test_a_billion_laughs_is_refused_fast_without_expanding() -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    text = "\n".join([*lines, "name: *a9"])

    started = time.perf_counter()
    with pytest.raises(TooLarge, match="aliases expand"):
        load_entities(text)

    assert time.perf_counter() - started < 0.5


def test_alias_expansion_budget_is_per_stream() -> None:
    copies = "".join(f"b{i}: *a\n" for i in range(MAX_ALIAS_NODES // 100))
    text = "a: &a [" + ", ".join(["1"] * 100) + "]\n" + copies
    with pytest.raises(TooLarge):
        load_entities(text)


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ValidationError, match="recursive"):
        load_entities("a: &a [1, *a]\n")


@pytest.mark.parametrize(
    ("text", "where", "why"),
    [
        ("a: 1\na: 2\n", "documents[0].a", "appears twice"),
        ("base: &b {a: 1}\nother:\n  <<: *b\n", "documents[0].other", "merge keys"),
        ("[1, 2]: x\n", "documents[0]", "keys must be strings"),
        ("a: .nan\n", "documents[0].a", "finite"),
        ("just a string\n", "documents[0]", "must be a mapping"),
        ("- a: 1\n- 5\n", "documents[0][1]", "must be a mapping"),
        ("x: 1\ny:\n" + "".join(f"{'  ' * i}- \n" for i in range(1, 70)), "documents[0].y", "nested deeper"),
    ],
)
def test_data_that_is_not_plain_entities_is_refused_with_its_place(text: str, where: str, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        load_entities(text)

    [(key, message)] = refused.value.errors.items()
    assert key.startswith(where)
    assert why in message
    assert message.startswith("line ")


def test_malformed_yaml_names_the_document_and_the_line() -> None:
    text = "kind: environment\nname: ok\n---\nkind: environment\nname: [unclosed\ndata: {}\n"

    with pytest.raises(ValidationError) as refused:
        load_entities(text)

    [(key, message)] = refused.value.errors.items()
    assert key == "documents[1]"
    assert message.startswith("line 6: malformed YAML")
    assert "documents[1] (line 6)" in refused.value.message


@pytest.mark.parametrize("as_bytes", [False, True])
def test_text_over_the_size_limit_is_refused(as_bytes: bool) -> None:
    text = "a: " + "x" * 2000 + "\n"

    with pytest.raises(TooLarge):
        load_entities(text.encode() if as_bytes else text, max_bytes=1000)


def test_bytes_must_be_utf8_and_may_carry_a_bom() -> None:
    assert load_entities("\ufeffname: é\n".encode())[0].data == {"name": "é"}
    with pytest.raises(ValidationError, match="UTF-8"):
        load_entities(b"name: \xff\n")


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 5000 + "]" * 5000,  # one line: refused before the scanner sees it
        "a: " + "{a: " * 300 + "}" * 300,
        "a:\n" + "  [\n" * 3000 + "  ]\n" * 3000,  # many lines: the composer runs out of stack
        "- " * 3000 + "x\n",
    ],
)
def test_deeply_nested_text_is_refused_fast_not_crashed(text: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ValidationError, match=r"nested|malformed"):
        load_entities(text)

    assert time.perf_counter() - started < 1


def test_a_refused_scalar_is_not_echoed_in_the_error() -> None:
    with pytest.raises(ValidationError) as refused:
        load_entities("kind: credential\nsecret: !!int hunter2\n")

    assert "hunter2" not in str(refused.value)
    assert refused.value.errors == {"documents[0].secret": "line 2: not a valid !!int value"}
