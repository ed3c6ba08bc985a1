"""kb.matcher.evidence: each evidence rule on plain strings, and the scorer with other settings,
without building an index (the way each of thefuck's rules is tested on its own)."""

from __future__ import annotations

import itertools

import pytest

from kb.logline import Frame
from kb.matcher.cache import Pattern, Record
from kb.matcher.evidence import (
    Alignment,
    Raiser,
    Says,
    class_on_line,
    code_base,
    distance_weight,
    innermost_evidence,
    is_builtin_message,
    is_foreign,
    is_thin,
    is_user_code,
    level_factor,
    module_of,
    noisy_or,
    package_on_line,
    pattern_base,
    stack_evidence,
)
from kb.matcher.scorer import Scorer
from kb.matcher.scoring import DEFAULT_SCORING
from kb.matcher.tracebacks import SeenFrame, Traceback
from kb.matcher.verify import Hit

SITE = "/srv/app/.venv/lib/python3.11/site-packages"
CFG = DEFAULT_SCORING

# ---- the class on the line -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "error_class", "says"),
    [
        ("ValueError: bad value", "ValueError", Says.AGREES),
        ("sqlalchemy.exc.NoSuchModuleError: Can't load plugin", "NoSuchModuleError", Says.AGREES),
        ("TypeError: bad value", "ValueError", Says.DISAGREES),
        ("bad value", "ValueError", Says.NOTHING),
        ("ValueError: bad value", None, Says.NOTHING),
        # a class the exception regex does not take for one, printed right before the message
        ("InvalidVersion: Invalid version: '2.1.0-final-rc'", "InvalidVersion", Says.AGREES),
    ],
)
def test_class_on_the_line_agrees_disagrees_or_says_nothing(
    subject: str, error_class: str | None, says: Says
) -> None:
    assert class_on_line(subject, error_class) is says


@pytest.mark.parametrize(
    ("subject", "module"),
    [
        ("sqlalchemy.exc.NoResultFound: No row was found", "sqlalchemy"),
        ("job 7 failed: tornado.httputil.HTTPInputError: Malformed HTTP header", "tornado"),
        ("ValueError: plain class", None),
        ("builtins.ValueError: printed with its module", None),
    ],
)
def test_a_dotted_class_names_its_top_level_package(subject: str, module: str | None) -> None:
    assert module_of(None, subject) == module


def test_the_package_of_a_dotted_class_agrees_only_with_the_records_and_conflicts_if_known() -> (
    None
):
    known = {"tornado", "sqlalchemy"}
    assert package_on_line("tornado", "tornado", known) is Says.AGREES
    assert package_on_line("sqlalchemy", "tornado", known) is Says.DISAGREES
    assert package_on_line("myapp", "tornado", known) is Says.NOTHING  # not a library kb knows
    assert package_on_line(None, "tornado", known) is Says.NOTHING


# ---- frames and paths ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "weight"),
    [(0, CFG.frame_exact), (2, CFG.frame_near), (29, CFG.frame_file), (900, CFG.frame_far)],
)
def test_a_frame_in_the_records_file_weighs_by_its_distance_from_the_raise_site(
    delta: int, weight: float
) -> None:
    assert distance_weight(delta, CFG) == weight


@pytest.mark.parametrize(
    ("frame_path", "label"),
    [
        (f"{SITE}/pandas/core/frame.py", "frame:pandas/core/frame.py:7893"),
        ("pandas/core/frame.py", "frame:pandas/core/frame.py:7893"),
        (f"{SITE}/pandas/core/series.py", "package:pandas"),  # the package, not the file
        (f"{SITE}/xpandas/core/frame.py", None),  # a longer name is another file and package
        (f"{SITE}/pandas_gbq/gbq.py", None),
    ],
)
def test_a_stack_points_at_the_records_file_else_its_package(
    frame_path: str, label: str | None
) -> None:
    found = stack_evidence("pandas/core/frame.py", 7891, [(frame_path, 7893)], CFG)
    assert (found.label if found else None) == label


def test_the_best_frame_in_the_records_file_names_the_evidence() -> None:
    stack = [
        (f"{SITE}/vllm/engine.py", 10),
        (f"{SITE}/vllm/config.py", 210),
        ("vllm/config.py", 170),
    ]
    found = stack_evidence("vllm/config.py", 169, stack, CFG)
    assert found == (Raiser.RECORD_FILE, CFG.frame_near, "frame:vllm/config.py:170", 2)
    assert found.supports


