"""`quiclab reproduce FOLDER`: run a finished sweep again from its manifest alone and judge whether the two agree.

The plan is rebuilt from the manifest's validated scenario (points, link, seeds, implementations, sender CC,
workloads, repeats, order); a folder whose plan cannot be rebuilt (no scenario, a scenario the current code refuses,
a recorded plan id that the rebuilt plan does not match, an unknown preset, a shard) is refused with exit 2 before
anything runs. What differs between then and now (commit, versions, shaper, forwarding, host) is listed, not
hidden. The new sweep is an ordinary folder; beside its report it gets reproduce.md and reproduce.json: the
verdict of every point x method x metric (lab/results/verdict.py) and the share of points equivalent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from lab.errors import UsageError
from lab.plan import presets, shard
from lab.plan.checks import validate
from lab.plan.plan import plan
from lab.plan.scenario import Scenario
from lab.results import store
from lab.results.folder import Manifest, write_atomic, write_json
from lab.results.report import judge_sweeps
from lab.results.verdict import Judgement, Margins, verdict_table
from lab.run import environment

REPORT_MD = "reproduce.md"
REPORT_JSON = "reproduce.json"
#: What is compared between the original's manifest and the reproduction's (dotted: a key inside a dict).
COMPARED = ("git.commit", "git.dirty", "shaper", "link_forwarding", "host.cpus", "host.kernel")


class Original(BaseModel):
    folder: str
    scenario: Scenario
    preset: str | None
    labs: int  # the labs it ran on (1 unless --parallel)
    manifest: Manifest


def load_original(folder: Path) -> Original:
    """The original sweep, if its plan can be rebuilt exactly; otherwise a UsageError naming why (exit 2)."""
    where = str(folder / store.MANIFEST)
    if not folder.is_dir():
        what = "a file" if folder.exists() else "no such directory"
        raise UsageError(f"{str(folder)!r} is not a sweep folder ({what})")
    if not (folder / store.MANIFEST).exists():
        raise UsageError(f"{str(folder)!r} has no {store.MANIFEST}: not a sweep folder, nothing to reproduce from")
    manifest = store.read_manifest(folder)
    if not isinstance(manifest.scenario, dict):
        raise UsageError(f"{where} records no scenario: its plan cannot be rebuilt")
    preset = manifest.preset
    if preset is not None and preset not in presets.names():
        raise UsageError(f"{where} names preset {preset!r}, which this quiclab does not know: allowed are "
                         f"{', '.join(presets.names())} (its plan cannot be rebuilt as that preset)")
    if manifest.shard:
        raise UsageError(f"{where} is shard {shard.spec_of(manifest.doc())} of a sweep: reproduce the merged folder "
                         "(`quiclab merge`)")
    s = validate(manifest.scenario, where)
    recorded = manifest.plan_id
    rebuilt = shard.plan_id(s, plan(s))
    if recorded and recorded != rebuilt:
        raise UsageError(f"{where}: the plan this quiclab makes from its scenario ({rebuilt[:19]}) is not the one it "
                         f"ran ({recorded[:19]}): the plan cannot be rebuilt (planning changed since; check out its "
                         f"commit {(manifest.git or {}).get('commit', '?')})")
    labs = int((manifest.parallel or {}).get("labs") or 1)
    return Original(folder=str(folder), scenario=s, preset=preset, labs=labs, manifest=manifest)


def _get(doc: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None  # type: ignore[assignment]
    return doc


def differences(then: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One line per fact that differs between the original's manifest and the reproduction's."""
    out = [f"{k}: {_get(then, k)} -> {_get(now, k)}" for k in COMPARED if _get(then, k) != _get(now, k)]
    for key in ("versions",):
        a, b = then.get(key) or {}, now.get(key) or {}
        for name in sorted(set(a) | set(b)):
            if name not in ("kernel", "python") and a.get(name) != b.get(name):
                out.append(f"{key}.{name}: {a.get(name, 'absent')} -> {b.get(name, 'absent')}")
    impls_a, impls_b = then.get("implementations") or {}, now.get("implementations") or {}
    for name in sorted(set(impls_a) & set(impls_b)):
        if (impls_a[name] or {}).get("cc") != (impls_b[name] or {}).get("cc"):
            out.append(f"implementations.{name}.cc: {impls_a[name].get('cc')} -> {impls_b[name].get('cc')}")
    return out


