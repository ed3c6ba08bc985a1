"""benchmarks/targets.py: each target judged on a run's figures, and never on a figure the run
did not make; each says who set it."""

from __future__ import annotations

from typing import Any

from tests.benchmark_modules import load_benchmark

Sample = load_benchmark("harness").Sample
targets = load_benchmark("targets")
MILLION, TARGETS, judge, verdicts = (
    targets.MILLION,
    targets.TARGETS,
    targets.judge,
    targets.verdicts,
)

BIG_MB = 21.9


def _run(seconds: float, mb: float = 50.0) -> Sample:
    return Sample(seconds=[seconds], rss_mb=[mb])


def _size(count: int, **over: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "count": count,
        "passed": True,
        "sqlite_utils": _run(48.9),
        "kb_cli_import": _run(71.5, 239.0),
        "cold_paste": _run(0.377),
        "cold_big": _run(1.06, 108.0),
        "warm": {"search": [0.0052, 0.0301], "search_sealed": [0.0107, 0.0371]},
    }
    r.update(over)
    return r


def _by_text(results: list[dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
    return {v.target.text: (v.where, v.measured, v.verdict) for v in verdicts(results, BIG_MB)}


def test_each_target_is_judged_on_its_own_size_and_bound() -> None:
    found = _by_text([_size(150_000), _size(MILLION, cold_paste=_run(0.29))])
    ratio = next(t for t in TARGETS if t.text.startswith("`kb import` (with"))
    assert found[ratio.text] == ("150,000 records", "0.68", "not met")
    assert found["cold `kb match` of paste.log under 0.3 s"] == (
        "1,000,000 records",
        "0.290 s",
        "met",
    )
    assert found["cold `kb match` of paste.log under 0.5 s"][2] == "met"
    assert found["cold `kb match` of big.log at least 100 MB/s"] == (
        "150,000 records",
        "21 MB/s",
        "not met",
    )
    assert found["search, warm: median under 20 ms (sealed queries)"] == (
        "1,000,000 records",
        "10.7 ms",
        "met",
    )
    assert found["`kb import` peak RSS under 300 MB"][1:] == ("239 MB", "met")


def test_a_size_the_run_did_not_have_is_not_measured() -> None:
    found = _by_text([_size(69_652), _size(150_000)])
    assert found["cold `kb match` of paste.log under 0.3 s"] == (
        "1,000,000 records",
        "this run had no 1,000,000 records (run.py --with-1m)",
        "not measured",
    )
    # the targets of every size are judged on the sizes there were
    every = found["cold `kb match` of big.log: peak RSS under 400 MB"]
    assert every == ("69,652, 150,000 records", "69,652: 108 MB, 150,000: 108 MB", "met")


def test_a_measurement_that_did_not_finish_gives_no_verdict() -> None:
    timed_out = Sample(status="timed out after 600 s (killed)")
    found = _by_text([_size(150_000, kb_cli_import=timed_out)])
    ratio = next(t for t in TARGETS if t.text.startswith("`kb import` (with"))
    assert found[ratio.text] == ("150,000 records", "did not finish", "not measured")


def test_correctness_fails_when_one_size_failed() -> None:
    correctness = TARGETS[0]
    verdict = judge(correctness, [_size(69_652), _size(150_000, passed=False)], BIG_MB)
    assert verdict.measured == "69,652: passed, 150,000: FAILED"
    assert verdict.verdict == "not met"
    assert judge(correctness, [_size(69_652)], BIG_MB).verdict == "met"


def test_one_bad_size_fails_a_target_of_every_size() -> None:
    found = _by_text([_size(69_652), _size(150_000, cold_big=_run(1.0, 450.0))])
    assert found["cold `kb match` of big.log: peak RSS under 400 MB"][2] == "not met"


def test_search_is_judged_on_the_sealed_queries_not_the_development_ones() -> None:
    """The development queries are those kb's search was tuned on: fast there proves little."""
    slow_sealed = {"search": [0.005, 0.030], "search_sealed": [0.009, 0.1335]}
    found = _by_text([_size(MILLION, warm=slow_sealed)])
    assert found["search, warm: p95 under 100 ms (sealed queries)"] == (
        "1,000,000 records",
        "133.5 ms",
        "not met",
    )


def test_each_target_says_who_set_it_and_kbs_own_is_not_called_the_issues() -> None:
    """Issue 15 asks for the import's parity at 150,000 records; the same at 1M is kb's own."""
    origin = {t.text: t.origin for t in TARGETS}
    ratio = next(t for t in TARGETS if t.text.startswith("`kb import` (with"))
    assert origin[ratio.text] == targets.ISSUE_15
    assert origin["the same at 1M: speed ratio"] == targets.KB_ITSELF
    assert origin["cold `kb match` of big.log at least 100 MB/s"] == targets.ISSUE_15
    assert origin["cold `kb match` of paste.log under 0.5 s"] == targets.ISSUE_5
    assert set(origin.values()) == {targets.ISSUE_15, targets.ISSUE_5, targets.KB_ITSELF}


def _import_ratio_target(size: int = 150_000) -> Any:
    return next(t for t in TARGETS if t.size == size and t.text.endswith("speed ratio"))


def _rounds(*ratios: float) -> dict[str, Any]:
    """A size whose import medians give a ratio of 1.05, with these rounds in turns."""
    return _size(150_000, sqlite_utils=_run(14.7), kb_cli_import=_run(14.0), import_rounds=ratios)


def test_the_import_is_met_only_when_kb_was_as_fast_in_every_round() -> None:
    """Rounds in turns on a noisy machine: a median over 1 with a round under it is a tie."""
    target = _import_ratio_target()
    every = judge(target, [_rounds(1.01, 1.09, 1.01)], BIG_MB)
    assert (every.measured, every.verdict) == ("1.05 (rounds 1.01, 1.09, 1.01)", "met")
    both_sides = judge(target, [_rounds(0.97, 1.09, 1.01, 1.06, 0.99)], BIG_MB)
    assert both_sides.verdict == "tie"
    assert both_sides.measured == "1.05 (rounds 0.97, 1.09, 1.01, 1.06, 0.99)"
    # a median under 1 with one round over it is a tie too, not a miss by the median alone
    slower = _size(150_000, sqlite_utils=_run(13.0), kb_cli_import=_run(14.0))
    assert judge(target, [{**slower, "import_rounds": [0.9, 1.02, 0.93]}], BIG_MB).verdict == "tie"
    assert judge(target, [{**slower, "import_rounds": [0.9, 0.95, 0.93]}], BIG_MB).verdict == (
        "not met"
    )


def test_one_round_is_judged_on_its_figure_alone() -> None:
    """At 1M the import and its peer take one round each: the ratio is the round."""
    target = _import_ratio_target(MILLION)
    one = _size(MILLION, sqlite_utils=_run(105.0), kb_cli_import=_run(103.0))
    found = judge(target, [{**one, "import_rounds": [105.0 / 103.0]}], BIG_MB)
    assert (found.measured, found.verdict) == ("1.02", "met")
    # results written before the rounds were kept are judged on the medians
    assert judge(_import_ratio_target(), [_size(150_000)], BIG_MB).verdict == "not met"


def test_a_tie_and_a_miss_are_shown_in_bold_in_the_targets_table() -> None:
    shown = {
        v.verdict: v.shown()
        for results in ([_rounds(0.97, 1.09, 1.01)], [_size(150_000)], [_rounds(1.01, 1.02)])
        for v in verdicts(results, BIG_MB)
        if v.target is _import_ratio_target()
    }
    assert shown == {"tie": "**tie**", "not met": "**not met**", "met": "met"}