def test_a_record_without_a_line_is_pointed_at_by_a_frame_anywhere_in_its_file() -> None:
    """Upstream writes lineNumber null when its analysis gave no line: the file still counts,
    as much as a frame some way from a known line, never as much as the raise site."""
    assert distance_weight(None, CFG) == CFG.frame_file
    found = stack_evidence(
        "pandas/core/frame.py", None, [(f"{SITE}/pandas/core/frame.py", 12)], CFG
    )
    assert found == (Raiser.RECORD_FILE, CFG.frame_file, "frame:pandas/core/frame.py:12", 0)


def test_a_record_without_a_file_is_never_pointed_at() -> None:
    assert stack_evidence("", 1, [(f"{SITE}/pandas/core/frame.py", 1)], CFG) is None


@pytest.mark.parametrize(
    ("path", "known_file", "user"),
    [
        ("/home/me/project/app.py", False, True),
        ("C:\\Users\\me\\project\\app.py", False, True),
        ("/home/me/project/app.py", True, False),  # a record has this file: a library's
        (f"{SITE}/requests/api.py", False, False),
        ("/usr/lib/python3.11/json/decoder.py", False, False),
        ("/app/node_modules/axios/lib/core/settle.js", False, False),
        ("<frozen runpy>", False, False),
        ("<stdin>", False, False),
    ],
)
def test_user_code_is_neither_installed_nor_known(path: str, known_file: bool, user: bool) -> None:
    assert is_user_code(path, known_file) is user


@pytest.mark.parametrize(
    ("path", "package", "foreign"),
    [
        (f"{SITE}/numpy/core/fromnumeric.py", "pandas", True),
        (f"{SITE}/pandas/core/frame.py", "pandas", False),
        ("/home/me/project/app.py", "pandas", False),  # not a library at all
        (f"{SITE}/numpy/core/fromnumeric.py", "", False),  # the record names no package
    ],
)
def test_another_installed_librarys_frame_is_foreign(
    path: str, package: str, foreign: bool
) -> None:
    assert is_foreign(path, package) is foreign


def test_the_innermost_frame_alone_says_user_code_another_library_or_nothing() -> None:
    assert innermost_evidence("/home/me/app.py", "vllm", False).raiser is Raiser.USER_CODE
    foreign = innermost_evidence(f"{SITE}/numpy/core/fromnumeric.py", "vllm", False)
    assert (foreign.raiser, foreign.weight, foreign.supports) == (
        Raiser.FOREIGN_LIBRARY,
        0.0,
        False,
    )
    known = innermost_evidence("/home/me/app.py", "vllm", True)  # a record has that file
    assert known.raiser is Raiser.NOT_SHOWN


def frame(path: str, line: int) -> Frame:
    return Frame(path, line, "f", "python")


# ---- the words alone ---------------------------------------------------------------------------


def test_noisy_or_combines_independent_signals() -> None:
    assert noisy_or(0.5, []) == 0.5
    assert noisy_or(0.5, [0.5]) == 0.75
    assert noisy_or(0.0, [0.5, 0.5]) == 0.75
    assert noisy_or(0.5, [1.0]) == 1.0


def test_a_pattern_is_worth_more_the_more_literal_text_it_has() -> None:
    assert pattern_base(True, 100, CFG) == CFG.generic_pattern_base
    assert pattern_base(False, 0, CFG) == CFG.pattern_base
    assert pattern_base(False, 20, CFG) < pattern_base(False, 40, CFG)
    assert pattern_base(False, 40, CFG) == pattern_base(False, 400, CFG)


def test_a_code_with_digits_or_underscores_is_worth_more_than_a_short_word() -> None:
    assert code_base("ERR_BAD_RESPONSE", CFG) == CFG.distinctive_code_base
    assert code_base("E0425", CFG) == CFG.distinctive_code_base
    assert code_base("EPERM", CFG) == CFG.code_base


def test_chatter_levels_discount_and_error_levels_do_not() -> None:
    assert level_factor("INFO", CFG) < level_factor("WARN", CFG) < 1.0
    assert level_factor("ERROR", CFG) == level_factor(None, CFG) == 1.0


