from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lab import config, terminal
from lab.errors import QuiclabError
from lab.report.summary import stats_table


def register(app: typer.Typer) -> None:
    @app.command()
    def merge(
        folders: Annotated[list[Path], typer.Argument(help="The shards' sweep folders (`quiclab sweep --shard i/N`).")],
        out: Annotated[Path, typer.Option(help="Where result folders go.")] = config.ROOT / "results",
        partial: Annotated[bool, typer.Option(help="Merge what is there when shards or runs are missing (the "
                                                   "manifest says status partial and what is missing; exit 1).")]
        = False,
    ) -> None:
        """Merge the shards of one sweep into one sweep folder (summary, plots, report from all raw runs)."""
        from lab.report.merge import merge as merge_shards

        m = merge_shards(folders, out, partial)
        rows = [[str(sh.spec), str(sh.folder), f"{len(sh.records)}/{len(sh.planned)}",
                 str(sh.manifest.status or "?"), str(sh.facts().get("hostname")), str(sh.facts().get("kernel")),
                 f"{sh.facts().get('cpu')} x{sh.facts().get('cpus')}", str(sh.facts().get("shaper"))]
                for sh in m.shards]
        terminal.table(f"{m.folder.name}: {m.runs} of {m.planned} planned runs from {len(m.shards)} shards",
                       ["shard", "folder", "runs", "status", "host", "kernel", "CPU", "shaper"], rows)
        for d in m.differences:
            terminal.warning(f"the shards' machines differ: {d}")
        assert m.report is not None  # (a merge always builds its report)
        cols, srows = stats_table(m.report.stats.groups)
        terminal.table(f"{m.folder.name}: transfer time and goodput (median [IQR])", cols, srows, right=cols[2:])
        terminal.line(f"results: {m.folder}/ (summary.md, runs.csv, plots/, report.html)")
        if not m.complete:
            raise QuiclabError(f"partial merge: {'; '.join(m.problems)}")
