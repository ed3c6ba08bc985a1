"""PostgreSQL's own types and full-text index, and the matcher index shared through the database.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

On PostgreSQL the JSON columns become JSONB, and the records get a weighted, generated
`tsvector` column with a GIN index (kb/models.py PG_FTS_DDL explains the weights and the text
configuration; the statements are copied here so this revision keeps meaning what it meant).
On both databases, `matcher_index` holds the matcher's cache file of the newest revision, so
a machine without a copy fetches it instead of rebuilding it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON_COLUMNS = {
    "records": ("solutions", "prevention_tips", "tags", "extra"),
    "import_runs": ("sources",),
    "repositories": ("extra",),
}


def _words(columns: str) -> str:
    """The columns' text with the characters that join tokens made spaces (kb/models.py)."""
    for char in "./-@:":
        columns = f"replace({columns}, '{char}', ' ')"
    return columns


def _weighted(columns: str, weight: str) -> str:
    return f"setweight(to_tsvector('kb_english'::regconfig, {_words(columns)}), '{weight}')"


PG_FTS = (
    "CREATE TEXT SEARCH DICTIONARY kb_english_stem (TEMPLATE = snowball, LANGUAGE = english)",
    "CREATE TEXT SEARCH CONFIGURATION kb_english (COPY = english)",
    "ALTER TEXT SEARCH CONFIGURATION kb_english ALTER MAPPING FOR asciiword, asciihword, "
    "hword_asciipart, word, hword, hword_part WITH kb_english_stem",
    "ALTER TABLE records ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    + " || ".join(
        (
            _weighted("coalesce(error_message, '') || ' ' || coalesce(error_code, '')", "A"),
            _weighted("coalesce(slug, '') || ' ' || coalesce(error_class, '')", "B"),
            _weighted(
                "coalesce(repo, '') || ' ' || coalesce(file_path, '') || ' ' || "
                "coalesce(tags::text, '')",
                "C",
            ),
            _weighted(
                "coalesce(documentation, '') || ' ' || coalesce(trigger_scenarios, '') || ' ' "
                "|| coalesce(common_situations, '') || ' ' || coalesce(solutions::text, '')",
                "D",
            ),
        )
    )
    + ") STORED",
    "CREATE INDEX ix_records_search_vector ON records USING gin (search_vector)",
)
PG_FTS_DOWN = (
    "DROP INDEX IF EXISTS ix_records_search_vector",
    "ALTER TABLE records DROP COLUMN IF EXISTS search_vector",
    "DROP TEXT SEARCH CONFIGURATION IF EXISTS kb_english",
    "DROP TEXT SEARCH DICTIONARY IF EXISTS kb_english_stem",
)


def upgrade() -> None:
    op.create_table(
        "matcher_index",
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("format", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("revision", "format", "part", name=op.f("pk_matcher_index")),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in JSON_COLUMNS.items():
        for column in columns:
            op.execute(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE jsonb USING {column}::jsonb"
            )
    for statement in PG_FTS:
        op.execute(statement)


def downgrade() -> None:
    op.drop_table("matcher_index")
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in PG_FTS_DOWN:
        op.execute(statement)
    for table, columns in JSON_COLUMNS.items():
        for column in columns:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE json USING {column}::json")
