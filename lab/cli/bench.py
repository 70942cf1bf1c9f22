from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from lab import config, lab, signals, terminal
from lab.bench.host import MAX_STEAL_PCT, HostTiming
from lab.errors import UsageError
from lab.sizes import parse_size


def register(app: typer.Typer) -> None:
    @app.command()
    def bench(
        what: Annotated[str, typer.Argument(help="What to benchmark: link (the emulator), overhead (the lab's "
                                                 "per-run cost around small transfers), parallel (one plan "
                                                 "over 1, 2, 3, 4 labs), startup (launch to a sweep's "
                                                 "first run) or calibrate (the lab search against hidden links on "
                                                 "another lab).")] = "link",
        seconds: Annotated[float, typer.Option(help="Duration of each measurement.")] = 5.0,
        rounds: Annotated[int, typer.Option(help="Forwarding rounds: kernel, linkem (and linkem with threaded NAPI "
                                                 "when the router has it), in rotating order; for "
                                                 "overhead: rounds of one sweep per path (agent, agent-nospare, "
                                                 "exec).")] = 3,
        size: Annotated[str, typer.Option(help="overhead: object size.")] = "10kB",
        repeats: Annotated[int, typer.Option(help="overhead: repeats per protocol in each sweep.")] = 10,
        preset: Annotated[str, typer.Option(help="parallel: the plan swept with each number of labs.")]
        = "parallel-check",
        labs: Annotated[str, typer.Option(help="parallel: the --parallel values swept in turn (N or auto), "
                                               "including 1.")] = "1,2,3,4",
        against: Annotated[Path | None, typer.Option(help="parallel: judge every sweep against this committed "
                                                          "sweep folder too (quiclab compare's verdicts).")] = None,
        sweeps: Annotated[int, typer.Option(help="startup: sweeps in a row (the first measures the start-up "
                                                 "facts, the others reuse them).")] = 4,
        links: Annotated[int, typer.Option(help="calibrate: hidden links (the LTE trace pairs first).")] = 10,
        hidden_lab: Annotated[int | None, typer.Option(help="calibrate: the lab number holding the hidden links "
                                                            "(up, not this one).")] = None,
        seed: Annotated[int, typer.Option(help="calibrate: seed of the hidden links' draw.")] = 35,
        budget: Annotated[int, typer.Option(help="calibrate: candidate links per search.")] = 30,
        parallel: Annotated[str, typer.Option(help="calibrate: labs at once: 1 (the hidden lab measures, this lab "
                                                   "calibrates), N >= 2 (this lab, the hidden lab and N-2 free "
                                                   "ones, each measuring and calibrating, never a link on the lab "
                                                   "that measured it) or auto (quiclab sweep --parallel's rule over "
                                                   "the hidden links' rates).")] = "1",
        resume: Annotated[Path | None, typer.Option(help="calibrate: continue this benchmark folder (its own "
                                                         "seed, links and budget): the links not scored yet.")]
        = None,
    ) -> None:
        """Benchmark the link emulator, the per-run overhead, parallel labs, the start-up or the calibration
        (results/bench/; see docs/benchmarks.md, docs/calibrate.md)."""
        if what == "overhead":
            _overhead(size, rounds, repeats)
            return
        if what == "parallel":
            _parallel(preset, labs, against)
            return
        if what == "startup":
            _startup(sweeps)
            return
        if what == "calibrate":
            _calibrate(links, hidden_lab, seed, budget, parallel, resume)
            return
        if what != "link":
            raise UsageError(f"unknown benchmark {what!r}: allowed are link, overhead, parallel, startup, "
                             "calibrate")
        if not 1 <= seconds <= 120:
            raise UsageError(f"invalid --seconds {seconds:g}: allowed is 1..120")
        if not 1 <= rounds <= 20:
            raise UsageError(f"invalid --rounds {rounds}: allowed is 1..20")
        from lab.bench import link as link_bench  # numpy: only when the benchmark runs

        lab.require_up()
        with terminal.status("benchmarking the link (kernel vs linkem, rate accuracy, delay under load)"):
            r = link_bench.run(seconds, rounds)
        rows = [[f"forwarding round {i + 1}: kernel / linkem{threaded} Gbit/s (ratio{threaded}, CPU steal)",
                 f"{p['kernel_gbps']:.2f} / {p['linkem_gbps']:.2f}"
                 + (f" / {p['threaded_gbps']:.2f}" if p["threaded_gbps"] is not None else "")
                 + f" ({p['ratio']:.2f}"
                 + (f" / {p['threaded_ratio']:.2f}" if p["threaded_ratio"] is not None else "")
                 + f", {p['steal_pct']:.0f} %)"]
                for i, p in enumerate(r.capacity_pairs)
                for threaded in [" / threaded NAPI" if p["threaded_gbps"] is not None else ""]]
        used = f"median of {r.capacity_pairs_used} of {len(r.capacity_pairs)} rounds"
        rows += [[f"unshaped forwarding, kernel only ({used})", f"{r.kernel_gbps:.2f} Gbit/s"],
                 [f"unshaped forwarding, through linkem ({used})", f"{r.linkem_gbps:.2f} Gbit/s"],
                 [f"linkem / kernel ({used})", f"{r.linkem_vs_kernel:.2f}"]]
        if r.threaded_gbps is not None and r.threaded_vs_kernel is not None:
            rows += [[f"unshaped forwarding, linkem + threaded NAPI ({used})", f"{r.threaded_gbps:.2f} Gbit/s"],
                     [f"linkem + threaded NAPI / kernel ({used})", f"{r.threaded_vs_kernel:.2f}"]]
        for name, a in r.rate_accuracy.items():
            rows.append([f"rate {name}: TCP goodput / configured", f"{a['goodput_ratio']:.3f}"])
            rows.append([f"rate {name}: IP wire rate / configured", f"{a['wire_ratio']:.3f}"])
        for label, d in (("", r.delay_error_ms), (" threaded NAPI", r.delay_error_threaded_ms)):
            if d is not None:
                rows.append([f"delay error{label}, {d['load']} (RTT {d['configured_rtt_ms']:g} ms) p50 / p99 / max",
                             f"{d['p50']:.3f} / {d['p99']:.3f} / {d['max']:.3f} ms"])
        for when, h in (("before", r.host_before), ("after", r.host_after)):
            rows.append([f"host {when}: 1 ms timer lateness p90 / CPU steal",
                         f"{h['late_p90_ms']:.2f} ms / {h['steal_pct']:.0f} %"])
        terminal.table("link emulator benchmark", ["measure", "value"], rows, right=["value"])
        terminal.info(f"router as found: forwarding {r.forwarding}"
                      + (f"; threaded NAPI not measured: {r.threaded_not_measured}" if r.threaded_not_measured
                         else "; every linkem figure measured with and without threaded NAPI, in turn"))
        if all(p["steal_pct"] > MAX_STEAL_PCT for p in r.capacity_pairs):
            terminal.warning(f"the hypervisor took over {MAX_STEAL_PCT:.0f} % of the CPU during every forwarding pair: "
                             "the capacity figures show the host as much as the emulator")
        if not all(HostTiming(**h).precise for h in (r.host_before, r.host_after)):
            terminal.warning("this host's timers were late (hypervisor CPU steal): the figures above show the host, "
                             "not the emulator; run the benchmark again when the host is quiet")
        out = config.ROOT / "results" / "bench" / f"link-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(r.to_json())
        terminal.success(f"written {out.relative_to(config.ROOT)}")


