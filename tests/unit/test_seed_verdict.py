"""The atlas's verdict rule (lab/docgen/seed_verdict.py) on synthetic cells: each category and its boundaries."""

from __future__ import annotations

from lab.docgen.seed_verdict import (
    CAUSES,
    RULE,
    Found,
    Outcome,
    best_arm,
    dominant_cause,
    judge_arm,
    judge_seed,
)

F = ("results/reference/x",)


def cells(*agreements: str, censored: bool = False, folders: tuple[str, ...] = F) -> list[Outcome]:
    return [Outcome(a, censored, folders) for a in agreements]


def test_two_thirds_of_comparable_points_reproduce_and_just_below_is_partly() -> None:
    assert judge_arm(cells("yes", "yes", "no (lab parity)")).verdict == "reproduced"  # exactly 2/3
    assert judge_arm(cells("yes", "yes", "-", "no (lab parity)")).verdict == "partly"  # 1/2
    assert judge_arm(cells("yes", "yes", "yes", "yes", "yes", "-", "-", "-")).verdict == "partly"  # 5/8 < 2/3
    assert judge_arm(cells("yes")).verdict == "reproduced"


def test_one_agreeing_point_is_partly_and_none_is_not() -> None:
    assert judge_arm(cells("yes", "no (opposite)", "no (opposite)", "-")).verdict == "partly"
    found = judge_arm(cells("no (opposite)", "-", "no (lab parity)"))
    assert (found.verdict, found.agree, found.comparable) == ("not", 0, 3)


def test_points_without_a_stated_seed_result_do_not_count() -> None:
    only = [Outcome("-", False, F, comparable=False)] * 3
    assert judge_arm(only).verdict == "no claim"
    mixed = [*only, *cells("yes")]
    assert (judge_arm(mixed).verdict, judge_arm(mixed).comparable) == ("reproduced", 1)


def test_the_cause_is_the_most_common_disagreement_with_its_folders() -> None:
    a, b = ("results/reference/a",), ("results/reference/b",)
    found = judge_arm([*cells("no (lab parity)", "no (lab parity)", folders=a), *cells("no (opposite)", folders=b)])
    assert (found.cause, found.folders) == ("no (lab parity)", a)
    assert "parity where the seed saw a direction" in found.clause() and "`results/reference/a/`" in found.clause()
    assert "results/reference/b" not in found.clause()


def test_ties_in_the_cause_go_in_the_stated_order() -> None:
    assert dominant_cause(cells("-", "no (opposite)"))[0] == "no (opposite)"
    assert dominant_cause(cells("no (seed parity)", "no (lab parity)"))[0] == "no (lab parity)"


def test_a_no_verdict_with_censored_runs_is_its_own_cause() -> None:
    found = judge_arm([*cells("-", "-", censored=True), *cells("-")])
    assert found.cause == "censored"
    assert CAUSES["censored"] in found.clause()
    assert judge_arm(cells("-", "-")).cause == "-"


def test_a_reproduced_arm_names_the_agreeing_folders_only() -> None:
    found = judge_arm([*cells("yes", "yes", folders=("results/reference/good",)),
                       *cells("-", folders=("results/reference/bad",))])
    assert found.verdict == "reproduced" and found.folders == ("results/reference/good",)
    assert found.clause().startswith("the seed's way at 2 of 3 points")


def test_the_best_arm_wins_then_the_larger_share_then_the_first_listed() -> None:
    nope, half, most = Found("not", 0, 4, "-", F), Found("partly", 1, 2, "-", F), Found("partly", 2, 3, "-", F)
    assert best_arm([("a", nope), ("b", half), ("c", most)])[0] == "c"
    assert best_arm([("a", half), ("b", Found("partly", 2, 4, "-", F))])[0] == "a"  # equal share: first listed
    assert best_arm([("a", Found("no claim", 0, 0, "", F)), ("b", nope)])[0] == "b"


def test_a_seed_reproduces_only_when_every_experiment_with_a_claim_does() -> None:
    rep, part, nope, none = (Found(v, 0, 1, "", F) for v in ("reproduced", "partly", "not", "no claim"))
    assert judge_seed([rep, rep, none]) == "reproduced"
    assert judge_seed([rep, nope]) == "partly"
    assert judge_seed([part, nope]) == "partly"
    assert judge_seed([nope, nope, none]) == "not"
    assert judge_seed([none]) == "no claim"


def test_the_printed_rule_states_the_threshold_and_every_cause() -> None:
    assert ">= 2/3" in RULE
    assert all(clause in RULE for clause in CAUSES.values())
