"""A regex only a backtracking engine can run, relaxed into a superset RE2 can: the matcher runs
the superset to find candidates, and the original (guarded) to confirm them.
"""

from __future__ import annotations

import re


def relax(regex: str) -> str | None:
    """A superset of a backtracking-only regex that RE2 can run: lookarounds dropped,
    backreferences turned into `.+?`, possessive/atomic forms made plain, huge counts opened."""
    out: list[str] = []
    i = 0
    n = len(regex)
    in_class = False
    while i < n:
        ch = regex[i]
        if ch == "\\" and i + 1 < n:
            nxt = regex[i + 1]
            if not in_class and nxt.isdigit() and nxt != "0":
                out.append("(?:.+?)")
                i += 2
                while i < n and regex[i].isdigit():
                    i += 1
                continue
            out.append(regex[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            if regex.startswith("[^]", i) or regex.startswith("[]", i):
                out.append(regex[i + 1])
                i += 1
            i += 1
            continue
        if regex.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            i = _skip_group(regex, i)
            continue
        if regex.startswith("(?P=", i):
            end = regex.find(")", i)
            out.append("(?:.+?)")
            i = end + 1 if end > 0 else n
            continue
        if regex.startswith("(?>", i):
            out.append("(?:")
            i += 3
            continue
        if ch in "*+?}" and i + 1 < n and regex[i + 1] == "+":
            out.append(ch)
            i += 2
            continue
        out.append(ch)
        i += 1
    relaxed = re.sub(r"\{(\d{4,})(?:,\d*)?\}", "+", "".join(out))
    try:
        from kb.regex import compile_re2

        compile_re2(relaxed)
    except Exception:
        return None
    return relaxed


def _skip_group(regex: str, i: int) -> int:
    depth = 0
    in_class = False
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i
