"""Finding every known error in a log. The modules follow the data:

  cachefile   the cache file's name and format, its shards' blobs (before the rest loads)
  cache       the cache file: opening it for a revision, reading its rows
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
  prescan     its prefilter scan, by a helper process forked as `kb match` starts

Every name here loads its module when first used: the build only by what builds, so a cold `kb
match` never pays for kb.patterns or the Hyperscan compiler, and the rest only when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from kb.matcher.build import PatternSource, build_index, sources_from_records, write_index
    from kb.matcher.cache import cache_is_current
    from kb.matcher.cachefile import CACHE_FILE, FORMAT_VERSION
    from kb.matcher.index import MatcherIndex, load_index
    from kb.matcher.rank import Match, MatchReport
    from kb.matcher.scoring import DEFAULT_SCORING, ScoringConfig

    DEFAULT_MIN_SCORE: float

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

# Each name's module, imported when the name is first used: `kb.matcher.prescan`'s helper is
# forked before the matcher is loaded, and importing one light module of the package (its
# cachefile) must not load the rest.
_HOMES: Final = {
    "CACHE_FILE": "cachefile",
    "FORMAT_VERSION": "cachefile",
    "cache_is_current": "cache",
    "MatcherIndex": "index",
    "load_index": "index",
    "Match": "rank",
    "MatchReport": "rank",
    "DEFAULT_SCORING": "scoring",
    "ScoringConfig": "scoring",
    "PatternSource": "build",
    "build_index": "build",
    "sources_from_records": "build",
    "write_index": "build",
}


def __getattr__(name: str) -> Any:
    if name == "DEFAULT_MIN_SCORE":
        from kb.matcher.scoring import DEFAULT_SCORING

        return DEFAULT_SCORING.min_score
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"kb.matcher.{home}"), name)
