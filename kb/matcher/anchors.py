"""Finding the prefilter's keys in a short text by its words, without loading Hyperscan.

A cold `kb match` of a paste spent most of its time reading and loading the Hyperscan databases
(78 MB at 1M records: 250-330 ms of a 0.4 s run) to scan a few kilobytes. Instead, each key is
given an *anchor*: the longest run of up to MAX_RUNS of its whole words, with the text between
them (b"model identifier" in b"Unrecognized model identifier '"). A word here is a maximal run
of ASCII letters, digits and underscores, and a whole word of a key is one with other bytes on
both sides inside the key: wherever the key occurs in a text, its anchor is a run of the text's
own words. So a text's windows (every run of 1 to MAX_RUNS of its words) looked up among the
anchors give every key that may occur, and a search for each says where it does. Keys with no
whole word ("File ", "('", a one-word code), and keys whose anchor is shared by more than
BUCKET_KEYS keys (reading them all would cost more than it saves), are compiled into one small
Hyperscan database of their own, the *rest shard*, scanned as usual.

Both halves live here, plain functions of bytes: what the build stores (anchor_of) and what a
match looks up (windows, hits_in); the lookup itself is kb.matcher.cache's, the choice of path
kb.matcher.prefilter's. The answer is the one the full databases give: every (end offset, key
id) of every occurrence, overlapping ones included (tests/test_anchors.py holds them equal).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final
from zlib import crc32

# A window spans up to this many words: one or two words are often common ("is not", "be in"),
# three seldom are, and a paste's windows grow with it (three per word). windows() spells the
# three out.
MAX_RUNS: Final = 3
# An anchor shared by more keys than this leaves them to the rest shard: a paste holding the
# word would read every one of them (1M records: 128 leaves 35,362 of 668,787 keys, 3.8 MB, to
# the rest shard; 32 would leave 66,482 and 7.4 MB, which take 31 ms to load against 13, more
# than the rows it spares paste.log cost: 743 keys read against 1,057).
BUCKET_KEYS: Final = 128
# Bits per anchor in the anchors' bitmap, which a text's windows are held against before they
# are looked up: the index has to be read from disk for each one looked up (1M records: 7,118
# windows of paste.log took 22-40 ms to look up; 508 pass the bitmap, 8-9 ms). One hash at 8
# bits an anchor lets about 12% of the other windows through; the bitmap is 0.5 MB at 1M
# (307,627 anchors).
BITS_PER_ANCHOR: Final = 8
# Split on what is not a word, keeping the separators: words sit at the even places.
_SPLIT_RE: Final = re.compile(rb"([^A-Za-z0-9_]+)")


def anchor_of(key: bytes) -> bytes | None:
    """The key's anchor, or None when the key has no whole word. The longest window wins (the
    length is what is known of its rarity at this point; the first of equal ones)."""
    parts = _SPLIT_RE.split(key)
    # parts: word, separator, word, ..., word, where the first and last may be empty (the key
    # starts or ends with a separator); the whole words are parts[2], parts[4] ... parts[-3].
    last = len(parts) - 3
    best: bytes | None = None
    for i in range(2, last + 1, 2):
        window = b"".join(parts[i : min(i + 2 * MAX_RUNS - 1, last + 1)])
        if best is None or len(window) > len(best):
            best = window
    return best


def windows(data: bytes) -> set[bytes]:
    """Every run of 1 to MAX_RUNS consecutive words of `data` (and, harmless, the runs that
    begin or end with the separator at its start or end)."""
    parts = _SPLIT_RE.split(data)
    words = parts[0::2]
    spaced = list(map(bytes.__add__, words, parts[1::2]))  # each word and the text after it
    found = set(words)
    found.update(map(bytes.__add__, spaced, words[1:]))
    found.update(map(bytes.__add__, map(bytes.__add__, spaced, spaced[1:]), words[2:]))
    found.discard(b"")
    return found


def hits_in(data: bytes, keys: Iterable[tuple[int, str]]) -> list[tuple[int, int]]:
    """(end offset, key id) of every occurrence in `data` of each of `keys` (id, key),
    overlapping ones included."""
    hits: list[tuple[int, int]] = []
    for key_id, key in keys:
        text = key.encode("utf-8")
        start = data.find(text)
        while start >= 0:
            hits.append((start + len(text), key_id))
            start = data.find(text, start + 1)
    return hits


def bitmap_of(anchors: Collection[bytes]) -> bytes:
    """A bitmap with one bit set for each anchor (a power of two bits, BITS_PER_ANCHOR an
    anchor or more), to tell most windows that are no anchor from the ones that may be."""
    size = 64
    while size < BITS_PER_ANCHOR * len(anchors):
        size *= 2
    bits = bytearray(size // 8)
    mask = size - 1
    for anchor in anchors:
        at = crc32(anchor) & mask
        bits[at >> 3] |= 1 << (at & 7)
    return bytes(bits)


def may_be_anchors(bits: bytes, found: Iterable[bytes]) -> list[bytes]:
    """The windows whose bit is set in an anchors' bitmap (bitmap_of): every anchor among
    them, and a few others."""
    mask = len(bits) * 8 - 1
    return [w for w in found if bits[(at := crc32(w) & mask) >> 3] >> (at & 7) & 1]