def commit_now_differs(original: Original) -> str:
    """Before running: the commit now against the original's (one line, empty when equal)."""
    then = (original.manifest.git or {}).get("commit")
    now = environment.git().get("commit")
    return "" if then == now else f"commit: {then} (original) -> {now} (now)"


class PointShare(BaseModel):
    points: int  # point x method pairs judged
    equivalent: int  # of which: the median (goodput or page time) equivalent and no metric differs
    differ: int  # of which: some metric differs

    @property
    def share(self) -> float:
        return self.equivalent / self.points if self.points else 0.0


def point_share(j: Judgement) -> PointShare:
    """A point x method is *equivalent* when its central metric (median goodput, or page time) is equivalent and no
    metric of it differs; it *differs* when any metric does. (p95 rows are rarely decidable at a few repeats.)"""
    by: dict[tuple[str, str], list[Any]] = {}
    for r in j.rows:
        by.setdefault((r.point, r.method), []).append(r)
    eq = sum(1 for rows in by.values() if not any(r.verdict == "differs" for r in rows)
             and any(r.metric in ("goodput", "page_time") and r.verdict == "equivalent" for r in rows))
    differ = sum(1 for rows in by.values() if any(r.verdict == "differs" for r in rows))
    return PointShare(points=len(by), equivalent=eq, differ=differ)


class Reproduction(BaseModel):
    original: str
    reproduction: str
    differences: list[str]
    share: PointShare
    judgement: Judgement

    @property
    def exit_code(self) -> int:
        return 1 if self.judgement.any_differs else 0


def judge(original: Path, new: Path, margins: Margins) -> Reproduction:
    """Judge the reproduction against the original and write reproduce.md / reproduce.json into the new folder."""
    j = judge_sweeps(original, new, margins)
    diffs = differences(store.read_manifest(original).doc(), store.read_manifest(new).doc())
    r = Reproduction(original=str(original), reproduction=str(new), differences=diffs, share=point_share(j),
                     judgement=j)
    write_json(new / REPORT_JSON, json.loads(r.model_dump_json()))
    write_atomic(new / REPORT_MD, markdown(r))
    return r


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(r: Reproduction) -> str:
    j, s = r.judgement, r.share
    m = j.margins
    lines = [f"# Reproduction of `{Path(r.original).name}`", "",
             f"Original: `{r.original}`; reproduction: `{r.reproduction}`.", "",
             f"**{s.equivalent} of {s.points} points equivalent ({s.share:.0%})**, {s.differ} differ; metrics: "
             f"{j.tally}. Margins: medians ±{m.median:.0%}, p95 ±{m.p95:.0%}, TTFB ±max({m.ttfb_ms:g} ms, "
             f"{m.median:.0%}); CIs at {1 - 2 * m.alpha:.0%} (TOST); paired (the median per-pair ratio, a pair "
             "being one repeat over one link seed in both sweeps) where every run has its partner, else unpaired "
             f"(Hodges-Lehmann, rank test at alpha = {m.alpha:g}) (docs/results.md \"Do two sweeps agree?\").", ""]
    lines += ["## What differs from the original's lab", ""]
    lines += [f"- {_cell(d)}" for d in r.differences] or ["- nothing recorded differs"]
    cols, rows = verdict_table(j)
    lines += ["", "## Verdicts", "", "| " + " | ".join([*cols, "why"]) + " |", "|" + "---|" * (len(cols) + 1)]
    for row, cells in zip(j.rows, rows, strict=True):
        why = row.reason if row.verdict != "equivalent" else ""
        if row.design == "unpaired" and row.pairing.startswith("unpaired (pairing broken"):
            why = f"{row.pairing}; {why}" if why else row.pairing
        lines.append("| " + " | ".join(_cell(c) for c in [*cells, why]) + " |")
    return "\n".join(lines) + "\n"
