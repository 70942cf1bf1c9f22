"""Choose a backend and put a link in force at the router.

`auto` uses tc netem where the kernel has sch_netem and the link needs nothing netem cannot do; otherwise
linkem. Both shape the egress toward each receiver with the same parameter model (lab/link/model.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lab.errors import UsageError
from lab.link import calibrate, linkem, netem, router
from lab.link.model import Link

Backend = Literal["netem", "linkem"]
BACKENDS = ("auto", "netem", "linkem")
#: Link model fields -> the setting a user wrote (lab/link/spec.py), for messages.
_AS_GIVEN = {"outage": "outage", "rate_schedule": "spikes", "trace_ms": "trace", "jitter_s": "jitter"}


@dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str


def check(requested: str, link: Link) -> None:
    """Refuse, without the lab, a shaper name that does not exist or a forced netem for a link netem cannot
    emulate (outage, rate spikes, trace): such a link would pass and then fail every run."""
    if requested not in BACKENDS:
        raise UsageError(f"unknown shaper {requested!r}: allowed are {', '.join(BACKENDS)}")
    missing = netem.unsupported_features(link) if requested == "netem" else []
    if missing:
        named = [_AS_GIVEN.get(m.rpartition(".")[2], m) for m in missing]
        which = [f"{m.partition('.')[0]} {n}" for m, n in zip(missing, named, strict=True)]
        raise UsageError(f"shaper netem cannot emulate {', '.join(which)}: use shaper linkem or auto for this link")


def choose(requested: str, link: Link) -> Choice:
    check(requested, link)
    kernel_netem = router.has_netem()
    if requested == "netem":
        if not kernel_netem:
            raise UsageError("--shaper netem: this kernel has no sch_netem (tc says 'Specified qdisc kind is "
                             "unknown'); use --shaper linkem or auto")
        return Choice("netem", "forced with --shaper netem")
    if requested == "linkem":
        return Choice("linkem", "forced with --shaper linkem")
    if not kernel_netem:
        return Choice("linkem", "the kernel has no sch_netem")
    missing = netem.unsupported_features(link)
    if missing:
        return Choice("linkem", f"netem cannot emulate {', '.join(missing)}")
    return Choice("netem", "the kernel has sch_netem")


def apply(link: Link, requested: str = "auto") -> tuple[Choice, Link]:
    """Put `link` in force; returns the backend used and the link as the backend reports it."""
    choice = choose(requested, link)
    ifs = router.interfaces()
    if choice.backend == "linkem":
        in_force = linkem.apply(link, calibrate.path_delays("linkem"))
        if router.path() != "linkem":  # switching from kernel forwarding (and netem, if it shaped)
            if router.has_netem():
                router.run_script(netem.apply_script([], ifs.client_side, ifs.server_side),
                                  "netem's qdiscs could not be removed")
            router.set_path("linkem")
        return choice, in_force
    plan = netem.plan(link, ifs.client_side, ifs.server_side, calibrate.path_delays("kernel"))
    linkem.apply(Link())  # linkem idles unimpaired while netem shapes (and if the path is switched back)
    router.run_script(netem.apply_script(plan.commands, ifs.client_side, ifs.server_side, kernel_path=True),
                      "netem could not be put in force", path_after="kernel")
    return choice, link


def calibration_line(backend: Backend) -> str:
    """What `quiclab shape --show` says about the lab's own path: as measured, and (linkem) what the link in force
    subtracts, which is nothing if whoever applied it did not calibrate."""
    if not calibrate.enabled():
        return f"lab path: not subtracted ({calibrate.ENV_CALIBRATE}=off)"
    bp = calibrate.load().get("linkem" if backend == "linkem" else "kernel")
    measured = bp.line() if bp is not None else "lab path: not measured yet (the next link applied measures it)"
    if backend != "linkem":
        return measured
    down, up = linkem.path_delays_in_force(linkem.current_json())
    in_force = (f"the link in force subtracts down {down * 1e3:.3f} ms, up {up * 1e3:.3f} ms" if down or up else
                "the link in force subtracts nothing (applied without calibration)")
    return f"{measured}; {in_force}"


def in_force() -> tuple[Backend, Link | str]:
    """What shapes the link now: linkem's config, or netem's qdiscs as tc shows them."""
    if router.path(fresh=True) == "linkem":
        return "linkem", linkem.current()
    ifs = router.interfaces()
    text = "\n".join(router.run("tc", "qdisc", "show", "dev", i).strip() for i in (ifs.client_side, ifs.server_side))
    return "netem", text


def check_netem_syntax(link: Link) -> list[str]:
    """Run netem's command lines for `link` against a scratch interface in the router; return the problems.

    On a kernel without sch_netem tc still parses every option in userspace before the kernel refuses the
    qdisc kind, so a refusal for that reason means the syntax is right. The filter that sends IPv4 to netem is
    not checked here (it needs its prio root in place, and holds no value of the link: the same for every link,
    applied by the VM's netem tests).
    """
    ifs = router.interfaces()
    problems = []
    for cmd in netem.plan(link, ifs.client_side, ifs.server_side).commands:
        if cmd[1] == "filter":
            continue
        args = list(cmd[1:])
        if "parent" in args:  # a child qdisc: check it at the scratch root
            i = args.index("parent")
            args[i:i + 2] = ["root"]
        code, err = router.try_run("quiclab-router", "tc-check", *args)
        verdict = "ok" if code == 0 else netem.classify_tc_error(err)
        if verdict == "syntax":
            problems.append(f"{' '.join(cmd)}: {err}")
    return problems