def _overhead(size: str, rounds: int, repeats: int) -> None:
    from lab.bench import overhead

    parse_size(size)
    if not 1 <= rounds <= 10:
        raise UsageError(f"invalid --rounds {rounds}: allowed is 1..10")
    if not 1 <= repeats <= 100:
        raise UsageError(f"invalid --repeats {repeats}: allowed is 1..100")
    lab.require_up()
    with terminal.status(f"per-run overhead: {len(overhead.MODES) * rounds} sweeps of {size} objects, "
                         f"{', '.join(overhead.MODES)} in turn"):
        rows = overhead.run(size, repeats, rounds)
        start = overhead.client_start()
    terminal.table(f"per-run overhead, {size} objects, 20 ms RTT, 100 Mbit/s, h1/h2/h3 x {repeats}",
                   ["path", "runs ok", "overhead median ms", "p90 ms", "transfers s", "runs span s",
                    "span / transfers", "command s", "CPU steal %"],
                   [[r.mode, f"{r.ok}/{r.runs}", f"{r.overhead_median_ms:.1f}", f"{r.overhead_p90_ms:.1f}",
                     f"{r.transfers_s:.2f}", f"{r.span_s:.2f}", f"{r.span_over_transfers:.2f}",
                     f"{r.command_s:.1f}", f"{r.steal_pct:.0f}"] for r in rows],
                   right=["overhead median ms", "p90 ms", "transfers s", "runs span s", "span / transfers",
                          "command s", "CPU steal %"])
    terminal.info(f"of which the client's own start: a curl process (curl --version through the agent) "
                  f"{start.curl_version_ms:.1f} ms, a command through the agent (true) {start.agent_true_ms:.1f} ms "
                  f"(medians of {start.n}); a run uses one curl process, as a fresh client per run requires "
                  f"(agent: started before its run, waiting for its options)")
    out = config.ROOT / "results" / "bench" / f"overhead-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(overhead.to_json(rows, start))
    terminal.success(f"written {out.relative_to(config.ROOT)}")


