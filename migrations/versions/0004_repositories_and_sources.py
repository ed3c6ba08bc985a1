"""Repository metadata from `repos.json`, and the published datasets imported by manifest.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

`repositories` keeps what the dataset says of each repository (description, language, stars,
errorCount, analyzedSha); `dataset_sources` remembers each manifest's dataset version and when
it was fetched, so a second `kb import URL` of an unchanged dataset stops early.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repositories",
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("language", sa.String(length=100), nullable=True),
        sa.Column("stars", sa.Integer(), nullable=True),
        sa.Column("source_files", sa.Integer(), nullable=True),
        sa.Column("default_branch", sa.String(length=200), nullable=True),
        sa.Column("analyzed_sha", sa.String(length=200), nullable=True),
        sa.Column("analyzed_at", sa.String(length=40), nullable=True),
        sa.Column("error_count", sa.Integer(), nullable=True),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("dataset_version", sa.String(length=40), nullable=True),
        sa.Column("import_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["import_id"],
            ["import_runs.id"],
            name=op.f("fk_repositories_import_id_import_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("repo", name=op.f("pk_repositories")),
    )
    op.create_index(op.f("ix_repositories_import_id"), "repositories", ["import_id"], unique=False)
    op.create_table(
        "dataset_sources",
        sa.Column("location", sa.String(length=2000), nullable=False),
        sa.Column("dataset_version", sa.String(length=40), nullable=True),
        sa.Column("manifest_sha256", sa.String(length=64), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("import_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["import_id"],
            ["import_runs.id"],
            name=op.f("fk_dataset_sources_import_id_import_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("location", name=op.f("pk_dataset_sources")),
    )
    op.create_index(
        op.f("ix_dataset_sources_import_id"), "dataset_sources", ["import_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_dataset_sources_import_id"), table_name="dataset_sources")
    op.drop_table("dataset_sources")
    op.drop_index(op.f("ix_repositories_import_id"), table_name="repositories")
    op.drop_table("repositories")
