"""The one exception family kb raises, and the exit codes the CLI maps it to.

Library code raises these; only kb/cli/ turns them into messages and exit codes.
"""

from __future__ import annotations

from typing import NamedTuple

EXIT_OK = 0
EXIT_NOTHING_FOUND = 1  # match/search found nothing; import rejected some records
EXIT_USAGE = 2  # usage or unreadable input
EXIT_DATABASE = 3  # the database is missing, locked past the timeout or at the wrong schema
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


class KbError(Exception):
    """Base of every error kb reports to a person."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(KbError):
    """An input file or stream cannot be read at all (missing, not JSON, bad checksum)."""

    exit_code = EXIT_USAGE


class OutputError(KbError):
    """A file kb was asked to write cannot be written (a missing folder, a full disk)."""

    exit_code = EXIT_USAGE


class Interrupted(KbError):
    """Ctrl-C: the message says what was stored before it came."""

    exit_code = EXIT_INTERRUPTED


class DatabaseError(KbError):
    """The database cannot be used: cannot be opened, locked, or at the wrong schema."""

    exit_code = EXIT_DATABASE


class SchemaOutOfDate(DatabaseError):
    """The database was made by an older kb and must be upgraded first."""


class Candidate(NamedTuple):
    """A record a look-up could mean, with what tells it apart from the others."""

    id: str
    repo: str
    slug: str
    detail: str  # where it is raised and its message, one line


class NotFound(KbError):
    """A look-up found nothing; `suggestions` are records it may have meant."""

    exit_code = EXIT_NOTHING_FOUND

    def __init__(
        self, message: str, hint: str | None = None, suggestions: list[Candidate] | None = None
    ) -> None:
        super().__init__(message, hint)
        self.suggestions = suggestions or []


class Ambiguous(KbError):
    """A slug names several records; the candidates travel with the error."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, candidates: list[Candidate], hint: str) -> None:
        super().__init__(message, hint=hint)
        self.candidates = candidates