def _parallel(preset: str, labs: str, against: Path | None) -> None:
    from lab.bench import parallel  # numpy (the verdicts): only when the benchmark runs
    from lab.plan import presets

    counts = parallel.parse_labs(labs)
    preset = presets.resolve(preset)  # an unknown preset: the sweep's own one-line error, before any lab work
    if against is not None and not (against / "runs.csv").is_file():
        raise UsageError(f"invalid --against {str(against)!r}: allowed is a sweep folder (with runs.csv)")
    lab.require_up()
    stamp = f"{dt.datetime.now():%Y%m%d-%H%M%S}"
    out = config.ROOT / "results" / "bench" / f"parallel-{stamp}"
    terminal.info(f"{preset} with --parallel {', '.join(counts)} in turn -> {out}")
    figures = parallel.run(counts, out, preset, against)
    one = parallel.baseline(figures)
    rows = [[f.label, f"{f.wall_s:.0f}", f"{f.wall_s / one.wall_s:.2f}", f"{f.ok}/{f.runs}",
             str(f.host_bound_attempts), f.points_equivalent or "-", f.vs_one or "-",
             f.vs_reference or "-"] for f in figures]
    terminal.table(f"{preset}: one plan over N labs, side by side",
                   ["labs", "wall s", "x N=1", "ok", "host-bound set aside", "points equivalent to N=1",
                    "verdicts vs N=1", f"verdicts vs {against}" if against else "vs a reference"], rows,
                   right=["wall s", "x N=1"])
    (out / "parallel.json").write_text(parallel.to_json(figures))
    terminal.success(f"written {out.relative_to(config.ROOT)}/parallel.json")


