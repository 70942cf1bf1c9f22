from __future__ import annotations

from typing import Annotated

import typer

from lab import lab, lock, terminal
from lab.errors import UsageError
from lab.link import calibrate, describe, napi, shaper
from lab.link.model import Link
from lab.link.spec import parse_assignments, parse_link


def show_link(backend: str, link: Link | str) -> None:
    if isinstance(link, str):
        terminal.line(f"shaper: {backend}\n{link}")
    else:
        terminal.table(f"link in force (shaper: {backend}, seed {link.seed})", describe.COLUMNS, describe.rows(link))
    terminal.info(shaper.calibration_line("linkem" if backend == "linkem" else "netem"))
    if backend == "linkem":
        terminal.info(napi.state().line())


def register(app: typer.Typer) -> None:
    @app.command()
    def shape(
        rate: Annotated[str | None, typer.Option(help="Bottleneck rate, both directions: 5mbit, 1gbit.")] = None,
        delay: Annotated[str | None, typer.Option(help="One-way delay per direction: 40ms.")] = None,
        rtt: Annotated[str | None, typer.Option(help="Round-trip time: sets delay = rtt/2 per direction.")] = None,
        jitter: Annotated[str | None, typer.Option(help="Delay variation: 10ms.")] = None,
        dist: Annotated[str | None, typer.Option(help="Jitter distribution: uniform|normal|pareto|paretonormal.")]
        = None,
        reorder: Annotated[bool | None, typer.Option("--reorder/--keep-order",
                                                     help="Let jitter reorder packets (default: keep order).")]
        = None,
        loss: Annotated[str | None, typer.Option(help="Bernoulli loss: 0.1%, 1%.")] = None,
        ge: Annotated[str | None, typer.Option(help="Gilbert-Elliott loss p,r[,loss_good,loss_bad] in %.")] = None,
        queue: Annotated[str | None, typer.Option(help="Queue limit: 100p or 64kB (default: one BDP).")] = None,
        outage: Annotated[str | None, typer.Option(help="every:down[:offset], e.g. 10s:200ms.")] = None,
        spikes: Annotated[str | None, typer.Option(help="every:duration:percent, e.g. 5s:200ms:10%.")] = None,
        trace: Annotated[str | None, typer.Option(help="mahimahi packet-delivery trace file.")] = None,
        seed: Annotated[str | None, typer.Option(help="Random seed for loss and jitter.")] = None,
        jitter_interval: Annotated[str | None, typer.Option(
            help="With order kept: how long each delay value holds (default 5 x jitter, at least 1 ms).")] = None,
        reorder_prob: Annotated[str | None, typer.Option(
            help="netem reordering: share of packets that skip the delay, e.g. 25% (needs a delay).")] = None,
        reorder_gap: Annotated[str | None, typer.Option(help="... once gap-1 packets went normally (default 1).")]
        = None,
        duplicate: Annotated[str | None, typer.Option(help="Share of packets sent twice: 1%.")] = None,
        corrupt: Annotated[str | None, typer.Option(
            help="Share of packets with one bit flipped (the receiver drops them): 0.1%.")] = None,
        loss_after: Annotated[str | None, typer.Option(
            help="Bernoulli loss after the link (the lost packet used link time): 1%.")] = None,
        ge_after: Annotated[str | None, typer.Option(help="Gilbert-Elliott loss after the link, p,r[,good,bad].")]
        = None,
        loss_ecn: Annotated[bool | None, typer.Option("--loss-ecn/--no-loss-ecn",
                                                      help="Loss marks ECN-capable packets CE instead.")] = None,
        qdisc: Annotated[str | None, typer.Option(
            help="Queue discipline: drop_tail|drop_head|codel|fq_codel|pie[:key=value...], e.g. codel:target=5ms.")]
        = None,
        slot: Annotated[str | None, typer.Option(
            help="netem slots: DELAY[:JITTER[:DIST]][:packets=N][:bytes=SIZE], e.g. 5ms:1ms:packets=8.")] = None,
        overhead: Annotated[str | None, typer.Option(help="Bytes added per packet for the rate (may be < 0).")]
        = None,
        mpu: Annotated[str | None, typer.Option(help="Minimum bytes a packet takes on the link.")] = None,
        keep_state: Annotated[bool, typer.Option(
            "--keep-state", help="Continue the random streams and loss-chain states in force (linkem).")] = False,
        calibrate_now: Annotated[bool, typer.Option(
            "--calibrate", help="Measure the lab's own path again now (it is subtracted from the delays).")] = False,
        down: Annotated[list[str] | None, typer.Option(help="Downlink-only settings: key=value,...")] = None,
        up: Annotated[list[str] | None, typer.Option(help="Uplink-only settings: key=value,...")] = None,
        shaper_name: Annotated[str, typer.Option("--shaper", help="auto, netem or linkem.")] = "auto",
        show: Annotated[bool, typer.Option("--show", help="Print the link in force and change nothing.")] = False,
        clear: Annotated[bool, typer.Option("--clear", help="Remove every impairment.")] = False,
    ) -> None:
        """Set the emulated link at the router (both directions unless --down/--up), or --show it."""
        values = dict(rate=rate, delay=delay, rtt=rtt, jitter=jitter, dist=dist, loss=loss, ge=ge, queue=queue,
                      outage=outage, spikes=spikes, trace=trace, seed=seed)
        values.update(jitter_interval=jitter_interval, reorder_prob=reorder_prob, reorder_gap=reorder_gap,
                      duplicate=duplicate, corrupt=corrupt, loss_after=loss_after, ge_after=ge_after, qdisc=qdisc,
                      slot=slot, overhead=overhead, mpu=mpu)
        common: dict[str, str | bool] = {k: v for k, v in values.items() if v is not None}
        if loss_ecn is not None:
            common["loss_ecn"] = loss_ecn
        if keep_state:
            common["keep_state"] = True
        if reorder is not None:
            common["reorder"] = reorder
        given = [f"--{k}" for k in common] + ["--down"] * bool(down) + ["--up"] * bool(up)
        if show and clear:
            raise UsageError("give either --show or --clear, not both")
        for flag, what in (("--show", "changes nothing"), ("--clear", "removes every impairment")):
            if (show if flag == "--show" else clear) and given:
                raise UsageError(f"{flag} takes no link settings ({flag} {what}): drop {', '.join(given)}")
        if show and shaper_name != "auto":
            raise UsageError(f"--show takes no --shaper (it shows what is in force): drop --shaper {shaper_name}")
        link = parse_link(common, parse_assignments(down or [], "--down"), parse_assignments(up or [], "--up"))
        shaper.check(shaper_name, link)
        nothing_given = not given
        lab.require_up()
        if calibrate_now:
            path = "kernel" if shaper_name == "netem" else "linkem"
            with lock.holding():  # it changes the link for a second
                terminal.info(calibrate.measure(path, restore=True).line())
        if show or (nothing_given and not clear):
            show_link(*shaper.in_force())
            return
        with lock.holding():  # never under a running sweep or transfer
            choice, in_force = shaper.apply(link, shaper_name)
        terminal.info(f"shaper: {choice.backend} ({choice.reason})")
        show_link(choice.backend, in_force)
