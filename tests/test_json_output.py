"""JSON output (`--json` of every command, kb.render.to_json) is written faster than `json`
writes it, and character for character as `json` writes it: the same text, the same escapes
of what a terminal must not see, the same errors."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb.render import to_json
from kb.text import JSON_UNSAFE_RE, _escaped, indented_json, json_safe

_texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_keys = _texts | st.integers() | st.floats() | st.booleans() | st.none()
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _texts
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_texts, inner, max_size=4)
        | st.dictionaries(_keys, inner, max_size=3)
    ),
    max_leaves=24,
)


def json_written(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


@settings(max_examples=600, deadline=None)
@given(value=_values)
def test_indented_json_is_character_for_character_what_json_writes(value: Any) -> None:
    assert indented_json(value) == json_written(value)


@settings(max_examples=400, deadline=None)
@given(text=st.text(st.characters(codec=None, exclude_categories=()), max_size=40))
def test_json_safe_escapes_exactly_what_its_pattern_names(text: str) -> None:
    encoded = json.dumps(text, ensure_ascii=False)
    assert json_safe(encoded) == JSON_UNSAFE_RE.sub(_escaped, encoded)


@pytest.mark.parametrize(
    "encoded",
    ['"plain ascii"', '"delete \x7f here"', '"bidi \u202e here"', '"line\u2028sep"', '"\x85"'],
)
def test_json_safe_leaves_no_unsafe_character_ascii_or_not(encoded: str) -> None:
    safe = json_safe(encoded)
    assert JSON_UNSAFE_RE.search(safe) is None
    assert json.loads(safe) == json.loads(encoded)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"level": Level.HIGH, "nested": [Level.HIGH]},
        {"name": Name("x"), "keyed": {Name("k"): 1}},
        {"nan": float("nan"), "inf": [float("inf"), -float("inf")]},
        {1: "int key", None: "none key", 2.5: "float key", False: "bool key"},
        ("a", ("b", []), {}),
    ],
    ids=["int-enum", "str-subclass", "non-finite", "non-string-keys", "tuples"],
)
def test_values_json_spells_its_own_way_are_spelt_by_json(value: Any) -> None:
    assert indented_json(value) == json_written(value)


def test_what_json_refuses_is_refused_with_jsons_error() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    for value in ({"colour": Colour.RED}, {"set": {1}}, cycle):
        with pytest.raises((TypeError, ValueError)) as ours:
            indented_json(value)
        with pytest.raises(type(ours.value)) as theirs:
            json_written(value)
        assert str(ours.value) == str(theirs.value)


def test_a_deep_value_is_written_as_json_writes_it() -> None:
    deep: Any = "leaf"
    for n in range(400):
        deep = [deep] if n % 2 else {"k": deep}
    assert indented_json(deep) == json_written(deep)


def test_to_json_of_a_match_report_reads_back_whole_and_escaped() -> None:
    report = {
        "matches": [
            {
                "id": "46a1fcb95e0d367e",
                "score": 0.97,
                "captures": ["foo", "\u202ereversed\x1b[31m"],
                "record": {"solutions": [], "extra": {"count": 2**70}},
            }
        ],
        "unmatched": [],
        "stats": {"lines": 200, "elapsed_ms": 8.2},
    }
    text = to_json(report)
    assert json.loads(text) == report
    assert "\u202e" not in text and "\x1b" not in text
    assert text == json_safe(json_written(report))
