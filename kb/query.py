"""The user's query as search syntax: its terms and "quoted phrases", FTS5 and tsquery
expressions for each way of matching them (all, all but one, any), and the ORDER BY terms that
rank exact phrases and agreeing modules first. Nothing the user typed becomes query syntax.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from kb.spelling import WORD_RE

TS_CONFIG: Final = "kb_english"  # kb/models.py PG_TEXT_CONFIG
MAX_QUERY_CHARS: Final = 2000  # longer input is cut: nobody types more, a paste may be huge
MAX_TERMS: Final = 40  # FTS cost grows with terms; the first 40 words carry the meaning
# A query (or a "quoted phrase") found whole in a record's message ranks that record first;
# below this many characters a "phrase" is a word, which bm25 ranks well on its own.
MIN_PHRASE_CHARS: Final = 4
TERM_RE: Final = re.compile(r'"([^"]*)"?|(\S+)')


def terms_of(query: str) -> list[str]:
    """The user's words and "quoted phrases", each as plain text, punctuation-only dropped."""
    out = []
    for match in TERM_RE.finditer(query[:MAX_QUERY_CHARS]):
        term = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
        if term and WORD_RE.search(term):
            out.append(term)
    return out[:MAX_TERMS]


def fts_phrase(term: str) -> str:
    """One term as an FTS5 string: the tokenizer splits it the way it split the records, so
    `backend_per_kind`, `torch.cuda` and `a/b.py` become phrases of adjacent words."""
    return '"' + term.replace('"', '""') + '"'


def websearch_phrase(term: str) -> str:
    """One term as a quoted phrase of its words for websearch_to_tsquery: the words only (as
    the tsvector column was made of them), so nothing the user typed is query syntax."""
    return '"' + " ".join(WORD_RE.findall(term)) + '"'


def tsquery(terms: Sequence[str], mode: str) -> tuple[str, list[str]]:
    """PostgreSQL's query for the terms (SQL with `?` parameters): every phrase ("all"), any
    one ("any"), or all but one ("most", as fts_expression does for FTS5)."""
    phrases = [websearch_phrase(term) for term in terms]
    one = f"websearch_to_tsquery('{TS_CONFIG}', ?)"
    if mode == "all" or len(phrases) == 1:
        return one, [" ".join(phrases)]
    if mode == "any":
        return one, [" or ".join(phrases)]
    groups = [[p for j, p in enumerate(phrases) if j != skip] for skip in range(len(phrases))]
    sql = " || ".join(f"({one})" for _ in groups)
    return f"({sql})", [" ".join(group) for group in groups]


def fts_expression(terms: Sequence[str], mode: str) -> str:
    """FTS5 syntax for the terms, each a quoted phrase. "most" is all-but-one (any one
    word may be the stray), which ranks far fewer rows than a plain OR of common words."""
    phrases = [fts_phrase(term) for term in terms]
    if mode == "all" or len(phrases) == 1:
        return " AND ".join(phrases)
    if mode == "any":
        return " OR ".join(phrases)
    groups = [
        "(" + " AND ".join(p for j, p in enumerate(phrases) if j != skip) + ")"
        for skip in range(len(phrases))
    ]
    return " OR ".join(groups)


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def order_by(order: Sequence[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    """ORDER BY terms that go before the rank, with their parameters."""
    return "".join(f"{sql}, " for sql, _ in order), [p for _, params in order for p in params]


def phrase_first(query: str) -> list[tuple[str, list[Any]]]:
    """Records whose message holds the query whole (or every "quoted phrase" of it), whatever
    the case, rank first: a quoted message should find its record above related ones."""
    quoted = [m.group(1) for m in TERM_RE.finditer(query) if m.group(1) is not None]
    phrases = [" ".join(p.lower().split()) for p in (quoted or [query])]
    phrases = [p for p in phrases if len(p) >= MIN_PHRASE_CHARS]
    if not phrases:
        return []
    holds = " AND ".join("lower(r.error_message) LIKE ? ESCAPE '\\'" for _ in phrases)
    return [(f"(CASE WHEN {holds} THEN 0 ELSE 1 END)", [f"%{like_escape(p)}%" for p in phrases])]


def module_first(module: str) -> tuple[str, list[Any]]:
    """Records raised in the module's file (django/core/exceptions.py) first, then those of its
    package's repository (django/django, or a file under django/), then the rest."""
    path = like_escape(module.lower().replace(".", "/"))
    package = like_escape(module.split(".")[0].lower())
    sql = (
        "(CASE WHEN lower(r.file_path) LIKE ? ESCAPE '\\' THEN 0 "
        "WHEN lower(r.file_path) LIKE ? ESCAPE '\\' OR lower(r.repo) LIKE ? ESCAPE '\\' "
        "OR lower(r.repo) LIKE ? ESCAPE '\\' THEN 1 ELSE 2 END)"
    )
    return sql, [f"{path}%", f"{package}/%", f"{package}/%", f"%/{package}"]
