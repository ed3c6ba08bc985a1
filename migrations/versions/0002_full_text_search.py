"""Full-text index over the records (FTS5 on SQLite), kept in step by the importer.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

The DDL is copied here rather than imported, so this revision keeps meaning what it meant
when it was written; kb/models.py holds the same statements for new databases.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = (
    "slug, error_message, error_code, error_class, repo, file_path, tags, "
    "documentation, trigger_scenarios, common_situations, solutions"
)
UPGRADE = (
    f"CREATE VIRTUAL TABLE records_fts USING fts5({COLUMNS}, content='records', "
    "content_rowid='key', tokenize='porter unicode61 remove_diacritics 2')",
    "INSERT INTO records_fts(records_fts) VALUES ('rebuild')",
)
DOWNGRADE = ("DROP TABLE IF EXISTS records_fts",)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return  # PostgreSQL gets its tsvector index in its own revision
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in DOWNGRADE:
        op.execute(statement)
