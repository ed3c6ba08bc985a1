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
    MetaData,
    String,
    Table,
    Text,
    event,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Stable constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


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
    solutions: Mapped[list[str]] = mapped_column(JSON)
    example_fix: Mapped[str | None] = mapped_column(Text)
    handling_strategy: Mapped[str | None] = mapped_column(String(20))
    validation_code: Mapped[str | None] = mapped_column(Text)
    type_guard: Mapped[str | None] = mapped_column(Text)
    try_catch_pattern: Mapped[str | None] = mapped_column(Text)
    prevention_tips: Mapped[list[str]] = mapped_column(JSON)
    tags: Mapped[list[str]] = mapped_column(JSON)
    background_tag: Mapped[str | None] = mapped_column(String(200))
    analyzed_sha: Mapped[str | None] = mapped_column(String(200))
    analyzed_at: Mapped[str | None] = mapped_column(String(40))
    schema_version: Mapped[int] = mapped_column(Integer)

    extra: Mapped[dict[str, Any]] = mapped_column(JSON)  # unknown fields, given back on export
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
    sources: Mapped[list[str]] = mapped_column(JSON)
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
    extra: Mapped[dict[str, Any]] = mapped_column(JSON)  # unknown fields, kept
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


def _create_fts(target: Table, connection: Connection, **_kw: Any) -> None:
    if connection.dialect.name == "sqlite":
        for statement in SQLITE_FTS_DDL:
            connection.exec_driver_sql(statement)


def _table(model: type[Base]) -> Table:
    return cast(Table, model.__table__)


# The tables as Core objects, for bulk statements that bypass the ORM.
RECORDS: Final = _table(RecordRow)
RECORD_TAGS: Final = _table(RecordTag)
IMPORT_RUNS: Final = _table(ImportRun)
META: Final = _table(Meta)
REPOSITORIES: Final = _table(RepositoryRow)
DATASET_SOURCES: Final = _table(DatasetSource)

event.listen(RECORDS, "after_create", _create_fts)
