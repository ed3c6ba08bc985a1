"""kb.jsontext: the text a records' JSON column stores."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from kb.jsontext import stored_text


@pytest.mark.parametrize(
    "value",
    [{}, {"a": 1}, {"k": {}}, {"x": ["ü", 2, None]}, [], ["gründlich"], {"n": math.nan}],
)
def test_stored_text_reads_back_as_the_value_and_keeps_every_character(value: Any) -> None:
    text = stored_text(value)
    if all(
        not isinstance(v, float) or math.isfinite(v) for v in _leaves(value)
    ):  # what JSON spells one to one: compact, every character as it is
        assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    else:  # NaN: as json.dumps writes it
        assert text == json.dumps(value)
    assert repr(json.loads(text)) == repr(value)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
