"""kb search's "did you mean": unknown words corrected against the knowledge base's words
(slug words, classes, codes, repositories) and misspelt identifiers against the identifiers
in its messages, both word lists built once per knowledge-base revision and kept in a cache
folder. rapidfuzz is imported only when a query has an unknown word."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from kb.records import ID_RE

SUGGEST_CUTOFF: Final = 80  # rapidfuzz ratio a correction needs; lower suggests nonsense
# Words corrected per query at most: each unknown word costs an index probe and a fuzzy scan of
# the vocabulary (a few ms), and a long paste is not a typo.
MAX_CORRECTIONS: Final = 8
# An identifier shorter than this is corrected as a word, not against the identifiers: short
# names are near too many others to guess one.
MIN_IDENTIFIER_CHARS: Final = 5
# Messages read in one pass when the identifiers are collected from the records (a batch of
# an import's rows, as the build beside it reads them): one string of about 100 KB.
IDENTIFIER_BATCH: Final = 1000
# Word lists read in this process, by file (the revision is in its name): at 1M records the
# vocabulary file is 3.2 MB, 70 ms to read and split on every corrected search of a server.
_LOADED: dict[Path, list[str]] = {}
LOADED_FILES: Final = 4
IDENTIFIERS: Final = "identifiers"  # the identifiers list's kind (kb.matcher.background writes it)
VOCABULARY: Final = "vocabulary"  # the vocabulary's kind (so does the build beside an import)
WORD_LISTS: Final = (IDENTIFIERS, VOCABULARY)  # what a matcher build collects and shares

# Identifiers as they appear in messages: snake_case, dotted.names, camelCase (what a
# misspelling is corrected against, IDENTIFIER_HINT_RE says which terms are identifiers).
IDENTIFIER_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
IDENTIFIER_HINT_RE: Final = re.compile(r"[A-Za-z0-9]_|\.[A-Za-z_]|[a-z][A-Z]")
# The columns whose words make the vocabulary, and whether a whole value is a word too (a
# class or a code is searched as it is written: "keyerror", "e0502").
VOCABULARY_COLUMNS: Final = (
    ("slug", False),
    ("error_class", True),
    ("error_code", True),
    ("repo", False),
)
# A word as the search indexes see it: letters and digits, no underscores.
WORD_RE: Final = re.compile(r"[^\W_]+", re.UNICODE)


class Speller:
    """Corrections for one knowledge base: `run` reads it (kb.sql.Runner.rows), `known` says
    whether a term finds any record (the search's own index probe)."""

    def __init__(
        self,
        run: Callable[..., list[tuple[Any, ...]]],
        known: Callable[[str], bool],
        cache: Path | None = None,
        revision: str = "",
    ) -> None:
        self.run = run
        self.known = known
        self.cache = cache
        self.revision = revision
        self._identifiers: list[str] | None = None

    def correct(self, terms: Sequence[str]) -> list[str]:
        """Each unknown plain word replaced by the nearest word of the vocabulary, each
        unknown identifier (backnd_per_kindd) by the nearest identifier of the messages."""
        words: list[str] = []
        identifiers: list[str] = []
        for term in terms:
            if len(words) + len(identifiers) >= MAX_CORRECTIONS:
                break
            if ID_RE.fullmatch(term.lower()):
                continue  # an id no record has: no word is near it (a fuzzy scan for nothing)
            if WORD_RE.fullmatch(term):
                kind = words
            elif is_identifier(term):
                kind = identifiers
            else:
                continue
            if not self.known(term):
                kind.append(term)
        if not words and not identifiers:
            return list(terms)
        from rapidfuzz import fuzz, process

        fixed: dict[str, str] = {}
        for unknown, choices, shown in (
            (words, self.vocabulary, None),
            (identifiers, self._lowered_identifiers, self.identifiers),
        ):
            if not unknown:
                continue
            vocabulary = choices()
            for term in unknown:
                best = process.extractOne(
                    term.lower(), vocabulary, scorer=fuzz.ratio, score_cutoff=SUGGEST_CUTOFF
                )
                if best is not None:
                    fixed[term] = shown()[best[2]] if shown else best[0]
        return [fixed.get(term, term) for term in terms]

    def vocabulary(self) -> list[str]:
        """Words people search by: slug words, classes, codes and repository names.

        Built once per knowledge-base revision and kept in the cache folder: collecting it
        reads every record, which is most of a corrected search's time."""
        return self._cached(VOCABULARY, self._collect_vocabulary)

    def identifiers(self) -> list[str]:
        """The identifiers in the messages (backend_per_kind, torch.cuda, setIndex) as they
        are written, for correcting a misspelt one; cached like the vocabulary."""
        if self._identifiers is None:
            self._identifiers = self._cached(IDENTIFIERS, self._collect_identifiers)
        return self._identifiers

    def _lowered_identifiers(self) -> list[str]:
        return [identifier.lower() for identifier in self.identifiers()]

    def _cached(self, kind: str, collect: Callable[[], list[str]]) -> list[str]:
        def shared_or_collected() -> str:
            # what a matcher build stored for the revision (kb.shared_words): at 1M records
            # a misspelt search with no list in the cache folder took 0.25 s with the
            # vocabulary read from the database, 3.7 s collecting it; a misspelt identifier
            # 0.13 s, against 7.7 s to collect the identifiers (2026-12-06)
            from kb.shared_words import fetch

            text = fetch(self.run, kind, self.revision) if self.revision else None
            return "\n".join(collect()) if text is None else text

        if self.cache is None:
            return _packed(shared_or_collected())
        path = word_list_path(self.cache, kind, self.revision)
        if path in _LOADED:
            return _LOADED[path]
        if len(_LOADED) >= LOADED_FILES:
            _LOADED.clear()
        text = kept_text(self.cache, kind, self.revision, shared_or_collected)
        words = _LOADED[path] = _packed(text)
        return words

    def _collect_vocabulary(self) -> list[str]:
        vocabulary = Vocabulary()
        for column, whole in VOCABULARY_COLUMNS:
            # Each column's distinct values on their own: an index-only scan each (every one
            # has an index), where the distinct rows of all four read every record (150,000
            # records: 8.3 s with a cold page cache, the first misspelt search's wait).
            rows = self.run(f"SELECT DISTINCT {column} FROM records")
            vocabulary.add((value for (value,) in rows), whole)
        return vocabulary.listed()

    def _collect_identifiers(self) -> list[str]:
        from kb.sql import chunks

        found: set[str] = set()
        for rows in chunks(self.run("SELECT error_message FROM records"), IDENTIFIER_BATCH):
            add_identifiers(found, (message for (message,) in rows))
        return sorted(found)


# Values a Vocabulary remembers, so that a repeat (a repository, a class: a build beside an
# import sees each record's) adds nothing; past this many, the rest are read each time.
SEEN_VALUES: Final = 100_000


class Vocabulary:
    """The vocabulary's words, added a column's values at a time (VOCABULARY_COLUMNS says
    which columns, and whether a value is a word whole too), then `listed` as the word list
    keeps them."""

    def __init__(self) -> None:
        self.words: set[str] = set()
        self._seen: tuple[set[str], set[str]] = (set(), set())  # parts only, whole too

    def add(self, values: Iterable[str | None], whole: bool) -> None:
        """Values of one column (VOCABULARY_COLUMNS' `whole`), all their words found in one
        pass over them joined (no word spans a line end): at a million records the 589,732
        distinct slugs in 0.5 s, where a pass a value took 1.5 s."""
        seen = self._seen[whole]
        fresh = [value for value in dict.fromkeys(values) if value and value not in seen]
        if not fresh:
            return
        seen.update(fresh[: max(SEEN_VALUES - len(seen), 0)])
        self.words.update(map(str.lower, WORD_RE.findall("\n".join(fresh))))
        if whole:
            self.words.update(map(str.lower, fresh))

    def listed(self) -> list[str]:
        return sorted(word for word in self.words if len(word) >= 3 and not word.isdigit())


class WordLists:
    """Both word lists, collected from records a batch at a time as a matcher build reads
    them (kb.matcher.background's child, kb.knowledge's build after an import)."""

    def __init__(self) -> None:
        self.identifiers: set[str] = set()
        self.vocabulary = Vocabulary()

    def add(self, batch: Sequence[Sequence[Any]], at: Mapping[str, int]) -> None:
        """A batch of rows; `at` says where each column of VOCABULARY_COLUMNS and
        `error_message` is in a row."""
        for column, whole in VOCABULARY_COLUMNS:
            place = at[column]
            self.vocabulary.add((row[place] for row in batch), whole)
        place = at["error_message"]
        add_identifiers(self.identifiers, (row[place] for row in batch))

    def texts(self) -> dict[str, str]:
        """Each list by kind, one word a line, as kept in the cache folder."""
        return {
            IDENTIFIERS: "\n".join(sorted(self.identifiers)),
            VOCABULARY: "\n".join(self.vocabulary.listed()),
        }


def add_identifiers(found: set[str], messages: Iterable[str | None]) -> None:
    """Add to `found` the identifiers of `messages` that a misspelt one is corrected against:
    their distinct texts read in one pass, joined (no identifier spans a line end), and only
    the names not in `found` yet checked. The build beside an import, a batch at a time: at
    150,000 records 0.39 s against 0.56 a message at a time (2026-12-06)."""
    names = set(IDENTIFIER_RE.findall("\n".join(m for m in dict.fromkeys(messages) if m)))
    hint = IDENTIFIER_HINT_RE.search
    found.update(n for n in names - found if len(n) >= MIN_IDENTIFIER_CHARS and hint(n))


def word_list_path(cache: Path, kind: str, revision: str) -> Path:
    """Where the `kind` word list ("vocabulary", "identifiers") of a revision is kept."""
    return cache / f"{kind}-{revision}.txt"


def kept_text(cache: Path, kind: str, revision: str, collect: Callable[[], str]) -> str:
    """The `kind` list of `revision`, one word a line, as read from the cache folder, else
    `collect`ed (the same text) and kept there (a folder that cannot take it only costs
    speed)."""
    path = word_list_path(cache, kind, revision)
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass  # not kept yet for this revision
    text = collect()
    keep_text(cache, kind, revision, text)
    return text


def keep_text(cache: Path, kind: str, revision: str, text: str) -> None:
    """Keep `text` in the cache folder as the `kind` list of `revision` (a folder that cannot
    take it only costs speed)."""
    path = word_list_path(cache, kind, revision)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(text, encoding="utf-8")
        install_word_list(temporary, cache, kind, revision)
    except OSError:
        pass


def install_word_list(written: Path, cache: Path, kind: str, revision: str) -> None:
    """Rename a word list written in `cache` (one word a line) into place as the `kind` list
    of `revision`; other revisions' lists of that kind go (only the newest is ever read).
    OSError when the folder cannot take it."""
    for old in cache.glob(f"{kind}-*.txt"):
        old.unlink(missing_ok=True)
    os.replace(written, word_list_path(cache, kind, revision))


def _packed(text: str) -> list[str]:
    """The words of a word list, one a line, made in one go so that they lie side by side in
    memory: rapidfuzz scans 389,446 of them (1M records) in 25 ms a word so, and in 84 ms when
    they are the strings collected from the records, scattered among everything else read."""
    return text.splitlines()


def is_identifier(term: str) -> bool:
    """snake_case, dotted.name or camelCase: corrected against the messages' identifiers."""
    return (
        len(term) >= MIN_IDENTIFIER_CHARS
        and IDENTIFIER_RE.fullmatch(term) is not None
        and IDENTIFIER_HINT_RE.search(term) is not None
    )
