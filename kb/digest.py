"""A record's content digest: what a re-import compares to tell an unchanged record from an
updated one (the records table's content_hash).

The digest is DIGEST_PREFIX and the SHA-256 of the record's JSON (kb.jsontext), cut to fit the
column. Before 2026-12-03 kb digested the record's repr instead (`legacy_digest`: 64 hex digits,
no prefix); encoding a record as JSON costs a fifth of its repr, and the repr was a tenth of
an import's own time. A stored digest of the old form is still read: a record is unchanged
when either form of its digest is the one stored, so nothing is counted as updated (or
rewritten) because kb changed how it digests. A record JSON cannot spell one to one (an
unknown field holding NaN or Infinity, or a text with a lone surrogate, which the reader
then refuses anyway) keeps the old form.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from hashlib import _Hash

DIGEST_PREFIX: Final = "j:"  # no hex digit and no colon starts a digest of the old form
DIGEST_CHARS: Final = 64  # the content_hash column: String(64), a VARCHAR on PostgreSQL
_HEX_DIGITS: Final = DIGEST_CHARS - len(DIGEST_PREFIX)  # 248 of SHA-256's 256 bits

# What is digested: the record's column values in the table's order, its unknown fields, and
# whether it is a stub.
Parts = tuple[list[Any], dict[str, Any], bool]


def digest_of(parts: Parts) -> str:
    """The digest kb stores for a record now: the JSON form where JSON spells the record one
    to one (the column values are validated strings, integers, booleans, nulls and lists of
    strings: only the unknown fields need a look), else the old form."""
    sha256, dumps, spelt_exactly, encode_errors = _tools()
    _columns, extra, _stub = parts
    if not extra or spelt_exactly(extra):
        try:
            return DIGEST_PREFIX + sha256(dumps(parts)).hexdigest()[:_HEX_DIGITS]
        except encode_errors:
            pass
    return legacy_digest(parts)


@functools.cache
def _tools() -> tuple[Callable[[bytes], _Hash], Callable[[Any], bytes], Callable[[Any], bool], Any]:
    """SHA-256 and kb.jsontext's encoder, imported at the first digest: msgspec costs a cold
    `kb match` 15 ms and hashlib (OpenSSL) 3 ms, and it reads records, never digests them.
    Looked up once, not imported at every call: that cost 1.2 us of a record's 5.7 (2026-12-06,
    150,000 records: 0.18 s of an import's own time)."""
    import hashlib

    from kb.jsontext import ENCODE_ERRORS, dumps, spelt_exactly

    return hashlib.sha256, dumps, spelt_exactly, ENCODE_ERRORS


def legacy_digest(parts: Parts) -> str:
    """The digest kb stored before the JSON form: SHA-256 of the repr (which spells every
    character that is not printable as an escape, a lone surrogate as "\\udXXX")."""
    import hashlib

    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


def is_json_digest(digest: str) -> bool:
    return digest.startswith(DIGEST_PREFIX)