@pytest.mark.parametrize(
    ("literal_chars", "captures", "thin"),
    [
        (15, ["a version that satisfies the requirement torch==9.9 (from", "none)"], True),
        (15, ["community", "general"], False),  # the words say most of the line
        (45, ["x" * 500], False),  # a long template is never thin
    ],
)
def test_a_short_template_is_thin_when_its_values_fill_the_line(
    literal_chars: int, captures: list[str], thin: bool
) -> None:
    assert is_thin(literal_chars, captures, CFG) is thin


@pytest.mark.parametrize(
    "line",
    [
        "ZeroDivisionError: division by zero",
        "IndexError: list index out of range",
        "AttributeError: 'NoneType' object has no attribute 'group'",
        "ModuleNotFoundError: No module named 'torch'",
        "TypeError: f() got an unexpected keyword argument 'x'",
        "TypeError: Object of type datetime is not JSON serializable",
        "2026-03-14T08:00:00Z ERROR KeyError: [Errno 2] No such file or directory: 'x'",
    ],
)
def test_pythons_own_messages_are_builtin(line: str) -> None:
    assert is_builtin_message(line)


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: Unknown KV cache group kind 'x' in backend_per_kind.",
        "KeyError: \"None of ['customer_id'] are in the columns\"",
    ],
)
def test_library_messages_are_not_builtin(line: str) -> None:
    assert not is_builtin_message(line)


# ---- the scorer, with other settings -------------------------------------------------------


class NoLookups:
    """A knowledge base that knows no files and no packages."""

    def known_file(self, frame: Frame) -> str | None:
        return None

    def file_functions(self, frame: Frame) -> frozenset[str]:
        return frozenset()

    def known_packages(self) -> frozenset[str]:
        return frozenset({"vllm", "numpy"})


def pattern(*, generic: bool = False, literal_chars: int = 60) -> Pattern:
    return Pattern(
        idx=0,
        regex="x",
        engine="re2",
        generic=generic,
        literal_chars=literal_chars,
        key_line=0,
        newlines=0,
        names=(),
        records=(0,),
        relaxed=None,
        nested=False,
        others=(),
    )


RECORD = Record(
    idx=0,
    id="46a1fcb95e0d367e",
    error_class="ValueError",
    file_path="vllm/config/attention.py",
    line_number=169,
    error_message="Unknown KV cache group kind '{kind}'",
)


def hit(subject: str, *, generic: bool = False, level: str | None = None) -> Hit:
    return Hit(
        first=4,
        last=4,
        line=5,
        end_line=5,
        method="pattern",
        pattern=pattern(generic=generic),
        records=(0,),
        subject=subject,
        whole=True,
        level=level,
    )


def traceback(path: str, line: int) -> Traceback:
    return Traceback.of([SeenFrame(3, 4, frame(path, line))], 4, "python")


def test_evidence_raises_the_score_and_is_named() -> None:
    scorer = Scorer(NoLookups())
    words = scorer.score_hit(hit("Unknown KV cache group kind 'x'"), RECORD, None, None)
    assert words is not None and words.evidence == ["pattern", "whole-message"]
    subject = "ValueError: Unknown KV cache group kind 'x'"
    tb = traceback(f"{SITE}/vllm/config/attention.py", 169)
    full = scorer.score_hit(hit(subject), RECORD, tb, ("ValueError", "x"))
    assert full is not None
    assert full.evidence == [
        "pattern",
        "whole-message",
        "error-class",
        "frame:vllm/config/attention.py:169",
    ]
    assert words.score < full.score <= CFG.max_score


def test_another_class_on_the_line_or_another_librarys_frame_lowers_the_score() -> None:
    scorer = Scorer(NoLookups())
    right = scorer.score_hit(hit("ValueError: Unknown kind 'x'"), RECORD, None, None)
    wrong = scorer.score_hit(hit("TypeError: Unknown kind 'x'"), RECORD, None, None)
    assert right is not None and wrong is not None and wrong.score < right.score
    numpy = traceback(f"{SITE}/numpy/core/fromnumeric.py", 57)
    foreign = scorer.score_hit(hit("ValueError: Unknown kind 'x'"), RECORD, numpy, None)
    assert foreign is not None and foreign.score < right.score
    # another library raised it: its own raise site's reworded message is worth looking up
    assert foreign.doubted and not right.doubted


