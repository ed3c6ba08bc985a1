"""RE2, compiled quietly.

RE2's C++ logger writes every pattern it cannot compile to stderr, raw: a dataset's
messagePattern, escape sequences included, would reach the terminal. kb reports a pattern it
cannot run itself (as a warning at import), so every compile goes through here with the
logger off.
"""

from __future__ import annotations

from functools import cache
from typing import Any


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
