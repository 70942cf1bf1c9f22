"""docs/seeds.md "## The open questions, answered" (issue 37, item 4): each open question of the atlas answered from
committed folders by generated sentences and a small table, every number computed from runs.csv (and explain.json)
by lab/stats; a folder not committed yet gives "not yet measured: `COMMAND`" and no number.

The questions and their rules are in the modules that answer them: answers_connectify.py (the capped QUIC window;
the 0.1 % point from its captures), answers_yu.py (the loss + delay cell per sender pair; reuse savings),
answers_kth_survey.py (KTH's transfer-only throughput; the survey's loss-based arm and overhead); their shared
statistics in answer_stats.py. Bolina's 0-RTT saving is answered in its seed's section, and the censored runs in the
section that diagnoses them: the intro links both.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lab.docgen import answers_connectify as connectify
from lab.docgen import answers_kth_survey as kth_survey
from lab.docgen import answers_yu as yu
from lab.docgen.atlas import Atlas, Renderer

HEADING = "## The open questions, answered"
CENSORED_HEADING = "Censored runs"  # lab/docgen/censored.py's total section


def anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return "#" + re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def intro(atlas: Atlas) -> str:
    bolina = next((s for s in atlas.seeds if s.id == "004"), None)
    where = f"[{bolina.id}: {bolina.title}]({anchor(f'{bolina.id}: {bolina.title}')})" if bolina else "seed 004"
    return ("Each question the atlas left open, answered from committed folders under results/reference/: a few "
            "generated sentences and a table, every number computed from the folders' runs.csv (and the captured "
            "runs' explain.json) by the lab's statistics (medians with their order-statistic CIs at the level they "
            "reach; comparisons by the one rule of the tables above, paired where the design pairs; failed and "
            "timed-out runs censored at their own end, never dropped), each naming its folder and verdict. A folder "
            "not committed yet says \"not yet measured\" with the command that makes it. Bolina's 0-RTT saving is "
            f"answered in {where}; every censored run is diagnosed under "
            f"[{CENSORED_HEADING}]({anchor(CENSORED_HEADING)}).")


QUESTIONS: tuple[tuple[str, Callable[[Renderer, Atlas], list[str]]], ...] = (
    ("000 Connectify: RTT with the QUIC window capped at the seed's ~200 kB per round trip",
     lambda r, a: connectify.window_answer(r, a, connectify.RTT)),
    ("000 Connectify: rate with the QUIC window capped", lambda r, a: connectify.window_answer(r, a, connectify.RATE)),
    ("000 Connectify: the 0.1 % point explained from captured runs", lambda r, a: connectify.captured_answer(r, a)),
    ("001 Yu: loss + delay across sizes, per sender pair", lambda r, a: yu.senders_answer(r)),
    ("001 Yu: what connection reuse saves per request", lambda r, a: yu.reuse_answer(r)),
    ("002 KTH: throughput over the transfer only, per protocol", lambda r, a: kth_survey.kth_answer(r)),
    ("003 Survey: a loss-based arm at 33.6 MB and the overhead", lambda r, a: kth_survey.survey_answer(r)),
)


def section(r: Renderer, atlas: Atlas) -> list[str]:
    out = [HEADING, "", intro(atlas), ""]
    for title, answer in QUESTIONS:
        out += [f"### {title}", "", *answer(r, atlas)]
    return out
