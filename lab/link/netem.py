"""The tc netem backend: the `tc` command lines (argument lists, never shell strings) that apply a `Link`
inside the router with netem (+ tbf), with linkem's semantics as far as netem allows.

Topology: the downlink (toward the client) is shaped on the egress of the router's client-side interface, the
uplink (toward the server) on the egress of the server-side interface. Per impaired direction:

    tc qdisc replace dev IF root handle 1: prio bands 2 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
    tc filter add dev IF parent 1: protocol ip prio 1 matchall classid 1:2
    tc qdisc replace dev IF parent 1:2 handle 2: netem limit N [delay D [J [distribution X]]] [loss ...] [ecn]
                                                 [duplicate P] [corrupt P] [reorder P gap G] [slot ...]
                                                 [rate 100000000000bit] seed S
    tc qdisc replace dev IF parent 2:1 handle 10: tbf rate Rbit burst B limit Q [overhead O mpu M]
                                                                                     (only with a rate)
    tc qdisc replace dev IF parent 10:1 handle 20: codel|fq_codel|pie|pfifo_head_drop ...
                                                    (only with a rate and a queue discipline other than drop-tail)

Applying a link = run `clear_commands()` (delete both root qdiscs; they fail harmlessly when nothing is
installed, so their errors are ignored), then every command of `plan().commands`, each of which must succeed
(`apply_script()`: all of it in one exec).
The plan holds commands for impaired directions only: an unimpaired direction gets no netem at all, the clear
left it with the interface's default qdisc. Starting from a clean slate makes the result independent of what
was installed before (`replace` on the root alone would keep a stale tbf child).

What the iproute2 / kernel sources say (read for this module):
  * iproute2 tc/q_netem.c: `delay TIME [JITTER [CORRELATION]]` (jitter is positional, taken only when the
    next word starts with a digit), `distribution {uniform|normal|pareto|paretonormal}` (loaded from a .dist
    file by tc itself; rejected with "distribution specified but no latency and jitter values" unless delay
    and jitter are both non-zero), `loss random PERCENT`, `loss gemodel PERCENT [R [1-H [1-K]]]`, `rate
    RATE`, `limit PACKETS`, `seed SEED` (decimal u64, TCA_NETEM_PRNG_SEED). Parse failures print
    `Illegal "..."` or `What is "..."?`, followed by `Usage: ... netem ...`.
  * iproute2 tc/q_tbf.c: `tbf rate RATE burst BYTES limit BYTES` (`limit` and `latency` are mutually
    exclusive; rate, burst and one of them are mandatory). Errors start with "tbf:".
  * kernel net/sched/sch_netem.c loss_gilb_ell(): in the good state the packet is lost with probability a4 =
    `1-k`, in the bad state when rand > a3 = h, i.e. with probability `1-h` (tc passes h = 1 - its "1-h"
    argument); the transition (a1 = p good->bad, a2 = r bad->good) is drawn in the same call but the loss
    test uses the state the packet arrived in. So `loss gemodel p r 1-h 1-k` = `p r loss_bad loss_good`, and
    netem's chain has exactly linkem's per-packet semantics.
  * sch_netem.c: without `rate`, packets sit in a time-sorted tfifo, so jitter reorders them; with `rate`,
    time_to_send = max(now + delay sample, last queued packet's time_to_send) + serialization time, so order
    is kept, like linkem's reorder=false (release = max(departure + d, previous release)).
  * sch_netem.c caps jitter at INT_MAX ns (about 2.147 s) for tabledist(); distribution tables are s16 values
    scaled by NETEM_DIST_SCALE = 8192, so a tabled sample never exceeds 4 jitters from the mean.
  * netem's `limit` (packets, default 1000) drops at enqueue; depending on the kernel it counts only the delay
    line (commit f8d4bc455047) or also the packets already handed to the child qdisc (sch->q.qlen; older
    kernels, and again after 4185701fcce6, 2026).

Deviations from linkem (everything else has the same meaning):
  * Stage order. netem comes first and tbf is its child, so a packet goes loss -> delay/jitter -> queue/rate;
    linkem does loss -> queue/rate -> delay/jitter. With a constant delay, throughput, queueing delay and
    added RTT are the same. With jitter and a backlogged queue, tbf re-spaces packets at the rate, so the
    receiver sees less jitter under load than with linkem.
  * Order keeping (reorder=false with jitter) is done with `rate 100000000000bit` on netem, which adds about
    0.12 us per 1514-byte frame. It is added whenever there is jitter and reorder is false, even when the
    link has a rate, because that rate lives in the tbf child, and netem itself would still reorder.
  * Framing. tbf counts Ethernet frames (IP packet + 14 bytes) against its rate and byte limit, linkem counts
    IP packets: full-size packets get about 0.9 % less IP throughput and a byte limit holds about 0.9 % fewer
    of them; small packets are more affected. Rates are passed unscaled.
  * Burst. tbf lets `burst` bytes leave back to back after an idle period; linkem serializes strictly.
    burst = max(2 x 1514 bytes, 1 ms at the rate): too large a burst lets bursts exceed the rate, too small a
    burst caps the rate at high rates (one timer wake-up per burst) and must stay above one frame. At low
    rates two frames may leave together (at 1 Mbit/s, 24 ms of line time).
  * Queue limits. tbf has only a byte limit: a limit in packets becomes packets x 1500 bytes (more small
    packets fit than in linkem's packet limit); with both given, the smaller wins. Capped at 2^32-1 bytes.
  * Jitter distributions come from iproute2's tables: quantized and cut off at 4 jitters (linkem's normal is
    unbounded, its pareto tail longer). netem rejects a distribution with zero delay, so delay 0 with a
    non-uniform jitter is sent as delay 1 us.
  * Randomness. netem's PRNG is not linkem's: the same seed gives the same distributions, not the same drop
    positions or delay samples. The seed is scrambled before netem gets it (`netem_seed`: splitmix64's first
    output from state = seed for the downlink, its second for the uplink): the kernel seeds its Tausworthe
    generator without a warm-up (prandom_seed_state), so small seeds such as the default 1 passed unchanged lost
    packets #2 and #4 after every `shape` at 1 % loss, and seed 2 lost 1.23 % of 20,000 datagrams
    (tests/unit/test_netem_seed.py models it). Only kernels with TCA_NETEM_PRNG_SEED (Linux 6.6+) honour the
    seed; older ones silently ignore it (unseeded).
  * Reconfiguration deletes the qdiscs first: packets queued or in flight are dropped and the Gilbert-Elliott
    chain restarts in the good state (linkem keeps both).
  * Scope. The prio root sends IPv4 packets (the filter) through netem and everything else (ARP, the interfaces'
    own IPv6) past it, unshaped, as linkem, an IP-only TUN, never sees them. With netem as the root, a dropped
    ARP frame was a drop in netem's counters that neither of the run's captures holds (the likeliest cause of
    the VM's explain test once counting 35 drops against the captures' 34; tests/data/tc/prio-loss3.json: 25
    ARP frames past netem). IPv4 packets the router sends itself (ICMP) are still shaped; linkem shapes only
    forwarded packets, classified by destination prefix.
  * netem's own `limit` must never be what drops (queue limits belong to tbf). It is sized as
    2 x rate x (delay + 4 x jitter) / (8 x 500 bytes) packets for the delay line (2x for slow-start overshoot,
    500 bytes as a conservative average size; rate = the peak rate, or 10 Gbit/s, about what the router's
    veths forward without offloads, when unlimited), plus tbf's byte limit / 64 bytes (a queue full of
    minimum-size frames, for kernels that count the child's packets), and at least 1000 (netem's default).
  * Jitter with order kept. linkem draws the delay from a process in time (a value per `jitter_interval`,
    falls as ramps), so the delivered delays have the configured mean and spread at any packet rate. netem draws
    per packet and keeps order with its rate (time_to_send = max(own, last)), so the delivered mean grows with
    the packet rate (20 +- 5 ms uniform: ~21.9 ms at one packet per ms, ~24.6 ms at 1 Gbit/s spacing) and the
    data direction sees more delay than the ACKs. An explicit `jitter_interval` is refused (netem has none).
  * Duplication, corruption, reordering: the same netem options (`duplicate`, `corrupt`, `reorder P gap G`),
    same order of decisions. netem flips a bit anywhere in the packet (a flip in the IPv4 header makes the next
    hop drop it); linkem only past the IP header (the receiver's checksum drops it).
  * Slots: `slot MIN MAX` (uniform: MIN/MAX = delay -+ jitter) or `slot distribution DIST DELAY JITTER`, with
    `packets`/`bytes`. netem draws the next slot from the moment a packet asks after an idle period; linkem's
    slots run in time regardless of the traffic.
  * Overhead/mpu: tbf's `overhead`/`mpu` (size table) on top of the 14-byte Ethernet header it counts anyway.
  * Queue disciplines: a child of tbf. CoDel/fq_codel/PIE/pfifo_head_drop count their limit in packets: a byte
    limit becomes bytes / 1500 packets (at least 1). fq_codel's quantum counts Ethernet frames (linkem's quantum
    + 14). PIE's alpha and beta are in 1/16 steps (rounded). Refused: a PIE `max_burst` other than 150 ms (fixed
    in Linux). Without a rate there is no queue, in linkem as in netem, so no discipline is installed.
  * Not expressible with a static netem/tbf set-up, so `plan` refuses them (NetemUnsupported, exit 2):
    outages, rate schedules (spikes), mahimahi traces, jitter above 2^31-1 ns, loss after the link (netem's
    loss acts before its queue), an explicit jitter_interval, a PIE max_burst other than 150 ms, a negative
    overhead with a rate (tbf's is unsigned), and keep_state (every application deletes the qdiscs). A
    zero-length outage is a no-op and is accepted.
  * Calibration: the part of each direction's delay the lab's own path adds (lab/link/calibrate.py) is
    subtracted from netem's delay too, as linkem does.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Literal

from lab.errors import UsageError
from lab.link.model import Bernoulli, Direction, GilbertElliott, JitterDist, Link, Loss, Pie
from lab.link.netem_queue import queue_commands

SEED_MODULUS = 2**64
_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
U32_MAX = 2**32 - 1

FRAME_BYTES = 1514  # a 1500-byte IP packet plus the 14-byte Ethernet header tbf counts
TBF_MIN_BURST_BYTES = 2 * FRAME_BYTES
TBF_BURST_S = 0.001
QUEUE_PACKET_BYTES = 1500  # linkem's packet limit expressed in bytes for tbf

ORDER_KEEPING_RATE_BPS = 100 * 10**9
UNLIMITED_RATE_BPS = 10 * 10**9  # assumed peak rate of an unlimited direction (for netem's limit only)
NETEM_MIN_LIMIT = 1000  # netem's own default
NETEM_LIMIT_HEADROOM = 2
NETEM_AVG_PACKET_BYTES = 500
MIN_FRAME_BYTES = 64
NETEM_MAX_SIGMAS = 4  # |table value| <= 32767 / NETEM_DIST_SCALE (8192) < 4
NETEM_MAX_JITTER_NS = 2**31 - 1  # sch_netem caps jitter at INT_MAX ns

ROOT_HANDLE = "1:"  # prio: band 1:1 unshaped (what is not IPv4), band 1:2 the link
SHAPED_CLASS = "1:2"
NETEM_HANDLE = "2:"
NETEM_CLASS = "2:1"
TBF_HANDLE = "10:"
#: prio's map from a packet's priority to a band: all to the first (unshaped); the filter picks IPv4 out
PRIOMAP = ["0"] * 16

ErrorKind = Literal["ok", "no-netem", "syntax"]


@dataclass(frozen=True)
class NetemPlan:
    """The commands to run in order after `clear_commands()` (each starts with "tc" and must succeed), and
    human-readable remarks on the choices made."""

    commands: list[list[str]]
    notes: list[str]


class NetemUnsupported(UsageError):
    """The link uses a feature static netem cannot emulate (exit 2)."""


def plan(link: Link, client_if: str, server_if: str, path_delay_s: tuple[float, float] = (0.0, 0.0)) -> NetemPlan:
    """The tc commands that make the router's egress behave like `link`, to run after `clear_commands()`;
    only impaired directions get commands. `path_delay_s` = (downlink, uplink) delay the lab's own path adds
    (subtracted from netem's delay). Raises NetemUnsupported for what netem cannot do."""
    _check_interfaces(client_if, server_if)
    problems = _unsupported(link)
    if problems:
        name, why = problems[0]
        raise NetemUnsupported(f"netem backend cannot emulate {name} ({why}): use --shaper linkem")
    commands: list[list[str]] = []
    notes: list[str] = []
    for (name, dev, d, seed), path in zip(_directions(link, client_if, server_if), path_delay_s, strict=True):
        if not _impaired(d):
            notes.append(f"{name} ({dev}): no impairment, no netem (the interface keeps its default qdisc)")
            continue
        cmds, why = _direction_commands(name, dev, d, seed, link.queue_limit_bytes(d), path)
        commands += cmds
        notes += why
    if any(_impaired(d) for _, _, d, _ in _directions(link, client_if, server_if)):
        notes.append("seeds: netem's PRNG differs from linkem's, so the same seed gives the same loss and "
                     "jitter distributions but not the same drop positions (seed needs Linux 6.6+)")
    return NetemPlan(commands=commands, notes=notes)


def netem_seed(seed: int, direction: Literal["downlink", "uplink"]) -> int:
    """The seed netem gets for one direction of a link seeded `seed`: splitmix64's first (downlink) or second
    (uplink) output from state `seed`, so that every seed, small ones included, starts the kernel's unwarmed
    generator from well-mixed bits (see the module docstring, Randomness)."""
    z = (seed + (1 if direction == "downlink" else 2) * _SPLITMIX_GAMMA) % SEED_MODULUS
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % SEED_MODULUS
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % SEED_MODULUS
    return z ^ (z >> 31)


def clear_commands(client_if: str, server_if: str) -> list[list[str]]:
    """Delete both root qdiscs (back to the default qdisc). With nothing installed they fail ("Error: Cannot
    delete qdisc with handle of zero."): the caller ignores errors of these."""
    return [["tc", "qdisc", "del", "dev", dev, "root"] for dev in (client_if, server_if)]


def apply_script(commands: list[list[str]], client_if: str, server_if: str, *, kernel_path: bool = False) -> str:
    """One bash script (one `docker exec` in the router, where a command each was 3-7 execs per run: in an emulated VM
    every exec is costly) that applies a plan: the kernel path first if asked (`quiclab-router path kernel`), then
    `clear_commands()` (errors ignored), then every command, stopping at the first that fails with tc's own error
    and the failing command on stderr, and its exit code."""
    lines = ['step() { "$@" && return; c=$?; echo "for: $*" >&2; exit "$c"; }']
    if kernel_path:
        lines.append("step quiclab-router path kernel")
    lines += [f"{shlex.join(cmd)} 2>/dev/null || :" for cmd in clear_commands(client_if, server_if)]
    lines += [f"step {shlex.join(cmd)}" for cmd in commands]
    return "\n".join(lines) + "\n"


def unsupported_features(link: Link) -> list[str]:
    """The fields netem cannot emulate, e.g. ["downlink.outage", "uplink.rate_schedule"]; [] if none."""
    return [name for name, _ in _unsupported(link)]


def probe_command(dev: str) -> list[str]:
    """A harmless netem qdisc (on a dummy interface) whose error tells whether the kernel has netem."""
    return ["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms"]


# Printed by tc when its own parsing fails (q_netem.c, q_tbf.c, tc_util.c / utils.c).
_SYNTAX_MARKERS = (
    "illegal", "usage:", "parse error", "what is", "invalid", "requires", "required", "mandatory",
    "not allowed", "duplicate", "unknown parameter", "unknown loss parameter", "no distribution data",
    "specified but", "not possible", "too large", "tbf:", "garbage",
)
# Printed after tc parsed the line successfully and the kernel has no sch_netem. Seen on a kernel with tbf but
# without netem: "Error: Specified qdisc kind is unknown." for the netem line and "Error: Failed to find
# specified qdisc." for the tbf child (its netem parent could not be created). Older kernels say "Specified
# qdisc not found" or only "RTNETLINK answers: No such file or directory"; "Unknown qdisc" is tc's own
# message for a qdisc kind it has no parser for.
_NO_NETEM_MARKERS = (
    "specified qdisc kind is unknown", "specified qdisc not found", "unknown qdisc",
    "rtnetlink answers: no such file or directory", "failed to find specified qdisc",
)


def classify_tc_error(stderr: str) -> ErrorKind:
    """What a tc command's stderr means: "ok" (nothing, or only warnings), "no-netem" (the line parsed but the
    kernel lacks netem), "syntax" (tc rejected the line). Any other failure is reported as "syntax" too: the
    line did not go through and missing netem does not explain it."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    text = "\n".join(lines).lower()
    if not lines or all(ln.lower().startswith("warning:") for ln in lines):
        return "ok"
    if any(m in text for m in _SYNTAX_MARKERS):
        return "syntax"
    if any(m in text for m in _NO_NETEM_MARKERS):
        return "no-netem"
    return "syntax"


def _check_interfaces(client_if: str, server_if: str) -> None:
    if not client_if or not server_if or client_if == server_if:
        raise ValueError(f"need two distinct interfaces, got {client_if!r} and {server_if!r}")


def _directions(link: Link, client_if: str, server_if: str) -> list[tuple[str, str, Direction, int]]:
    return [
        ("downlink", client_if, link.downlink, netem_seed(link.seed, "downlink")),
        ("uplink", server_if, link.uplink, netem_seed(link.seed, "uplink")),
    ]


def _unsupported(link: Link) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, d in (("downlink", link.downlink), ("uplink", link.uplink)):
        if d.outage is not None and d.outage.down_s > 0:
            out.append((f"{name}.outage", "periodic outages"))
        if d.rate_schedule is not None:
            out.append((f"{name}.rate_schedule", "a time-varying rate"))
        if d.trace_ms is not None:
            out.append((f"{name}.trace_ms", "a mahimahi delivery trace"))
        if _ns(d.jitter_s) > NETEM_MAX_JITTER_NS:
            out.append((f"{name}.jitter_s", "jitter above 2.147 s, netem caps it at 2^31-1 ns"))
        if d.loss_after.mean > 0:
            out.append((f"{name}.loss_after", "loss after the link, netem's loss acts before its queue"))
        if d.jitter_interval_s is not None:
            out.append((f"{name}.jitter_interval_s", "a delay process in time, netem draws jitter per packet"))
        if d.rate_bps is not None and d.overhead_bytes < 0:
            out.append((f"{name}.overhead_bytes", "a negative overhead, tbf's is unsigned"))
        if isinstance(d.qdisc, Pie) and abs(d.qdisc.max_burst_s - 0.150) > 1e-9:
            out.append((f"{name}.qdisc.max_burst_s", "a PIE burst allowance other than Linux's fixed 150 ms"))
    if link.keep_state:
        out.append(("keep_state", "continuing random streams, netem's qdiscs are replaced at every change"))
    return out


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _impaired(d: Direction) -> bool:
    return (d.rate_bps is not None or _us(d.delay_s) > 0 or _us(d.jitter_s) > 0 or d.loss.mean > 0
            or d.duplicate > 0 or d.corrupt > 0 or d.slot is not None)


def _direction_commands(name: str, dev: str, d: Direction, seed: int, queue_bytes: int | None, path_delay_s: float
                        ) -> tuple[list[list[str]], list[str]]:
    limit, limit_why = _netem_limit(d, queue_bytes)
    netem, notes = _netem_args(d, seed, path_delay_s)
    notes = [f"{name} ({dev}): {n}" for n in [f"netem limit {limit} packets ({limit_why})", *notes]]
    cmds = [["tc", "qdisc", "replace", "dev", dev, "root", "handle", ROOT_HANDLE, "prio", "bands", "2",
             "priomap", *PRIOMAP],
            ["tc", "filter", "add", "dev", dev, "parent", ROOT_HANDLE, "protocol", "ip", "prio", "1", "matchall",
             "classid", SHAPED_CLASS],
            ["tc", "qdisc", "replace", "dev", dev, "parent", SHAPED_CLASS, "handle", NETEM_HANDLE, "netem",
             "limit", str(limit), *netem]]
    if d.rate_bps is not None:
        burst = _tbf_burst(d.rate_bps)
        queue, queue_why = _queue_bytes(d, queue_bytes)
        size = (["overhead", str(d.overhead_bytes)] if d.overhead_bytes else []) + (
            ["mpu", str(d.mpu_bytes)] if d.mpu_bytes else [])
        cmds.append(["tc", "qdisc", "replace", "dev", dev, "parent", NETEM_CLASS, "handle", TBF_HANDLE, "tbf",
                     "rate", f"{d.rate_bps}bit", "burst", str(burst), "limit", str(queue), *size])
        notes.append(f"{name} ({dev}): tbf burst {burst} bytes (max(2 frames, 1 ms at the rate)), "
                     f"limit {queue} bytes ({queue_why}); tbf counts 14-byte Ethernet headers too")
        child, why = queue_commands(dev, TBF_HANDLE, d, d.queue_packets, queue_bytes)
        cmds += child
        notes += [f"{name} ({dev}): {n}" for n in why]
    return cmds, notes


def _netem_args(d: Direction, seed: int, path_delay_s: float = 0.0) -> tuple[list[str], list[str]]:
    args: list[str] = []
    notes: list[str] = []
    delay_us, jitter_us = max(0, _us(d.delay_s) - _us(path_delay_s)), _us(d.jitter_s)
    if path_delay_s > 0:
        notes.append(f"delay {delay_us} us: {_us(d.delay_s)} us minus the lab's own path ({_us(path_delay_s)} us)")
    if jitter_us > 0:
        if d.jitter_dist != "uniform" and delay_us == 0:
            delay_us = 1
            notes.append("delay 1 us instead of 0: netem takes a jitter distribution only with a delay")
        args += ["delay", f"{delay_us}us", f"{jitter_us}us"]
        if d.jitter_dist != "uniform":  # netem's jitter without a table is uniform in [delay-j, delay+j)
            args += ["distribution", d.jitter_dist]
    elif delay_us > 0:
        args += ["delay", f"{delay_us}us"]
    args += _loss_args(d.loss)
    if d.loss_ecn and d.loss.mean > 0:
        args += ["ecn"]
    if d.duplicate > 0:
        args += ["duplicate", _pct(d.duplicate)]
    if d.corrupt > 0:
        args += ["corrupt", _pct(d.corrupt)]
    if d.reorder_prob > 0:
        args += ["reorder", _pct(d.reorder_prob), "gap", str(d.reorder_gap)]
    if d.slot is not None:
        args += _slot_args(d.slot.delay_s, d.slot.jitter_s, d.slot.dist, d.slot.packets, d.slot.bytes)
    if jitter_us > 0 and not d.reorder:
        args += ["rate", f"{ORDER_KEEPING_RATE_BPS}bit"]
        notes.append(f"netem rate {ORDER_KEEPING_RATE_BPS}bit keeps packets in order despite jitter "
                     "(per-packet jitter held in order: the mean delay grows with the packet rate, unlike linkem's)")
    args += ["seed", str(seed)]
    return args, notes


def _slot_args(delay_s: float, jitter_s: float, dist: JitterDist, packets: int | None, nbytes: int | None
               ) -> list[str]:
    if dist == "uniform" or jitter_s == 0:
        lo, hi = max(0, _us(delay_s - jitter_s)), _us(delay_s + jitter_s)
        args = ["slot", f"{lo}us", f"{hi}us"]
    else:
        args = ["slot", "distribution", dist, f"{_us(delay_s)}us", f"{_us(jitter_s)}us"]
    if packets is not None:
        args += ["packets", str(packets)]
    if nbytes is not None:
        args += ["bytes", str(nbytes)]
    return args


def _loss_args(loss: Loss) -> list[str]:
    if loss.mean <= 0:
        return []
    if isinstance(loss, Bernoulli):
        return ["loss", "random", _pct(loss.p)]
    if isinstance(loss, GilbertElliott):
        # tc's `loss gemodel p r 1-h 1-k`: "1-h" is the loss probability in the bad state, "1-k" in the good
        # one (see the module docstring).
        return ["loss", "gemodel", _pct(loss.p), _pct(loss.r), _pct(loss.loss_bad), _pct(loss.loss_good)]
    return []


def _pct(p: float) -> str:
    """A probability as tc's percent: 0.01 -> "1%"; 8 decimals is finer than netem's 2^-32 resolution."""
    return f"{p * 100:.8f}".rstrip("0").rstrip(".") + "%"


def _tbf_burst(rate_bps: int) -> int:
    return min(U32_MAX, max(TBF_MIN_BURST_BYTES, math.ceil(rate_bps / 8 * TBF_BURST_S)))


def _queue_bytes(d: Direction, queue_bytes: int | None) -> tuple[int, str]:
    limits: list[tuple[int, str]] = []
    if d.queue_packets is not None:
        limits.append((d.queue_packets * QUEUE_PACKET_BYTES, f"{d.queue_packets} packets x 1500 bytes"))
    if queue_bytes is not None:
        given = "as given" if d.queue_bytes is not None else (
            f"{d.queue_bdp:g} x the path's BDP" if d.queue_bdp is not None else "one BDP of the path, the default")
        limits.append((queue_bytes, given))
    if not limits:
        raise ValueError("a queue limit needs a rate")
    n, why = min(limits)
    return min(n, U32_MAX), why


def _netem_limit(d: Direction, queue_bytes: int | None) -> tuple[int, str]:
    rate = d.peak_rate_bps or UNLIMITED_RATE_BPS
    slot_s = 0.0 if d.slot is None else d.slot.delay_s + NETEM_MAX_SIGMAS * d.slot.jitter_s
    hold_s = d.delay_s + NETEM_MAX_SIGMAS * d.jitter_s + slot_s
    in_delay_line = NETEM_LIMIT_HEADROOM * rate / 8 * hold_s / NETEM_AVG_PACKET_BYTES * (1 + d.duplicate)
    in_queue = _queue_bytes(d, queue_bytes)[0] / MIN_FRAME_BYTES if d.rate_bps is not None else 0.0
    limit = min(U32_MAX, max(NETEM_MIN_LIMIT, math.ceil(in_delay_line + in_queue)))
    parts = ["never the drop point: 2x the delay line in 500-byte packets"]
    if d.rate_bps is not None:
        parts.append(" + the tbf queue in 64-byte frames")
    parts.append(f", at least {NETEM_MIN_LIMIT}")
    if not d.peak_rate_bps:
        parts.append("; rate unlimited: 10 Gbit/s assumed")
    return limit, "".join(parts)
