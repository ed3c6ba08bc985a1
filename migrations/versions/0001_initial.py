"""Records, their tags, import runs and the knowledge base's metadata.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "import_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("dataset_version", sa.String(length=40), nullable=True),
        sa.Column("inserted", sa.Integer(), nullable=False),
        sa.Column("updated", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_import_runs")),
    )
    op.create_table(
        "kb_meta",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_kb_meta")),
    )
    op.create_table(
        "records",
        sa.Column("key", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("slug", sa.String(length=200), nullable=False),
        sa.Column("error_code", sa.String(length=200), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=False),
        sa.Column("message_pattern", sa.Text(), nullable=False),
        sa.Column("error_type", sa.String(length=20), nullable=False),
        sa.Column("error_class", sa.String(length=200), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("severity", sa.String(length=20), nullable=False),
        sa.Column("file_path", sa.Text(), nullable=True),
        sa.Column("line_number", sa.Integer(), nullable=True),
        sa.Column("source_code", sa.Text(), nullable=True),
        sa.Column("source_code_start", sa.Integer(), nullable=True),
        sa.Column("source_code_end", sa.Integer(), nullable=True),
        sa.Column("github_url", sa.Text(), nullable=True),
        sa.Column("documentation", sa.Text(), nullable=True),
        sa.Column("trigger_scenarios", sa.Text(), nullable=True),
        sa.Column("common_situations", sa.Text(), nullable=True),
        sa.Column("solutions", sa.JSON(), nullable=False),
        sa.Column("example_fix", sa.Text(), nullable=True),
        sa.Column("handling_strategy", sa.String(length=20), nullable=True),
        sa.Column("validation_code", sa.Text(), nullable=True),
        sa.Column("type_guard", sa.Text(), nullable=True),
        sa.Column("try_catch_pattern", sa.Text(), nullable=True),
        sa.Column("prevention_tips", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("background_tag", sa.String(length=200), nullable=True),
        sa.Column("analyzed_sha", sa.String(length=200), nullable=True),
        sa.Column("analyzed_at", sa.String(length=40), nullable=True),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("stub", sa.Boolean(), nullable=False),
        sa.Column("dataset_version", sa.String(length=40), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("import_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["import_id"],
            ["import_runs.id"],
            name=op.f("fk_records_import_id_import_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_records")),
        sa.UniqueConstraint("id", name=op.f("uq_records_id")),
    )
    for column in ("repo", "slug", "error_code", "error_class", "import_id"):
        op.create_index(op.f(f"ix_records_{column}"), "records", [column], unique=False)
    op.create_table(
        "record_tags",
        sa.Column("record_id", sa.String(length=16), nullable=False),
        sa.Column("tag", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["record_id"],
            ["records.id"],
            name=op.f("fk_record_tags_record_id_records"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("record_id", "tag", name=op.f("pk_record_tags")),
    )
    op.create_index("ix_record_tags_tag", "record_tags", ["tag"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_record_tags_tag", table_name="record_tags")
    op.drop_table("record_tags")
    for column in ("repo", "slug", "error_code", "error_class", "import_id"):
        op.drop_index(op.f(f"ix_records_{column}"), table_name="records")
    op.drop_table("records")
    op.drop_table("kb_meta")
    op.drop_table("import_runs")
