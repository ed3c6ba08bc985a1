"""JSON text to Python values and back, fast, with the standard library's exact results.

An import decodes every record line and digests every record (kb.digest). msgspec does both
several times faster than the `json` module and `repr` (30,000 records of the shared corpus,
2026-12-03: decoding 0.41 s against 1.03 s, encoding 0.14 s against repr's 0.66 s), which is
a tenth of an import's own time. `loads` gives what `json.loads` gives, value for value and
type for type (an integer past 64 bits stays an int, which orjson would have made a float),
because anything msgspec refuses is read again by `json`: NaN and Infinity, which `json`
takes and msgspec does not; a lone surrogate; nesting too deep; and every malformed text,
so an error names what `json` names, at the column it names.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

_decode: Final = msgspec.json.Decoder().decode
_encode: Final = msgspec.json.Encoder().encode

# What msgspec raises where `json` must decide: its own errors (malformed text, a number out
# of range), a text that is not UTF-8 (a lone surrogate), and nesting past its depth.
_REFUSED: Final = (msgspec.MsgspecError, UnicodeError, RecursionError)


def loads(text: str | bytes) -> Any:
    """json.loads(text), value for value; raises what json.loads raises."""
    try:
        return _decode(text)
    except _REFUSED:
        return json.loads(text)


def loads_utf8(data: bytes) -> Any:
    """The value of UTF-8 JSON text, as `loads` gives it; raises one of REFUSED where `loads`
    would ask `json` (and for bytes that are not UTF-8): the caller then reads the text with
    `loads`. Bytes are read as they are, with no text decoded from them first."""
    return _decode(data)


REFUSED: Final = _REFUSED


def dumps(value: Any) -> bytes:
    """Compact JSON, UTF-8. Raises ValueError for a text holding a lone surrogate (it is not
    UTF-8), TypeError (or msgspec's EncodeError) for a value JSON has no form for. Writes
    null for a float that is not finite, and a key that is not a string as a string: where
    that matters, ask `spelt_exactly` first."""
    return _encode(value)


ENCODE_ERRORS: Final = (ValueError, TypeError, msgspec.MsgspecError)  # UnicodeEncodeError too

_encode_string: Final = json.encoder.encode_basestring_ascii


def std_dumps(value: Any) -> str:
    """json.dumps(value), character for character; a list or tuple of strings (the records'
    list columns, a pattern's placeholder names and keys) is joined directly, at a third of
    the cost of the general encoder (a tuple went to it: 1.5 us against 0.4 for a list)."""
    if type(value) is list or type(value) is tuple:
        try:
            return "[" + ", ".join(map(_encode_string, value)) + "]"
        except TypeError:  # an item that is not a string
            return json.dumps(value)
    if type(value) is dict and not value:
        return "{}"
    return json.dumps(value)


def stored_text(value: Any) -> str:
    """The text a records' JSON column stores: compact JSON with every character as it is
    (UTF-8 in the database), not spelt as an escape. The full-text index reads the list
    columns' words from it (kb.models.FTS_COLUMNS): from json.dumps's text it read
    "gr\\u00fcndlich" where a solution said "gründlich", and a search for the word never found
    it. What JSON cannot spell one to one (a NaN or infinity in an unknown field) is written
    as json.dumps writes it."""
    if type(value) is dict and not value:
        return "{}"  # most records' unknown fields: 1 us each through the checks and encoder
    if not spelt_exactly(value):
        return json.dumps(value)
    return stored_strings(value)


def stored_strings(strings: list[str]) -> str:
    """stored_text of a list of strings (the records' list columns, which kb.records checks
    hold strings only), with nothing to check: in 0.20 s for the 450,000 lists of 150,000
    records, against std_dumps' 0.40 and 0.40 again with stored_text's check (2026-12-05)."""
    try:
        return _encode(strings).decode("utf-8")
    except ENCODE_ERRORS:  # a lone surrogate (a record holding one is refused before this)
        return json.dumps(strings)


def spelt_exactly(value: Any) -> bool:
    """Whether `dumps` spells the value one to one: no float that is not finite and no key
    that is not a string, at any depth. Walks dicts, lists and tuples; any other type is left
    to the encoder, which refuses what it cannot spell."""
    kind = type(value)
    if kind is float:
        return bool(value - value == 0.0)  # False for inf and nan
    if kind is list or kind is tuple:
        return all(map(spelt_exactly, value))
    if kind is dict:
        return all(type(key) is str for key in value) and all(map(spelt_exactly, value.values()))
    return True
