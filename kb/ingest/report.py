"""What an import did: counts, the records it rejected and why, the files it could not read
and the ones it passed over on purpose."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rejection:
    """A record that was not stored, and why: printed as FILE:LINE: id ID: FIELD: reason."""

    file: str
    line: int
    id: str | None
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: id {self.id or '-'}: {self.field}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "id": self.id,
            "field": self.field,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class SourceFailure:
    """A repository's file that could not be read; the rest of the import went on."""

    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "reason": self.reason}


@dataclass(frozen=True)
class UpToDate:
    """A manifest whose dataset version was imported already: nothing was read from it."""

    source: str
    dataset_version: str
    fetched_at: str

    def __str__(self) -> str:
        return (
            f"{self.source}: dataset {self.dataset_version} is imported already "
            f"(fetched {self.fetched_at[:16].replace('T', ' ')} UTC); nothing to do"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dataset_version": self.dataset_version,
            "fetched_at": self.fetched_at,
        }


@dataclass
class ImportReport:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0
    # Compact index rows whose full record this same import stored: read, and not counted.
    covered: int = 0
    repeated: int = 0  # ids read more than once in this import: the later copy kept
    repositories: int = 0  # rows of repos.json stored as repository metadata
    errors: list[Rejection] = field(default_factory=list)
    failed: list[SourceFailure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # the site's own files, one line a kind
    up_to_date: list[UpToDate] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the inputs, after folders were walked
    read: int = 0  # files read, the repositories' files of a published dataset among them
    dataset_version: str | None = None
    import_id: int | None = None

    @property
    def stored(self) -> int:
        return self.inserted + self.updated + self.unchanged

    @property
    def complete(self) -> bool:
        """Every record read was stored and every file could be read."""
        return not self.rejected and not self.failed

    def as_dict(self) -> dict[str, Any]:
        return {
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
            "repeated": self.repeated,
            "errors": [error.as_dict() for error in self.errors],
            "failed": [failure.as_dict() for failure in self.failed],
            "repositories": self.repositories,
            "skipped": list(self.skipped),
            "up_to_date": [item.as_dict() for item in self.up_to_date],
        }
