"""SQLAlchemy 2 models: the records, what each import did, and tables derived from records.

Alembic owns every schema change (migrations/); `create_all` of this metadata and
`alembic upgrade head` must agree, and a test proves it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, cast

from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    event,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Stable constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# JSON on SQLite (text), JSONB on PostgreSQL: stored parsed, so the full-text column reads the
# tags and solutions without re-parsing, and the rows are smaller.
JSON_VALUE: Final = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class RecordRow(Base):
    """One error record: every dataset field as a column, unknown fields in `extra`."""

    __tablename__ = "records"

    # An integer key that never changes (SQLite's VACUUM may renumber an implicit rowid), so
    # the full-text index can refer to rows by it; `id` is the dataset's key.
    key: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(16), unique=True)
    repo: Mapped[str] = mapped_column(String(200), index=True)
    slug: Mapped[str] = mapped_column(String(200), index=True)
    error_code: Mapped[str | None] = mapped_column(String(200), index=True)
    error_message: Mapped[str] = mapped_column(Text)
    message_pattern: Mapped[str] = mapped_column(Text)
    error_type: Mapped[str] = mapped_column(String(20))
    error_class: Mapped[str | None] = mapped_column(String(200), index=True)
    http_status: Mapped[int | None] = mapped_column(Integer)
    severity: Mapped[str] = mapped_column(String(20))
    # Nullable because stub records from a compact index row do not have them yet.
    file_path: Mapped[str | None] = mapped_column(Text)
    line_number: Mapped[int | None] = mapped_column(Integer)
    source_code: Mapped[str | None] = mapped_column(Text)
    source_code_start: Mapped[int | None] = mapped_column(Integer)
    source_code_end: Mapped[int | None] = mapped_column(Integer)
    github_url: Mapped[str | None] = mapped_column(Text)
    documentation: Mapped[str | None] = mapped_column(Text)
    trigger_scenarios: Mapped[str | None] = mapped_column(Text)
    common_situations: Mapped[str | None] = mapped_column(Text)
    solutions: Mapped[list[str]] = mapped_column(JSON_VALUE)
    example_fix: Mapped[str | None] = mapped_column(Text)
    handling_strategy: Mapped[str | None] = mapped_column(String(20))
    validation_code: Mapped[str | None] = mapped_column(Text)
    type_guard: Mapped[str | None] = mapped_column(Text)
    try_catch_pattern: Mapped[str | None] = mapped_column(Text)
    prevention_tips: Mapped[list[str]] = mapped_column(JSON_VALUE)
    tags: Mapped[list[str]] = mapped_column(JSON_VALUE)
    background_tag: Mapped[str | None] = mapped_column(String(200))
    analyzed_sha: Mapped[str | None] = mapped_column(String(200))
    analyzed_at: Mapped[str | None] = mapped_column(String(40))
    schema_version: Mapped[int] = mapped_column(Integer)

    extra: Mapped[dict[str, Any]] = mapped_column(
        JSON_VALUE
    )  # unknown fields, given back on export
    stub: Mapped[bool] = mapped_column(Boolean, default=False)  # compact index row only
    dataset_version: Mapped[str | None] = mapped_column(String(40))
    content_hash: Mapped[str] = mapped_column(String(64))
    import_id: Mapped[int | None] = mapped_column(
        ForeignKey("import_runs.id", ondelete="SET NULL"), index=True
    )


class RecordTag(Base):
    """Derived from records.tags: one row a tag, so tag filters are plain indexed SQL.

    Keyed by the record's integer key, without a rowid: an import appends its tag rows in key
    order, where a text id as key scattered millions of them over the whole index (0003).
    """

    __tablename__ = "record_tags"

    record_key: Mapped[int] = mapped_column(
        ForeignKey("records.key", ondelete="CASCADE"), primary_key=True
    )
    tag: Mapped[str] = mapped_column(String(200), primary_key=True)

    __table_args__ = (Index("ix_record_tags_tag", "tag"), {"sqlite_with_rowid": False})


class ImportRun(Base):
    """What one `kb import` did."""

    __tablename__ = "import_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sources: Mapped[list[str]] = mapped_column(JSON_VALUE)
    dataset_version: Mapped[str | None] = mapped_column(String(40))
    inserted: Mapped[int] = mapped_column(Integer, default=0)
    updated: Mapped[int] = mapped_column(Integer, default=0)
    unchanged: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)


class RepositoryRow(Base):
    """A repository the dataset was made from, as `repos.json` describes it (DATASET.md)."""

    __tablename__ = "repositories"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    description: Mapped[str | None] = mapped_column(Text)
    language: Mapped[str | None] = mapped_column(String(100))
    stars: Mapped[int | None] = mapped_column(Integer)
    source_files: Mapped[int | None] = mapped_column(Integer)
    default_branch: Mapped[str | None] = mapped_column(String(200))
    analyzed_sha: Mapped[str | None] = mapped_column(String(200))
    analyzed_at: Mapped[str | None] = mapped_column(String(40))
    error_count: Mapped[int | None] = mapped_column(Integer)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON_VALUE)  # unknown fields, kept
    dataset_version: Mapped[str | None] = mapped_column(String(40))
    import_id: Mapped[int | None] = mapped_column(
        ForeignKey("import_runs.id", ondelete="SET NULL"), index=True
    )


class DatasetSource(Base):
    """A published dataset kb imported by its manifest: which version, and when it was fetched
    and last checked, so importing the same URL again can stop at an unchanged version."""

    __tablename__ = "dataset_sources"

    location: Mapped[str] = mapped_column(String(2000), primary_key=True)  # URL or absolute path
    dataset_version: Mapped[str | None] = mapped_column(String(40))
    manifest_sha256: Mapped[str] = mapped_column(String(64))
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    import_id: Mapped[int | None] = mapped_column(
        ForeignKey("import_runs.id", ondelete="SET NULL"), index=True
    )


class MatcherIndexPart(Base):
    """The matcher's cache file for one revision, zlib-compressed in parts, so a machine that
    has no copy fetches it (a second or so) instead of rebuilding it (a minute at 150k records).
    Written by whoever built it first (the importer, as a rule); only the newest is kept."""

    __tablename__ = "matcher_index"

    revision: Mapped[str] = mapped_column(String(64), primary_key=True)
    format: Mapped[int] = mapped_column(Integer, primary_key=True)  # kb.matcher.FORMAT_VERSION
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Meta(Base):
    """Key/value facts about the knowledge base, such as its content revision."""

    __tablename__ = "kb_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


# The full-text index (search.py): FTS5 over the records' words. The importer keeps it in
# step batch by batch (kb/ingest.py): triggers did the same work row by row, five times slower.
# Same statement as migrations/versions/0002; tests prove create_all and upgrade agree.
FTS_COLUMNS: Final = (
    "slug",
    "error_message",
    "error_code",
    "error_class",
    "repo",
    "file_path",
    "tags",
    "documentation",
    "trigger_scenarios",
    "common_situations",
    "solutions",
)
SQLITE_FTS_DDL: Final = (
    f"CREATE VIRTUAL TABLE records_fts USING fts5({', '.join(FTS_COLUMNS)}, content='records', "
    "content_rowid='key', tokenize='porter unicode61 remove_diacritics 2')",
)


# PostgreSQL: a stored, generated tsvector column with a GIN index. Four weights, in the order
# of the bm25 weights above: A message and code, B slug and class, C repository, path and tags,
# D the prose (kb/search_other.py TS_RANK_WEIGHTS gives their values). The characters that make
# PostgreSQL's parser keep `torch.cuda`, `a/b.py`, `a-b`, `user@host` or `http://x` as one
# token become spaces first, so they are words in a row, as FTS5's unicode61 tokenizer makes
# them (underscores it splits already). Nested replace(): regexp_replace over the records' text
# cost 11 s at 69,652 records, translate() 22 s, five replace() calls under 1 s.
# The dictionary is snowball's English stemmer without a stop-word list: FTS5 drops no word,
# so "not in index" must find the same records on both. Same statements as migrations/0005.
PG_TEXT_CONFIG: Final = "kb_english"
PG_SPLIT_CHARS: Final = "./-@:"
_PG_WEIGHTED: Final = (
    ("A", ("error_message", "error_code")),
    ("B", ("slug", "error_class")),
    ("C", ("repo", "file_path", "tags")),
    ("D", ("documentation", "trigger_scenarios", "common_situations", "solutions")),
)
_JSON_TEXT_COLUMNS: Final = frozenset({"tags", "solutions"})


def _pg_words(weight: str, columns: tuple[str, ...]) -> str:
    words = " || ' ' || ".join(
        f"coalesce({c}::text, '')" if c in _JSON_TEXT_COLUMNS else f"coalesce({c}, '')"
        for c in columns
    )
    for char in PG_SPLIT_CHARS:
        words = f"replace({words}, '{char}', ' ')"
    return f"setweight(to_tsvector('{PG_TEXT_CONFIG}'::regconfig, {words}), '{weight}')"


PG_SEARCH_VECTOR: Final = " || ".join(_pg_words(w, cols) for w, cols in _PG_WEIGHTED)
PG_FTS_DDL: Final = (
    "CREATE TEXT SEARCH DICTIONARY kb_english_stem (TEMPLATE = snowball, LANGUAGE = english)",
    f"CREATE TEXT SEARCH CONFIGURATION {PG_TEXT_CONFIG} (COPY = english)",
    f"ALTER TEXT SEARCH CONFIGURATION {PG_TEXT_CONFIG} ALTER MAPPING FOR asciiword, "
    "asciihword, hword_asciipart, word, hword, hword_part WITH kb_english_stem",
    f"ALTER TABLE records ADD COLUMN search_vector tsvector "
    f"GENERATED ALWAYS AS ({PG_SEARCH_VECTOR}) STORED",
    "CREATE INDEX ix_records_search_vector ON records USING gin (search_vector)",
)
# Not in the models (only PostgreSQL has them): schema comparisons leave them out.
PG_ONLY_COLUMNS: Final = frozenset({"search_vector"})
PG_ONLY_INDEXES: Final = frozenset({"ix_records_search_vector"})


def _create_fts(target: Table, connection: Connection, **_kw: Any) -> None:
    if connection.dialect.name == "sqlite":
        for statement in SQLITE_FTS_DDL:
            connection.exec_driver_sql(statement)
    elif connection.dialect.name == "postgresql":
        for statement in PG_FTS_DDL:
            connection.exec_driver_sql(statement)


def not_derived(name: str | None, type_: str, parent_names: object) -> bool:
    """For schema comparisons (Alembic's include_name): leave out the full-text objects that
    the migrations make outside the models (FTS5 tables, the tsvector column and its index)."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith("records_fts")
    if type_ == "column":
        return name not in PG_ONLY_COLUMNS
    if type_ == "index":
        return name not in PG_ONLY_INDEXES
    return True


def _table(model: type[Base]) -> Table:
    return cast(Table, model.__table__)


# The tables as Core objects, for bulk statements that bypass the ORM.
RECORDS: Final = _table(RecordRow)
RECORD_TAGS: Final = _table(RecordTag)
IMPORT_RUNS: Final = _table(ImportRun)
META: Final = _table(Meta)
REPOSITORIES: Final = _table(RepositoryRow)
DATASET_SOURCES: Final = _table(DatasetSource)
MATCHER_INDEX: Final = _table(MatcherIndexPart)

event.listen(RECORDS, "after_create", _create_fts)
