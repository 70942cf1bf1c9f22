"""The measurement folder: what `quiclab probe` read from a user's files, as one JSON file (measurements.json)
validated at both ends (written by probe, read by calibrate).

Times are seconds; rates bit/s. A flow's times count from its own start. What each input form can and cannot tell
is written beside the data (`can_tell`, `cannot_tell`), in words a user reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lab.errors import UsageError, validation_line

FILE = "measurements.json"
VERSION = 1

InputKind = Literal["pcap", "ping", "irtt", "iperf3", "flent", "trace"]
Way = Literal["down", "up"]
IdleKind = Literal["ping", "irtt", "flent", "handshake"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Input(_Strict):
    file: str           # as given on the command line
    kind: InputKind
    note: str = ""      # e.g. "2 TCP downloads", "iperf3 cubic, reverse (download)"


class Flow(_Strict):
    """One bulk transfer over the path: a TCP download in a pcap, an iperf3 run, a flent TCP series."""

    source: str                          # the input file it came from
    label: str                           # what it was: "tcp 10.0.0.2:443 > 10.0.0.1:51514", "iperf3 cubic"
    direction: Way = "down"              # down: towards the user (the measured side received)
    cc: str | None = None                # the sender's congestion control, when the input says it
    duration_s: float = Field(ge=0)
    bytes: int = Field(ge=0)             # payload delivered
    #: delivery rate: (start_s, end_s, bit/s) per interval, in time order
    rate: list[tuple[float, float, float]] = []
    #: RTT samples under this flow's load: (t_s, rtt_s)
    rtt: list[tuple[float, float]] = []
    retransmits: int | None = None       # None: the input does not say
    #: when retransmitted data was seen (one entry per retransmitted segment; interval midpoints for iperf3)
    retransmit_times_s: list[float] | None = None
    segments: int | None = None          # data segments received (None: unknown; estimated from bytes)
    #: the TCP connection's (sender's port, receiver's port), when the input says it: a capture of an iperf3
    #: download and that download's file are one flow (probe joins them)
    ports: tuple[int, int] | None = None
    #: what the link delivered, packet by packet: (t_s, IP bytes) of every data packet as captured at the
    #: receiver's side, retransmissions included (a capture's flows; the rate trace's finest record)
    arrivals: list[tuple[float, int]] | None = None
    #: where the link's queue stood empty though nothing arrived (t_start_s, t_end_s): the sender had sent nothing
    #: (its ACKs held up on a stalled uplink, an application pause), so the capture cannot tell the link's rate there
    #: (from the TCP timestamps: the first packet after such a gap went through an empty queue)
    unseen: list[tuple[float, float]] | None = None


class IdleRtt(_Strict):
    source: str                          # the input file
    kind: IdleKind                       # a series, all but handshake (one sample per connection)
    rtt_s: list[float]

    @property
    def series(self) -> bool:
        return self.kind != "handshake"


class TraceInput(_Strict):
    """A recorded capacity of one direction (mahimahi format: one ms timestamp per 1500-byte opportunity)."""

    file: str
    direction: Way = "down"
    trace_ms: list[int]


class Measurements(_Strict):
    version: Literal[1] = VERSION
    inputs: list[Input]
    flows: list[Flow] = []
    traces: list[TraceInput] = []
    #: RTT samples without load, per input: ping, irtt, flent's pings before its load, TCP handshakes
    idle: list[IdleRtt] = []
    can_tell: list[str] = []
    cannot_tell: list[str] = []

    def idle_rtts(self, series_only: bool = False) -> list[float]:
        return [r for i in self.idle if i.series or not series_only for r in i.rtt_s]


def write(folder: Path, m: Measurements) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / FILE
        path.write_text(m.model_dump_json(indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the measurement folder {str(folder)!r}: {e.strerror}") from None
    return path


def read(folder: Path) -> Measurements:
    """A measurement folder (or its measurements.json); errors name the file and what is wrong."""
    path = folder / FILE if folder.is_dir() else folder
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{str(folder)!r} is not a measurement folder: no {FILE} (make one with quiclab probe)"
                         ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not JSON"
        raise UsageError(f"cannot read {str(path)!r}: {why}") from None
    try:
        return Measurements.model_validate(data)
    except ValidationError as e:
        raise UsageError(f"{path!s}: {validation_line(e)}") from None
