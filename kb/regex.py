"""A dataset's regexes, compiled quietly.

RE2's C++ logger writes every pattern it cannot compile to stderr, raw: a dataset's
messagePattern, escape sequences included, would reach the terminal. kb reports a pattern it
cannot run itself (as a warning at import), so every compile goes through here with the
logger off. Python's own regex parser warns about some set syntax (`[a-z--]`, `[[`) with a
warning line on stderr naming kb's source: its parses of a dataset's patterns go through
`quietly`.
"""

from __future__ import annotations

import threading
import warnings
from functools import cache
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

# warnings.catch_warnings swaps the process's filters and puts them back: two threads doing it
# at once (a server matching in several) can put back the other's, leaving warnings off for
# good. kb's own uses take turns.
_QUIETLY: Final = threading.Lock()


@cache
def quiet_options() -> Any:
    """RE2 options with the error logger off."""
    import re2

    options = re2.Options()
    options.log_errors = False
    return options


def compile_re2(pattern: str) -> Any:
    """`re2.compile(pattern)` without RE2 logging an error to stderr (it raises as before)."""
    import re2

    return re2.compile(pattern, quiet_options())


def quietly(call: Callable[[], T]) -> T:
    """call(), with Python's warnings off while it runs (the parse of a dataset's regex)."""
    with _QUIETLY, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()
