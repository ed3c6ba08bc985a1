"""kb: the error knowledge base. Paste a log, get every known error in it with its fix.

from kb import KnowledgeBase
kb = KnowledgeBase("kb.sqlite3")
kb.import_sources(["data/records.jsonl"])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["ImportReport", "KbError", "KnowledgeBase", "__version__"]

from kb.errors import KbError

if TYPE_CHECKING:
    from kb.ingest import ImportReport
    from kb.knowledge import KnowledgeBase


def __getattr__(name: str) -> Any:
    # Lazy, so `kb --help` does not pay for SQLAlchemy.
    if name == "KnowledgeBase":
        from kb.knowledge import KnowledgeBase

        return KnowledgeBase
    if name == "ImportReport":
        from kb.ingest import ImportReport

        return ImportReport
    raise AttributeError(name)
