"""Finding every known error in a log. The modules follow the data:

  cache       the cache file: its format, opening it for a revision, reading its rows
  build       writing the cache: patterns prepared, the prefilter compiled (once per revision)
  keydb       the keys cut into shards, each compiled in a worker process (memory given back)
  prefilter   every pattern's keys found in one Hyperscan pass over a block of the log
  anchors     a short text's keys found by its words instead (no databases loaded)
  scan        one match call: the loop over blocks and the state it keeps
  verify      candidate patterns run in RE2 on the lines around their keys, captures read
  tracebacks  stack frames grouped into tracebacks; quoted source lines told from errors
  evidence    the evidence rules and the scoring, every number in ScoringConfig
  rank        the best record for each place in the log, repeats folded into one Match
  fuzzy       near misses: shortlists and alignment (imported only when one is tried)
  nearmiss    a line no pattern explains as a query, its traceback's records, scored
  unexplained the error-looking lines no record explains (imported only when there is one)
  index       MatcherIndex: a loaded cache, and match()
  split       a big log file matched in two parts at once, the second in a forked child
  heap        the C heap of such a one-shot match on transparent huge pages

The build is imported only by what builds (its names here load it when first used), so a
cold `kb match` never pays for kb.patterns or the Hyperscan compiler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kb.matcher.cache import CACHE_FILE, FORMAT_VERSION, cache_is_current
from kb.matcher.index import MatcherIndex, load_index
from kb.matcher.rank import Match, MatchReport
from kb.matcher.scoring import DEFAULT_SCORING, ScoringConfig

if TYPE_CHECKING:
    from kb.matcher.build import PatternSource, build_index, sources_from_records, write_index

__all__ = [
    "CACHE_FILE",
    "DEFAULT_MIN_SCORE",
    "DEFAULT_SCORING",
    "FORMAT_VERSION",
    "Match",
    "MatchReport",
    "MatcherIndex",
    "PatternSource",
    "ScoringConfig",
    "build_index",
    "cache_is_current",
    "load_index",
    "sources_from_records",
    "write_index",
]

DEFAULT_MIN_SCORE = DEFAULT_SCORING.min_score
_BUILD_NAMES = frozenset({"PatternSource", "build_index", "sources_from_records", "write_index"})


def __getattr__(name: str) -> Any:
    if name in _BUILD_NAMES:
        from kb.matcher import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
