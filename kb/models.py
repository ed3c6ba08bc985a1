"""The tables: the records, what each import did, and tables derived from records.

SQLAlchemy Core tables, not ORM classes: kb reads and writes them with Core statements only,
and `sqlalchemy.orm` cost every command that opens a database 60-90 ms to import. Alembic
owns every schema change (migrations/); `create_all` of this metadata and `alembic upgrade
head` must agree, and a test proves it on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    event,
)
from sqlalchemy.types import TypeEngine

# Stable constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
METADATA: Final = MetaData(naming_convention=NAMING_CONVENTION)


class JsonValue(TypeDecorator[Any]):
    """JSON on SQLite (text), JSONB on PostgreSQL: stored parsed, so the full-text column reads
    the tags and solutions without re-parsing, and the rows are smaller. JSONB is looked up on
    PostgreSQL only: SQLAlchemy's PostgreSQL dialect, asyncio with it, cost every command 25 ms
    to import (`JSON().with_variant(JSONB(), ...)` needs it when this module loads)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return self.impl_instance  # JSON, as TypeDecorator's own default


def _import_id() -> Column[int]:
    """The import run that last wrote the row (set to NULL if that run is deleted)."""
    return Column(
        "import_id",
        Integer,
        ForeignKey("import_runs.id", ondelete="SET NULL"),
        index=True,
        nullable=True,
    )


# One error record: every dataset field as a column, unknown fields in `extra`.
RECORDS: Final = Table(
    "records",
    METADATA,
    # An integer key that never changes (SQLite's VACUUM may renumber an implicit rowid), so
    # the full-text index can refer to rows by it; `id` is the dataset's key.
    Column("key", Integer, primary_key=True, autoincrement=True),
    Column("id", String(16), unique=True, nullable=False),
    Column("repo", String(200), index=True, nullable=False),
    Column("slug", String(200), index=True, nullable=False),
    Column("error_code", String(200), index=True),
    Column("error_message", Text, nullable=False),
    Column("message_pattern", Text, nullable=False),
    Column("error_type", String(20), nullable=False),
    Column("error_class", String(200), index=True),
    Column("http_status", Integer),
    Column("severity", String(20), nullable=False),
    # Nullable because stub records from a compact index row do not have them yet.
    Column("file_path", Text),
    Column("line_number", Integer),
    Column("source_code", Text),
    Column("source_code_start", Integer),
    Column("source_code_end", Integer),
    Column("github_url", Text),
    Column("documentation", Text),
    Column("trigger_scenarios", Text),
    Column("common_situations", Text),
    Column("solutions", JsonValue, nullable=False),
    Column("example_fix", Text),
    Column("handling_strategy", String(20)),
    Column("validation_code", Text),
    Column("type_guard", Text),
    Column("try_catch_pattern", Text),
    Column("prevention_tips", JsonValue, nullable=False),
    Column("tags", JsonValue, nullable=False),
    Column("background_tag", String(200)),
    Column("analyzed_sha", String(200)),
    Column("analyzed_at", String(40)),
    Column("schema_version", Integer, nullable=False),
    Column("extra", JsonValue, nullable=False),  # unknown fields, given back on export
    Column("stub", Boolean, default=False, nullable=False),  # compact index row only
    Column("dataset_version", String(40)),
    Column("content_hash", String(64), nullable=False),
    _import_id(),
)

# Derived from records.tags: one row a tag, so tag filters are plain indexed SQL. Keyed by the
# record's integer key, without a rowid: an import appends its tag rows in key order, where a
# text id as key scattered millions of them over the whole index (0003).
RECORD_TAGS: Final = Table(
    "record_tags",
    METADATA,
    Column(
        "record_key",
        Integer,
        ForeignKey("records.key", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("tag", String(200), primary_key=True),
    Index("ix_record_tags_tag", "tag"),
    sqlite_with_rowid=False,
)

# What one `kb import` did.
IMPORT_RUNS: Final = Table(
    "import_runs",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("sources", JsonValue, nullable=False),
    Column("dataset_version", String(40)),
    Column("inserted", Integer, default=0, nullable=False),
    Column("updated", Integer, default=0, nullable=False),
    Column("unchanged", Integer, default=0, nullable=False),
    Column("rejected", Integer, default=0, nullable=False),
)

# A repository the dataset was made from, as `repos.json` describes it (DATASET.md).
REPOSITORIES: Final = Table(
    "repositories",
    METADATA,
    Column("repo", String(200), primary_key=True),
    Column("description", Text),
    Column("language", String(100)),
    Column("stars", Integer),
    Column("source_files", Integer),
    Column("default_branch", String(200)),
    Column("analyzed_sha", String(200)),
    Column("analyzed_at", String(40)),
    Column("error_count", Integer),
    Column("extra", JsonValue, nullable=False),  # unknown fields, kept
    Column("dataset_version", String(40)),
    _import_id(),
)

# A published dataset kb imported by its manifest: which version, and when it was fetched and
# last checked, so importing the same URL again can stop at an unchanged version.
DATASET_SOURCES: Final = Table(
    "dataset_sources",
    METADATA,
    Column("location", String(2000), primary_key=True),  # URL or absolute path
    Column("dataset_version", String(40)),
    Column("manifest_sha256", String(64), nullable=False),
    Column("fetched_at", DateTime(timezone=True), nullable=False),
    Column("checked_at", DateTime(timezone=True), nullable=False),
    _import_id(),
)

# The matcher's cache file for one revision, zlib-compressed in parts, so a machine that has
# no copy fetches it (a second or so) instead of rebuilding it (a minute at 150k records).
# Written by whoever built it first (the importer, as a rule); only the newest is kept.
MATCHER_INDEX: Final = Table(
    "matcher_index",
    METADATA,
    Column("revision", String(64), primary_key=True),
    Column("format", Integer, primary_key=True),  # kb.matcher.FORMAT_VERSION
    Column("part", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

# kb search's word lists for one revision (kb.spelling: identifiers, vocabulary), zlib
# compressed, so a machine whose cache folder has none reads them (tens of ms at a million
# records) instead of collecting them from every record (3.7 s for the vocabulary). Written
# beside the matcher index (kb.shared_words); only the newest revision's are kept.
WORD_LISTS: Final = Table(
    "word_lists",
    METADATA,
    Column("revision", String(64), primary_key=True),
    Column("kind", String(40), primary_key=True),  # kb.spelling.IDENTIFIERS, VOCABULARY
    Column("data", LargeBinary, nullable=False),
)

# Key/value facts about the knowledge base, such as its content revision.
META: Final = Table(
    "kb_meta",
    METADATA,
    Column("key", String(100), primary_key=True),
    Column("value", Text, nullable=False),
)


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


event.listen(RECORDS, "after_create", _create_fts)