def test_the_users_own_raise_and_pythons_message_without_a_frame_are_not_claimed() -> None:
    scorer = Scorer(NoLookups())
    users = traceback("/home/me/project/app.py", 3)
    assert scorer.score_hit(hit("ValueError: Unknown kind 'x'"), RECORD, users, None) is None
    assert scorer.score_hit(hit("ZeroDivisionError: division by zero"), RECORD, None, None) is None


def test_a_generic_pattern_alone_stays_under_the_cap_a_test_can_move() -> None:
    generic = hit("ValueError: something 'x' not found", generic=True)
    capped = Scorer(NoLookups()).score_hit(generic, RECORD, None, None)
    assert capped is not None and capped.score == CFG.generic_cap < CFG.min_score
    looser = CFG._replace(generic_cap=0.6)
    lifted = Scorer(NoLookups(), looser).score_hit(generic, RECORD, None, None)
    assert lifted is not None and CFG.generic_cap < lifted.score <= 0.6


def test_info_chatter_scores_lower_than_the_same_words_on_an_error_line() -> None:
    scorer = Scorer(NoLookups())
    on_info = scorer.score_hit(hit("Unknown kind 'x'", level="INFO"), RECORD, None, None)
    on_error = scorer.score_hit(hit("Unknown kind 'x'", level="ERROR"), RECORD, None, None)
    assert on_info is not None and on_error is not None
    assert on_info.score == pytest.approx(on_error.score * CFG.level_factors["INFO"])


def test_a_near_miss_needs_more_similarity_without_a_class_on_the_line() -> None:
    scorer = Scorer(NoLookups())
    near = hit("Unknown KV cache group type 'x'")
    # between the two cut-offs, a short message (the cut-offs come down for long ones)
    similarity = Alignment(0.82, 0.82, 0.82, 0.82, query_chars=28, template_chars=30)
    with_class = scorer.score_near_miss(RECORD, near, similarity, "ValueError", None, False)
    assert with_class is not None and with_class.method == "fuzzy"
    assert "error-class" in with_class.evidence
    assert scorer.score_near_miss(RECORD, near, similarity, "", None, False) is None
    stricter = CFG._replace(fuzzy_cutoff=90.0)
    assert (
        Scorer(NoLookups(), stricter).score_near_miss(
            RECORD, near, similarity, "ValueError", None, False
        )
        is None
    )


# ---- frames decide and veto -------------------------------------------------------------------


def test_a_frame_in_the_records_function_counts_however_far_its_line_moved() -> None:
    """Another release of the library moved the raise 500 lines; its function stayed."""
    stack = [(f"{SITE}/sqlalchemy/sql/compiler.py", 5830)]
    far = stack_evidence("sqlalchemy/sql/compiler.py", 6404, stack, CFG)
    assert far is not None and far.weight == CFG.frame_far
    found = stack_evidence(
        "sqlalchemy/sql/compiler.py", 6404, stack, CFG, function="visit_insert",
        functions=["visit_insert"],
    )  # fmt: skip
    assert found == (
        Raiser.RECORD_FILE, CFG.frame_function, "frame:sqlalchemy/sql/compiler.py:5830", 0
    )  # fmt: skip


def test_a_function_moved_to_another_module_of_the_package_is_followed() -> None:
    stack = [(f"{SITE}/sqlalchemy/engine/util.py", 155), (f"{SITE}/sqlalchemy/engine/base.py", 9)]
    found = stack_evidence(
        "sqlalchemy/engine/_util_cy.py", 94, stack, CFG, function="_distill_params_20",
        functions=["_distill_params_20", "_execute_20"],
    )  # fmt: skip
    assert found == (
        Raiser.RECORD_FUNCTION, CFG.moved_function, "function:sqlalchemy:_distill_params_20", 0
    )  # fmt: skip


class FileLookups(NoLookups):
    """A knowledge base whose files raise in these functions."""

    def __init__(self, functions: frozenset[str]) -> None:
        self.functions = functions

    def file_functions(self, frame: Frame) -> frozenset[str]:
        return self.functions


def library_traceback(*frames: tuple[str, int, str]) -> Traceback:
    """A traceback of (path, line, function) frames, innermost first."""
    seen = [
        SeenFrame(10 - i, 11 - i, Frame(path, line, function, "python"))
        for i, (path, line, function) in enumerate(frames)
    ]
    return Traceback.of(seen, 11, "python")


def record_at(path: str, line: int, function: str | None) -> Record:
    return RECORD._replace(file_path=path, line_number=line, function=function)


