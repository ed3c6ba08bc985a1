"""Alembic environment for kb: runs on the connection kb passes in, or on the configured URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from kb.models import METADATA, not_derived

config = context.config
target_metadata = METADATA


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        include_name=not_derived,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=not_derived,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # kb passes its own connection (one transaction with the rest of its work); the alembic
    # command line gets one from the configured URL.
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as conn:
        _run_on(conn)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
