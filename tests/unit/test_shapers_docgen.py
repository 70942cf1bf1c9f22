"""netem and linkem side by side (lab/docgen/shapers.py): two synthetic folders judged as `quiclab compare` judges
them; a `differs` row without its reason in docs/shapers.toml stops the generation, with one reason it renders; a
censored run is counted, not dropped; folders not yet made say the commands that make them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.docgen import shapers
from lab.errors import UsageError
from tests.unit.test_answers import run, write

TIMES = [1.00, 1.02, 0.98, 1.01, 0.99]


def folders(reference: Path, netem_factor: float, *, censor: bool = False) -> None:
    """linkem (A) and netem (B): 5 paired repeats of h3 at one point, netem's times `netem_factor` x linkem's."""
    for shaper, factor in (("linkem", 1.0), ("netem", netem_factor)):
        recs = [run("shapers", "loss=1%", "h3", k, t * factor, seed=100 + k, size=1_000_000)
                for k, t in enumerate(TIMES)]
        if censor and shaper == "netem":
            recs[0] = run("shapers", "loss=1%", "h3", 0, 60.0, seed=100, size=1_000_000, status="timeout")
        write(reference, f"shapers-{shaper}", recs)


def test_not_run_yet_names_the_commands(tmp_path: Path) -> None:
    text = shapers.render(tmp_path, "shapers", tmp_path / "shapers.toml")
    assert "Not run yet" in text and "--shaper netem" in text and "shapers-linkem" in text


def test_equal_folders_are_equivalent_and_need_no_reason(tmp_path: Path) -> None:
    folders(tmp_path, 1.0)
    text = shapers.render(tmp_path, "shapers", tmp_path / "absent.toml")
    assert "0 differ" in text
    assert "| loss=1% |" in text and "equivalent" in text


def test_a_difference_without_its_reason_stops_generation(tmp_path: Path) -> None:
    folders(tmp_path, 1.5)  # netem 50 % slower at every repeat: goodput differs
    with pytest.raises(UsageError, match="have no reason: loss=1% \\| HTTP/3"):
        shapers.render(tmp_path, "shapers", tmp_path / "absent.toml")


def test_a_reason_renders_beside_its_difference(tmp_path: Path) -> None:
    folders(tmp_path, 1.5)
    j = shapers.judge(tmp_path, "shapers")
    assert j is not None
    keys = [shapers.row_key(r) for r in j.rows if r.verdict == "differs"]
    assert keys, "a 1.5x slower shaper must differ"
    reasons = tmp_path / "shapers.toml"
    reasons.write_text("".join(f'[[why]]\nkey = "{k}"\nreason = "tbf frames {i}"\n' for i, k in enumerate(keys)))
    text = shapers.render(tmp_path, "shapers", reasons)
    assert f"{len(keys)} differ" in text and "tbf frames 0" in text


def test_a_censored_run_is_counted(tmp_path: Path) -> None:
    folders(tmp_path, 1.0, censor=True)
    j = shapers.judge(tmp_path, "shapers")
    assert j is not None
    assert any(r.censored_b == 1 and r.n_b == 5 for r in j.rows)


def test_a_bad_reasons_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "shapers.toml"
    bad.write_text('[[why]]\nkey = "x"\n')
    with pytest.raises(UsageError, match=r"shapers\.toml"):
        shapers.read_reasons(bad)
