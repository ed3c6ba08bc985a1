"""Tag rows keyed by the record's integer key, in a table without rowid.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Keyed by the 16-hex text id, an import inserted millions of tag rows in random order into
a primary-key index as large as the records' own; keyed by records.key they are appended.
The rows are copied through a scratch table, so the new table is created under its own name
and constraint names, exactly as `create_all` makes it (no rename rewrites its DDL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SCRATCH = "_record_tags_copy"


def _replace_tag_table(key: sa.Column[object], parent: str, copy_sql: str, **kw: object) -> None:
    """Copy the tag rows aside (converted by copy_sql), then recreate record_tags around key."""
    op.create_table(SCRATCH, sa.Column("k", key.type), sa.Column("tag", sa.String(200)))
    op.execute(f"INSERT INTO {SCRATCH} (k, tag) {copy_sql}")
    op.drop_index("ix_record_tags_tag", table_name="record_tags")
    op.drop_table("record_tags")
    op.create_table(
        "record_tags",
        key,
        sa.Column("tag", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            [key.name],
            [parent],
            name=op.f(f"fk_record_tags_{key.name}_records"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(key.name, "tag", name=op.f("pk_record_tags")),
        **kw,
    )
    op.execute(
        f"INSERT INTO record_tags ({key.name}, tag) SELECT k, tag FROM {SCRATCH} ORDER BY k, tag"
    )
    op.drop_table(SCRATCH)
    op.create_index("ix_record_tags_tag", "record_tags", ["tag"], unique=False)


def upgrade() -> None:
    _replace_tag_table(
        sa.Column("record_key", sa.Integer(), nullable=False),
        "records.key",
        "SELECT r.key, t.tag FROM record_tags t JOIN records r ON r.id = t.record_id",
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    _replace_tag_table(
        sa.Column("record_id", sa.String(length=16), nullable=False),
        "records.id",
        "SELECT r.id, t.tag FROM record_tags t JOIN records r ON r.key = t.record_key",
    )
