"""A traceback's raise site: the records raised exactly (or nearly) at its innermost frame, for a
message no pattern matched (or one the traceback may read otherwise)."""

from __future__ import annotations

from kb.matcher.cache import CacheReader
from kb.matcher.scorer import Candidate, Scorer
from kb.matcher.tracebacks import Traceback
from kb.matcher.verify import Hit
from kb.matcher.window import Window


def raise_site_candidates(
    reader: CacheReader,
    scorer: Scorer,
    window: Window,
    tb: Traceback,
    exception: tuple[str, str] | None,
) -> list[Candidate]:
    """Records raised exactly (or nearly) at the traceback's innermost frame."""
    innermost = tb.frames[0]
    frame = innermost.frame
    row = tb.exception_row if tb.exception_row is not None else innermost.row
    line_index = row - window.first_row
    in_window = 0 <= line_index < len(window.line_nos)
    line_no = window.line_nos[line_index] if in_window else innermost.line
    # A raise site is a line: a record without a lineNumber is never found by its file alone.
    found = reader.records_near(frame, scorer.config.frame_near_lines)
    if found is None:
        return []
    path, nearby = found
    reader.load_records(rec_idx for _, rec_idx in nearby)
    subject = exception[1] if exception else ""
    out: list[Candidate] = []
    for _line_number, rec_idx in nearby:
        hit = Hit(
            first=row,
            last=row,
            line=line_no,
            end_line=line_no,
            method="frame",
            pattern=None,
            records=(rec_idx,),
            subject=subject,
        )
        out.append(scorer.score_raise_site(reader.record(rec_idx), hit, frame, path, exception))
    return out
