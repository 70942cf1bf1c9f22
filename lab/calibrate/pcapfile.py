"""Reading a user's capture (pcap or pcapng, as tcpdump, dumpcap or Wireshark write it) into TCP segments, with
dpkt: Ethernet, Linux cooked (v1, v2), raw IP and BSD loopback; IPv4 and IPv6. Only what the calibration needs of a
segment is kept (lab/calibrate/tcpflows.py groups them into connections). Errors name the file."""

from __future__ import annotations

import gzip
import io
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dpkt

from lab.errors import UsageError

PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d"}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_RAW = {12, 14, 101, 228, 229}  # raw IP (DLT_RAW's numbers, LINKTYPE_RAW, LINKTYPE_IPV4/IPV6)
_LINKTYPES = {dpkt.pcap.DLT_EN10MB, dpkt.pcap.DLT_LINUX_SLL, 276, dpkt.pcap.DLT_NULL, *_RAW}
SYN, ACK, FIN, RST = 0x02, 0x10, 0x01, 0x04


@dataclass(frozen=True)
class Segment:
    t: float
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    payload: int               # payload bytes on the wire (from the IP length: a short snap length does not matter)
    tsval: int | None = None   # TCP timestamps option (RFC 7323), when present
    tsecr: int | None = None
    mss: int | None = None     # the MSS option (SYNs)
    wire: int = 0              # the IP packet's bytes (headers included): what it took of the link


def is_capture(head: bytes) -> bool:
    return head[:4] in PCAP_MAGICS or head[:4] == PCAPNG_MAGIC


GZIP_MAGIC = b"\x1f\x8b"


def is_gzipped_capture(raw: bytes) -> bool:
    """A gzipped pcap or pcapng (`tcpdump -w - | gzip`): a capture kept smaller (a headers-only
    capture of a 24 Mbit/s download: 2.4 times)."""
    if raw[:2] != GZIP_MAGIC:
        return False
    try:
        return is_capture(gzip.GzipFile(fileobj=io.BytesIO(raw)).read(4))
    except (OSError, EOFError):
        return False


def _opened(path: Path) -> Any:
    with path.open("rb") as f:
        gzipped = f.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if gzipped else path.open("rb")


def read_segments(path: Path) -> tuple[int, list[Segment]]:
    """(packets in the file, its TCP segments). A file that is not a capture, or that dpkt cannot read, is a
    UsageError naming it."""
    name = str(path)
    try:
        with _opened(path) as f:
            head = f.read(4)
            if not head:
                raise UsageError(f"{name}: empty file: no capture in it (expected a pcap or pcapng of a download)")
            if not is_capture(head):
                raise UsageError(f"{name}: not a pcap or pcapng capture (its first bytes are {head.hex()})")
            f.seek(0)
            reader: Any = dpkt.pcapng.Reader(f) if head == PCAPNG_MAGIC else dpkt.pcap.Reader(f)
            linktype = reader.datalink()
            if linktype not in _LINKTYPES:
                raise UsageError(f"{name}: unsupported link type {linktype} (Ethernet, Linux cooked, raw IP and "
                                 "loopback are read)")
            packets = 0
            out: list[Segment] = []
            for ts, buf in reader:
                packets += 1
                seg = _segment(float(ts), buf, linktype)
                if seg is not None:
                    out.append(seg)
    except (EOFError, gzip.BadGzipFile) as e:
        raise UsageError(f"{name}: a gzipped capture cut short or damaged ({e})") from None
    except OSError as e:
        raise UsageError(f"cannot read {name!r}: {e.strerror}") from None
    except (ValueError, struct.error, dpkt.UnpackError) as e:
        raise UsageError(f"{name}: not a readable capture ({' '.join(str(e).split()) or type(e).__name__})"
                         ) from None
    return packets, out


def _network(buf: bytes, linktype: int) -> Any:
    """The IP packet of one frame (None when it is not IP or the link type is not one read here)."""
    if linktype == dpkt.pcap.DLT_EN10MB:
        return dpkt.ethernet.Ethernet(buf).data
    if linktype == dpkt.pcap.DLT_LINUX_SLL:
        return dpkt.sll.SLL(buf).data
    if linktype == 276:  # LINKTYPE_LINUX_SLL2
        return dpkt.sll2.SLL2(buf).data
    if linktype == dpkt.pcap.DLT_NULL:
        return dpkt.loopback.Loopback(buf).data
    if linktype in _RAW and buf:
        return dpkt.ip6.IP6(buf) if buf[0] >> 4 == 6 else dpkt.ip.IP(buf)
    return None


def _segment(t: float, buf: bytes, linktype: int) -> Segment | None:
    try:
        ip = _network(buf, linktype)
    except (dpkt.UnpackError, struct.error, IndexError):
        return None
    if isinstance(ip, dpkt.ip.IP):
        header, length = ip.hl * 4, ip.len
        src, dst = _addr(ip.src), _addr(ip.dst)
    elif isinstance(ip, dpkt.ip6.IP6):
        header, length = 40, 40 + ip.plen if ip.plen else 0  # (extension headers: in plen; rare before TCP)
        src, dst = _addr(ip.src), _addr(ip.dst)
    else:
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None
    # (an IP length of 0: a capture at the sender with segmentation offload; the frame is the packet)
    payload = max(0, length - header - tcp.off * 4) if length > header else len(tcp.data)
    tsval = tsecr = mss = None
    try:
        options = dpkt.tcp.parse_opts(tcp.opts)
    except (dpkt.UnpackError, struct.error, IndexError):
        options = []
    for kind, data in options:
        if kind == dpkt.tcp.TCP_OPT_TIMESTAMP and len(data) == 8:
            tsval, tsecr = struct.unpack("!II", data)
        elif kind == dpkt.tcp.TCP_OPT_MSS and len(data) == 2:
            mss = struct.unpack("!H", data)[0]
    wire = length if length > header else header + len(tcp)
    return Segment(t, (src, tcp.sport), (dst, tcp.dport), tcp.seq, tcp.ack, tcp.flags, payload, tsval, tsecr, mss,
                   wire)


def _addr(raw: bytes) -> str:
    if len(raw) == 4:
        return ".".join(str(b) for b in raw)
    return ":".join(raw[i:i + 2].hex() for i in range(0, len(raw), 2))
