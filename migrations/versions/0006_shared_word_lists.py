"""kb search's word lists shared through the database.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06

`word_lists` holds the word lists "did you mean" corrects against (kb.spelling: the messages'
identifiers and the vocabulary of slugs, classes, codes and repositories) for the newest
revision, zlib compressed, so a machine whose cache folder has none reads them (tens of
milliseconds) instead of collecting them from every record (seconds at a million records).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "word_lists",
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("revision", "kind", name=op.f("pk_word_lists")),
    )


def downgrade() -> None:
    op.drop_table("word_lists")