def _startup(sweeps: int) -> None:
    from lab.bench import startup

    if not 2 <= sweeps <= 20:
        raise UsageError(f"invalid --sweeps {sweeps}: allowed is 2..20")
    lab.require_up()
    out = config.ROOT / "results" / "bench" / f"startup-{dt.datetime.now():%Y%m%d-%H%M%S}"
    with terminal.status(f"start-up: {sweeps} sweeps of `quiclab sweep {startup.PRESET}` in a row (the cached "
                         "start-up facts cleared first)"):
        figures = startup.run(out, sweeps)
    terminal.table("launch to a sweep's first run", ["sweep", "start-up facts", "launch to first run s"],
                   [[str(f.sweep), "reused (cache)" if f.reused else "measured", f"{f.first_run_s:.2f}"]
                    for f in figures], right=["launch to first run s"])
    (out / "startup.json").write_text(startup.to_json(figures))
    terminal.success(f"written {out.relative_to(config.ROOT)}/startup.json")


def _calibrate(links: int, hidden_lab: int | None, seed: int, budget: int, parallel: str,
               resume: Path | None) -> None:
    from lab.bench import calibration, hidden  # numpy (the search): only when the benchmark runs
    from lab.run import parallel as labs_

    if not 1 <= links <= 100:
        raise UsageError(f"invalid --links {links}: allowed is 1..100")
    if not 1 <= budget <= 500:
        raise UsageError(f"invalid --budget {budget}: allowed is 1..500")
    if hidden_lab is None:
        raise UsageError("bench calibrate needs --hidden-lab N: another lab, up (QUICLAB_INSTANCE=N quiclab up), "
                         "that holds the hidden links")
    count = labs_.parse(parallel)
    if resume is not None:
        if not resume.is_dir():
            raise UsageError(f"invalid --resume {resume}: no such folder")
        calibration.load_meta(resume)  # (exit 2 before the lab is touched)
    lab.require_up()
    signals.terminate_as_interrupt()  # SIGTERM stops the benchmark as Ctrl-C does (jobs stopped, labs taken down)
    new = config.ROOT / "results" / "bench" / f"calibrate-{dt.datetime.now():%Y%m%d-%H%M%S}"
    out, drawn, meta, numbers = calibration.start(None if resume else new, resume, links, seed, budget, hidden_lab,
                                                  count, labs_.labs_in_use())
    both = bool(meta["both_roles"])
    n, b = int(meta["links"]), int(meta["budget"])
    left = n - len(calibration.read_scores(out, drawn))
    est = calibration.estimate_s(left, len(numbers) if both else 1, b)
    terminal.info(f"{n} hidden links ({left} to do), labs {', '.join(map(str, numbers))}: "
                  + ("each measures hidden links and calibrates others'" if both else
                     f"lab {hidden_lab} holds the hidden links, lab {config.INSTANCE.number} calibrates")
                  + f"; budget {b} candidates each; about "
                  + (f"{est / 3600:.1f} h" if est >= 3600 else f"{est / 60:.0f} min") + f" -> {_shown(out)}")
    try:
        done = calibration.run(out, drawn, meta, numbers, hidden_lab, both, set(labs_.labs_in_use()),
                               terminal.info)
    except KeyboardInterrupt:  # (raised again after the labs' clean-up)
        done = None
    for e in done.errors if done else []:
        terminal.warning(e)
    if done is None or done.interrupted or done.left:
        scored = len(done.scores) if done else len(calibration.read_scores(out, drawn))
        terminal.warning(f"{scored}/{n} links scored; continue with `uv run quiclab bench calibrate --hidden-lab "
                         f"{hidden_lab} --parallel {parallel} --resume {_shown(out)}`")
        raise typer.Exit(130 if done is None or done.interrupted else 2)
    m = hidden.summarize(done.scores)
    (terminal.success if m.passed else terminal.warning)(
        f"held-out {calibration.HELD_OUT}: throughput error median {m.tput_median:.1%}, worst {m.tput_worst:.1%}; "
        f"p50 RTT error median {m.rtt_median:.1%}: {'passes' if m.passed else 'does not pass: ' + m.why}")
    terminal.success(f"written {_shown(out / calibration.RESULTS)} and {calibration.TABLE}")


def _shown(p: Path) -> str:
    return str(p.relative_to(config.ROOT)) if p.is_relative_to(config.ROOT) else str(p)
