"""Request bodies read under a size limit, request values checked, and the error routes raise.

The limit is enforced while the body streams in: a Content-Length over it is refused before
reading, and a body without one (chunked) or lying about it is cut off at the limit.
"""

from __future__ import annotations

import math
from typing import IO, Final

from starlette.requests import Request

TOP_RANGE: Final = (1, 20)  # the same bounds as `kb match --top`
LIMIT_RANGE: Final = (1, 1000)  # the same bounds as `kb search --limit`


class HttpError(Exception):
    """An error with its HTTP status, a stable code for programs and a message for people."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def as_dict(self) -> dict[str, object]:
        return {"error": {"status": self.status, "code": self.code, "message": self.message}}


def too_large(limit: int) -> HttpError:
    return HttpError(413, "too_large", f"the request body is over the {limit:,}-byte limit")


def _declared_length(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    if declared is None:
        return
    if not declared.isdigit():
        raise HttpError(400, "bad_request", "Content-Length is not a number")
    if int(declared) > limit:
        raise too_large(limit)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or HttpError 413 as soon as it passes `limit` bytes."""
    _declared_length(request, limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def copy_body(request: Request, limit: int, out: IO[bytes]) -> int:
    """Write the body to `out` (an import can be hundreds of MB: not held in memory)."""
    _declared_length(request, limit)
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        out.write(chunk)
    return size


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def int_value(name: str, value: object, default: int, bounds: tuple[int, int]) -> int:
    """An integer request value within bounds, else 422 naming it."""
    if value is None or value == "":
        return default
    low, high = bounds
    number: int | None = None
    if isinstance(value, bool):  # JSON true is not 1
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = int(value) if value.is_integer() else None  # JSON Schema: 19.0 is an integer
    elif isinstance(value, str):
        number = int(value) if value.strip().lstrip("-").isdigit() else None
    if number is None or not low <= number <= high:
        raise HttpError(422, "invalid", f"{name} must be a whole number from {low} to {high}")
    return number


def score_value(name: str, value: object, default: float) -> float:
    """A score threshold in [0, 1], else 422 naming it."""
    if value is None or value == "":
        return default
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or not 0 <= number <= 1:
        raise HttpError(422, "invalid", f"{name} must be a number from 0 to 1")
    return number


def choice_value(name: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    if not value:
        return None
    if value not in choices:
        raise HttpError(422, "invalid", f"{name} must be one of {', '.join(choices)}")
    return value