def test_the_librarys_frames_down_to_the_raise_doubt_a_record_of_another_module() -> None:
    """The same words raised by another module (or from compiled code called there): the
    library's own frames show where it was raised, and it was not the record's file."""
    tb = library_traceback((f"{SITE}/vllm/engine/arg_utils.py", 412, "create_config"))
    scorer = Scorer(NoLookups())
    other = scorer.traceback_evidence(record_at("vllm/config/attention.py", 169, "check"), tb)
    assert other.raiser is Raiser.OTHER_MODULE and not other.supports
    here = scorer.traceback_evidence(
        record_at("vllm/engine/arg_utils.py", 412, "create_config"), tb
    )
    assert here.raiser is Raiser.RECORD_FILE and here.supports
    # raised in the user's code calling the library: nothing to doubt the record by
    user = library_traceback(("/home/me/app/run.py", 3, "main"))
    assert scorer.traceback_evidence(record_at("vllm/config.py", 1, "check"), user).raiser in (
        Raiser.USER_CODE,
        Raiser.NOT_SHOWN,
    )


def test_another_function_of_the_records_file_raising_doubts_the_record() -> None:
    """A frame in the record's file, but in another function and far from its line: the
    function that raised is not the record's."""
    tb = library_traceback((f"{SITE}/accelerate/utils/bnb.py", 153, "load_and_quantize_model"))
    scorer = Scorer(NoLookups())
    neighbour = record_at("accelerate/utils/bnb.py", 209, "get_quantized_model_device_map")
    assert scorer.traceback_evidence(neighbour, tb).raiser is Raiser.OTHER_MODULE
    own = record_at("accelerate/utils/bnb.py", 158, "load_and_quantize_model")
    assert scorer.traceback_evidence(own, tb).weight == CFG.frame_function


def test_a_moved_function_does_not_count_where_the_frames_file_still_raises_in_it() -> None:
    """`check_format` still raises in the frame's own file: its record is the frame's, not
    the same-named function's of another module."""
    tb = library_traceback((f"{SITE}/scipy/sparse/_compressed.py", 193, "check_format"))
    record = record_at("scipy/sparse/_bsr.py", 201, "check_format")
    moved = Scorer(NoLookups()).traceback_evidence(record, tb)
    assert moved.raiser is Raiser.RECORD_FUNCTION
    stays = Scorer(FileLookups(frozenset({"check_format"}))).traceback_evidence(record, tb)
    assert stays.raiser is Raiser.OTHER_MODULE


# ---- calibration ------------------------------------------------------------------------------


def test_calibration_keeps_the_order_of_scores_and_can_be_undone() -> None:
    from kb.matcher.evidence import calibrated, uncalibrated

    knots = CFG.calibration
    raws = [i / 100 for i in range(101)]
    mapped = [calibrated(raw, knots) for raw in raws]
    assert all(a < b for a, b in itertools.pairwise(mapped))  # strictly increasing
    assert all(
        abs(uncalibrated(m, knots) - raw) < 1e-9 for m, raw in zip(mapped, raws, strict=True)
    )
    # the default threshold sits in the step the development sets show at raw 0.5
    assert 0.49 < uncalibrated(CFG.min_score, knots) < 0.5


# ---- near-miss alignment ---------------------------------------------------------------------


def test_a_sentence_added_around_agreeing_words_is_seen_in_whole_words() -> None:
    from kb.matcher.fuzzy import align, gap_template

    template = gap_template(
        "{field_name} dim[{i}] expected {dim}, got {actual_shape[i]}. "
        "Expected shape: {expected_shape}, but got {actual_shape}"
    )
    # letter by letter, "tensor_parallel_size" takes "e", "p", "e" from "expected"
    aligned = align(template, "tensor_parallel_size dim expected , got")
    assert aligned.query_covered > 0.9


def test_a_cut_message_agreeing_with_all_it_shows_ranks_above_a_short_template() -> None:
    from kb.matcher.evidence import Alignment

    half_shown = Alignment(
        plain=0.98, gap=0.98, query_covered=0.98, template_covered=0.0, shown=0.47
    )
    short_whole = Alignment(
        plain=0.69, gap=0.69, query_covered=0.47, template_covered=0.0, shown=1.0
    )
    assert half_shown.rank > short_whole.rank
    assert half_shown.rank < Alignment(0.98, 0.98, 0.98, 0.0, shown=1.0).rank
