"""Every censored run of the seed folders diagnosed from its own evidence (issue 37, item 4), for docs/seeds.md.

A censored run is the statistics' one definition (lab.stats.stats.is_censored): a failed or timed-out run that is a
result, right-censored at its own end. Each is diagnosed from what its folder holds about it, by the rules below
(written once here; `RULES` prints them), the first that applies giving its kind:

1. **captured**: the run has `evidence/<run>/explain.json` (lab/explain), or its committed re-run with the same link
   seed (a results/reference/RERUN_PREFIX* folder) ended censored too and has one: its reasons are the diagnosis.
2. **resent**: at least RESENT_FACTOR times the delivered bytes, and more than the whole object, crossed the link
   toward the client (runs.csv wire_down_bytes) while the link dropped at most DROPPED_AT_MOST of the packets put on
   it: the sender re-sent data that had not been lost.
3. **stalled**: the connection was made (a handshake time, or bytes delivered) and the link's time for the bytes it
   carried toward the client (wire_down_bytes x 8 / rate) is below IDLE_BELOW of the run: the link sat idle, so the
   sender was silent for most of the run.
4. **link**: the run timed out (its status, or curl's exit code 28) with that link time at least BUSY_FROM of the
   run: the link was busy throughout; its rate and loss, not a stall, made the transfer outlast its timeout.
5. **text**: none of the above (no link counters, an unshaped link, no connection, or a failure other than a
   timeout on a busy link): the error text alone.

Every diagnosis also says how the run ended (its status, error text with curl's meaning of its exit code, the share
of the bytes delivered), what the link dropped by cause, the client's own receive-buffer drops, the fidelity guard's
flag (runs.csv host_bound), and for multi-object runs the object that failed (objects.csv). Kinds 1 and 4 settle the
cause; for the others the counters narrow it down but only a capture shows why, so the diagnosis gives the command
that re-runs the run with its own link seed, captured: `quiclab sweep PRESET --seed SEED --capture pcap,keylog,qlog
--shard K/G`, the shard that is exactly the run's (point, repeat) group (lab/plan/plan.py shard), checked here
against the current preset: the command is given only when that shard plans the run's own key and link seed. Its
folder, published as `results/reference/censored-PRESET-KofG` (`quiclab publish`), is found here by its preset, run key
and link seed, and what the re-run did is added to the diagnosis (a re-run that completed: the failure did not recur).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from lab.docgen.atlas import Atlas, Folder, Renderer, Seed
from lab.errors import UsageError
from lab.explain.model import EXPLAIN_JSON, Explanation
from lab.plan import checks, presets
from lab.plan.plan import groups, plan, shard
from lab.results import objects_csv
from lab.results.folder import HOST_BOUND
from lab.results.objects_csv import ObjectRow
from lab.results.schema import RunRecord, read_runs
from lab.sizes import format_size
from lab.stats.stats import censored_runs, exclusion_reason, method_label

RESENT_FACTOR = 2.0
DROPPED_AT_MOST = 0.01
IDLE_BELOW = 0.5
BUSY_FROM = 0.8
#: a drop cause worth naming: at least this share of the packets put on the link
NAMED_DROPS = 0.10
CAPTURE = "pcap,keylog,qlog"
#: the name a committed re-run folder starts with: `quiclab publish FOLDER censored-PRESET-KofG`
RERUN_PREFIX = "censored-"
#: curl's exit codes (libcurl-errors(3)) that the lab's clients report
CURL_EXIT = {6: "could not resolve the host", 7: "could not connect", 28: "operation timed out",
             35: "TLS handshake failed", 52: "empty reply from the server", 55: "failure sending network data",
             56: "failure receiving network data", 92: "HTTP/2 stream error", 95: "HTTP/3 layer error"}
#: kind -> the words the summaries use, in the order the rules apply
KINDS = {"captured": "explained from its capture",
         "resent": "data re-sent though the link dropped almost none",
         "stalled": "the sender stalled (the link sat idle)",
         "link": "the link's rate and loss: the transfer outlasted its timeout",
         "text": "the error text alone"}
SETTLED = ("captured", "link")
RULES = ("Each censored run (failed or timed out, censored at its own end in every figure) is diagnosed from its own "
         "evidence by the first rule that applies: **captured** (its `evidence/*/explain.json` gives the reasons); "
         f"**resent** (at least {RESENT_FACTOR:g}x the delivered bytes, and more than the whole object, crossed the "
         f"link toward the client while the link dropped at most {DROPPED_AT_MOST:.0%} of the packets put on it); "
         f"**stalled** (the connection was made, and the link time of the bytes it carried toward the client, wire "
         f"bytes x 8 / rate, is below {IDLE_BELOW:.0%} of the run: the link sat idle); **link** (the run timed out "
         f"with that link time at least {BUSY_FROM:.0%} of the run: the link's rate and loss made the transfer "
         "outlast its timeout); else **the error text** alone. Captured and link settle the "
         "cause; for the others only a capture shows why, so each names the command that re-runs its (point, "
         "repeat) group with the same link seed, captured (`quiclab sweep --shard` of that group; the sweep writes "
         f"each run's explain.json at its end; published as `results/reference/{RERUN_PREFIX}PRESET-KofG/`, what the "
         "re-run did joins the diagnosis, and a re-run that failed again with an explained capture makes it "
         "**captured**). A run the fidelity guard flagged host-bound (runs.csv `host_bound`) "
         "is a result like any other and is listed here when censored, with its flag; attempts the guard set aside "
         "(`host-bound.csv`) are not results and are not counted.")


@dataclass(frozen=True)
class Rerun:
    """The command that re-runs a censored run's (point, repeat) group with the same link seed, captured, or why
    there is none (`command` empty)."""

    command: str = ""
    runs: int = 0  # runs the command makes: the censored run and its partners at the same point, repeat and seed
    why_not: str = ""


@dataclass(frozen=True)
class Diagnosis:
    run: RunRecord
    kind: str  # a key of KINDS
    reason: str  # sentences, from the run's own evidence
    rerun: Rerun | None = None  # for the kinds that do not settle the cause, while no re-run is committed
    rerun_folder: str = ""  # a committed re-run of it with the same link seed (RERUN_PREFIX folder), if any

    @property
    def settled(self) -> bool:
        return self.kind in SETTLED


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:g} Mbit/s"


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.1%}"


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def exit_meaning(failure: str, client: str = "curl") -> str:
    """The failure's first line, with curl's meaning of the exit code it names (only for a curl client's code)."""
    line = first_line(failure)
    m = re.search(r"curl exit code (\d+)", line) or (re.search(r"client exit code (\d+)", line)
                                                      if client.startswith("curl") else None)
    meaning = CURL_EXIT.get(int(m.group(1))) if m else None
    return f"{line} (curl: {meaning})" if meaning and meaning.lower() not in line.lower() else line


def end_s(r: RunRecord) -> float | None:
    """When the run ended (its censoring point): its own end, else its timeout."""
    return r.total_s if r.total_s is not None else r.page_time_s if r.page_time_s is not None else r.timeout_s


def link_time_s(r: RunRecord) -> float | None:
    """Seconds of the downlink's rate the bytes it carried toward the client took (None: no counter or no rate)."""
    if r.wire_down_bytes is None or not r.rate_bps:
        return None
    return r.wire_down_bytes * 8 / r.rate_bps


def _queue_text(link: str) -> str:
    try:
        down = json.loads(link).get("downlink") or {}
    except (json.JSONDecodeError, AttributeError):
        return ""
    if down.get("queue_limit_bytes"):
        return f"{format_size(int(down['queue_limit_bytes']))} "
    return f"{down['queue_limit_packets']}-packet " if down.get("queue_limit_packets") else ""


def _reorders(link: str) -> bool:
    try:
        return bool((json.loads(link).get("downlink") or {}).get("reorder"))
    except (json.JSONDecodeError, AttributeError):
        return False


def ended(r: RunRecord, objects: Sequence[ObjectRow] = ()) -> str:
    """How the run ended: status, when, the error, what it had delivered."""
    t = end_s(r)
    when = f"after {t:.1f} s" if t is not None else "at an unknown time"
    share = f"{_pct(r.bytes / r.size_bytes)} of the {format_size(r.size_bytes)}" if r.size_bytes else \
        f"{format_size(r.bytes)}"
    limit = f" (its timeout {r.timeout_s:.0f} s)" if r.timeout_s is not None else ""
    head = (f"timed out {when}{limit} with {share} delivered" if r.status == "timeout"
            else f"failed {when}{limit} with {share} delivered")
    out = f"{head}: {exit_meaning(r.failure, r.client)}"
    bad = [o for o in objects if not o.ok]
    if bad:
        o = bad[0]
        out += (f"; object {o.object} (request {int(o.object) + 1 if o.object.isdigit() else '?'} of "
                f"{len(objects)}) received {format_size(o.bytes)} from {o.start_s:.2f} s to {o.done_s:.2f} s")
        rest = [x for x in objects if x.ok and x.start_s >= o.done_s]
        if rest:
            span = max(x.done_s for x in rest) - min(x.start_s for x in rest)
            opened = f" over {r.connections} connections" if r.connections and r.connections > 1 else ""
            out += f", then the {len(rest)} after it completed in {span:.2f} s{opened}"
    return out


def drops(r: RunRecord) -> str:
    """What the link dropped, by cause and direction (empty without counters)."""
    if r.link_down_sent_pkts is None:
        return ""
    parts = []
    for name, sent, loss, queue in (("toward the client", r.link_down_sent_pkts, r.link_down_loss_drops,
                                     r.link_down_queue_drops),
                                    ("toward the server", r.link_up_sent_pkts, r.link_up_loss_drops,
                                     r.link_up_queue_drops)):
        if sent is None:
            continue
        lost, queued = loss or 0, queue or 0
        cause = f"{lost} to its loss" + (f", {queued} at its {_queue_text(r.link)}queue" if queued else "")
        parts.append(f"{lost + queued} of {sent} packets {name} ({cause})")
    return "the link dropped " + "; ".join(parts)


def kind_of(r: RunRecord, explained: Explanation | None) -> str:
    """The first rule of the module's docstring that applies."""
    if explained is not None and explained.status == "explained":
        return "captured"
    wire = r.wire_down_bytes
    if wire is not None and r.link_down_sent_pkts:
        dropped = (r.link_down_loss_drops or 0) + (r.link_down_queue_drops or 0)
        if (wire >= RESENT_FACTOR * r.bytes and wire > r.size_bytes
                and dropped <= DROPPED_AT_MOST * r.link_down_sent_pkts):
            return "resent"
    busy, t = link_time_s(r), end_s(r)
    if busy is not None and t:
        if busy < IDLE_BELOW * t and (r.handshake_s is not None or r.bytes > 0):
            return "stalled"
        if busy >= BUSY_FROM * t and timed_out(r):
            return "link"
    return "text"


def timed_out(r: RunRecord) -> bool:
    """The run timed out: its status says so, or curl's exit code 28 (a multi-object run's object) does."""
    return r.status == "timeout" or re.search(r"exit code 28\b", r.failure) is not None


@dataclass(frozen=True)
class Again:
    """The run made again with the same link seed, captured, in a committed folder (`quiclab sweep --shard` of its
    group, published as results/reference/RERUN_PREFIX...): the folder, its run, and that run's explanation."""

    folder: str
    run: RunRecord
    explained: Explanation | None


def again_text(a: Again) -> str:
    """What the re-run with the same link seed did, and what its capture says."""
    head = f"re-run with the same link seed in `{a.folder}/`: "
    if a.run.status == "ok":
        took = f" in {a.run.total_s:.2f} s" if a.run.total_s is not None else ""
        head += f"completed{took}, so the failure did not recur with the link's loss pattern alone"
    else:
        head += ended(a.run)
    if a.explained is None:
        return head + "; no explain.json for it"
    if a.explained.status != "explained":
        return head + f"; its capture is {a.explained.status}: {a.explained.why}"
    return head + "; its capture says: " + ("; ".join(x.text for x in a.explained.reasons[:3]) or "no reason found")


def diagnose(r: RunRecord, objects: Sequence[ObjectRow] = (), explained: Explanation | None = None,
             rerun: Rerun | None = None, again: Again | None = None) -> Diagnosis:
    """One censored run's diagnosis from its own evidence (the rules of the module's docstring), and from its
    committed re-run with the same link seed where there is one (`again`: captured when that re-run ended the same
    way, censored, and its capture explains it)."""
    recurred = again is not None and again.run.status != "ok" and again.explained is not None
    kind = kind_of(r, explained if explained is not None else again.explained if recurred and again else None)
    said = [ended(r, objects)]
    busy, t = link_time_s(r), end_s(r)
    carried = (f"the link carried {format_size(r.wire_down_bytes)} toward the client, {busy:.2f} s of its "
               f"{_mbit(r.rate_bps)}" if busy is not None and r.wire_down_bytes is not None and r.rate_bps else "")
    if kind == "captured" and explained is not None:
        said.append("its capture says: " + ("; ".join(x.text for x in explained.reasons[:3]) or "no reason found"))
    elif kind == "resent" and r.wire_down_bytes is not None:
        jitter = (f" (the link reorders: jitter {r.jitter_s * 1e3:g} ms, reorder on)" if _reorders(r.link) and
                  r.jitter_s else "")
        said.append(f"{format_size(r.wire_down_bytes)} crossed the link toward the client for "
                    f"{format_size(r.bytes)} delivered ({r.wire_down_bytes / max(r.bytes, 1):.1f}x), although the "
                    f"link dropped almost none: the sender re-sent data that had not been lost{jitter}")
    elif kind == "stalled" and busy is not None and t:
        said.append(f"{carried} in the run's {t:.1f} s: the link sat idle {_pct(1 - busy / t)} of the run, so the "
                    "sender was silent most of the time")
    elif kind == "link" and busy is not None and t:
        said.append(f"{carried} in the run's {t:.1f} s: busy {_pct(min(busy / t, 1))} of it, so the link's rate "
                    f"and its {r.loss_pct:g} % loss, not a stall, made the transfer outlast its timeout")
    d = drops(r)
    if d:
        sent = r.link_down_sent_pkts or 0
        heavy = sent and (r.link_down_queue_drops or 0) >= NAMED_DROPS * sent
        said.append(d + (f": its queue dropped {_pct((r.link_down_queue_drops or 0) / sent)} of what the sender "
                         "put on it" if heavy else ""))
    if r.client_rcvbuf_drops:
        said.append(f"the client's own UDP receive buffer dropped {r.client_rcvbuf_drops} datagrams (an endpoint "
                    "limit, not the link)")
    if r.host_bound:
        said.append(f"flagged host-bound ({first_line(r.host_bound)}): the host, not the link, may have limited it")
    if again is not None:
        said.append(again_text(again))
    done = kind in SETTLED or again is not None
    return Diagnosis(r, kind, "; ".join(said), None if done else rerun, again.folder if again else "")


# ---------------------------------------------------------------------------------------------------------------
# The command that re-runs a run's group with its own link seed, captured


def rerun_command(preset: str, scenario_seed: int, r: RunRecord) -> Rerun:
    """`quiclab sweep PRESET --seed S --capture ... --shard K/G`, where shard K of G is exactly the run's (point,
    repeat) group in the current preset's plan: given only when that group holds the run's key with its link seed."""
    try:
        data = presets.get(preset).model_dump()
        data.update(seed=scenario_seed, capture=CAPTURE.split(","))
        every = plan(checks.validate(data, f"preset {preset}"))
    except UsageError as e:
        return Rerun(why_not=f"the preset {preset!r} no longer plans it: {first_line(str(e))}")
    g = groups(every)
    if (r.point, r.repeat) not in g:
        return Rerun(why_not=f"the current preset {preset!r} has no point {r.point} repeat {r.repeat}")
    k = g.index((r.point, r.repeat)) + 1
    mine = shard(every, k, len(g))
    same = [x for x in mine if x.key == r.run_key and x.seed == r.seed]
    if not same:
        return Rerun(why_not=f"the current preset {preset!r} plans another link seed for {r.run_key} (it changed "
                             "since this folder was made)")
    cmd = (f"quiclab sweep {preset} --seed {scenario_seed} --capture {CAPTURE} --shard {k}/{len(g)} "
           f"--out results/censored")
    return Rerun(cmd, len(mine))


# ---------------------------------------------------------------------------------------------------------------
# Folders


def explanation(folder: Path, r: RunRecord) -> Explanation | None:
    """The run's explain.json in the folder (published folders keep it beside where the captures were)."""
    dirs = {Path(p).parent for p in r.evidence.split()} or {Path("evidence") / r.run_key.replace("/", "_")}
    for d in sorted(dirs):
        path = folder / d / EXPLAIN_JSON
        if path.is_file():
            try:
                return Explanation.model_validate_json(path.read_text(encoding="utf-8"))
            except ValidationError:
                return None
    return None


def agains(reference: Path) -> dict[tuple[str, str, int], Again]:
    """Every committed re-run folder's runs by (preset, run_key, link seed)."""
    out: dict[tuple[str, str, int], Again] = {}
    for runs in sorted(reference.glob(f"{RERUN_PREFIX}*/runs.csv")):
        folder = runs.parent
        try:
            preset = str(json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("preset") or "")
        except (OSError, json.JSONDecodeError):
            continue
        for r in read_runs(runs).records:
            if r.status != "unsupported":
                out[(preset, r.run_key, r.seed)] = Again(f"results/reference/{folder.name}", r,
                                                         explanation(folder, r))
    return out


@dataclass(frozen=True)
class FolderCensored:
    name: str
    results: int  # completed + censored runs
    set_aside: int  # attempts in host-bound.csv (not results)
    diagnoses: list[Diagnosis]


def folder_censored(f: Folder, again: dict[tuple[str, str, int], Again] | None = None) -> FolderCensored:
    """Every censored run of one sweep folder, diagnosed (with its committed re-run, `agains`, where there is one)."""
    objects = objects_csv.read(f.path, f.records)
    seed = f.manifest.get("seed")
    preset = str(f.manifest.get("preset") or f.path.name)
    out = []
    for r in censored_runs(f.records):
        rerun = rerun_command(preset, int(seed), r) if isinstance(seed, int) else \
            Rerun(why_not="the folder's manifest records no scenario seed")
        out.append(diagnose(r, objects.get(r.run_key, []), explanation(f.path, r), rerun,
                            (again or {}).get((preset, r.run_key, r.seed))))
    aside = f.path / HOST_BOUND
    return FolderCensored(f.path.name, sum(1 for r in f.records if exclusion_reason(r) is None),
                          len(read_runs(aside).records) if aside.is_file() else 0, out)


def seed_folders(seed: Seed, reference: Path) -> list[str]:
    """The seed's sweep folders: every committed folder whose preset name starts with the first word of a preset
    its arms use (connectify-*, yu-*, ...), so folders no arm uses (e.g. connectify-cc) are diagnosed too."""
    words = {p.split("-")[0] for e in seed.experiments for a in e.arms for p in (a.preset_of(a.quic),
                                                                                   a.preset_of(a.tcp))}
    out = []
    for runs in sorted(reference.glob("*/runs.csv")):
        name = runs.parent.name
        if name.split("-")[0] in words:
            out.append(name)
    return out


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _counted(diags: Sequence[Diagnosis]) -> str:
    c = Counter(d.kind for d in diags)
    return ", ".join(f"{c[k]} {KINDS[k]}" for k in KINDS if c[k])


def _run_line(preset: str, d: Diagnosis) -> str:
    r = d.run
    head = (f"- `{preset}` {r.point_label}, {method_label(r.protocol, r.client, r.server)}, repeat {r.repeat}, "
            f"link seed {r.seed} (`{r.run_key}`): **{KINDS[d.kind]}**: {d.reason}.")
    if d.settled or d.rerun_folder:
        return head
    if d.rerun is None or not d.rerun.command:
        return head + f" No capture, and no command re-runs it: {d.rerun.why_not if d.rerun else 'unknown'}."
    n = d.rerun.runs - 1
    return (head + f" No capture: re-run with `{d.rerun.command}` (the run and its {n} partner{'s' if n != 1 else ''} "
                   "at the same point, repeat and link seed).")


def seed_section(folders: Sequence[FolderCensored]) -> list[str]:
    diags = [d for f in folders for d in f.diagnoses]
    results = sum(f.results for f in folders)
    names = ", ".join(f"`{f.name}/`" for f in folders)
    head = f"Censored runs: {len(diags)} of {results} results in {len(folders)} folders ({names})"
    out = ["### Censored runs", "", head + (f" — reasons: {_counted(diags)}." if diags else ".")]
    if diags:
        out += [""] + [_run_line(f.name, d) for f in folders for d in f.diagnoses]
    return [*out, ""]


def total_section(per_seed: dict[str, list[FolderCensored]]) -> list[str]:
    folders = [f for fs in per_seed.values() for f in fs]
    diags = [d for f in folders for d in f.diagnoses]
    settled = sum(1 for d in diags if d.settled)
    rerun = sum(1 for d in diags if not d.settled and d.rerun is not None and d.rerun.command)
    line = (f"Censored runs in the seed folders: {len(diags)} of {sum(f.results for f in folders)} results in "
            f"{len(folders)} folders" + (f" — reasons: {_counted(diags)}" if diags else "") +
            f"; settled by their own evidence: {settled}; to re-run captured with the same link seed: {rerun} "
            f"({sum(d.rerun.runs for d in diags if not d.settled and d.rerun and d.rerun.command)} runs with their "
            f"partners); re-run already (committed `{RERUN_PREFIX}*` folders): "
            f"{sum(1 for d in diags if d.rerun_folder)}; attempts set aside as host-bound (not results): "
            f"{sum(f.set_aside for f in folders)}.")
    ends: dict[str, list[float]] = {}
    for d in diags:
        t = end_s(d.run)
        if t is not None:
            ends.setdefault(first_line(d.run.failure), []).append(t)
    same = [f"{len(ts)} ended \"{text}\", at " + _listed([f"{t:.1f}" for t in sorted(ts)]) + " s after the start"
            for text, ts in sorted(ends.items(), key=lambda kv: (-len(kv[1]), kv[0])) if len(ts) > 1]
    out = ["## Censored runs", "", RULES, "", line]
    if same:
        out += ["", "Censored runs with the same error, and when they ended: " + "; ".join(same) + "."]
    return [*out, ""]


def sections(r: Renderer, atlas: Atlas) -> tuple[list[str], dict[str, list[str]]]:
    """The total section and, per seed id, its "Censored runs" lines."""
    per_seed: dict[str, list[FolderCensored]] = {}
    again = agains(r.reference)
    for seed in atlas.seeds:
        fs = [r.folder(n) for n in seed_folders(seed, r.reference)]
        per_seed[seed.id] = [folder_censored(f, again) for f in fs
                             if f is not None and f.manifest.get("preset") == f.path.name]  # sweep folders only
    return total_section(per_seed), {s: seed_section(fs) for s, fs in per_seed.items() if fs}
