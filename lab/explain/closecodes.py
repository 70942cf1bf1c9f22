"""The names of QUIC's and HTTP/3's close codes, for failure texts that carry only the number.

A client that reports "application error 0x105" has told the truth but not the story: the code is HTTP/3's
H3_FRAME_UNEXPECTED (RFC 9114 section 8.1). `named` adds the registered name after each code it knows: RFC 9000
section 20.1 for transport errors (and the CRYPTO_ERROR range 0x100-0x1ff, a TLS alert: RFC 9001 section 4.8), RFC
9114 section 8.1 for HTTP/3 application errors and RFC 9204 section 6 for QPACK's. Unknown codes stay bare."""

from __future__ import annotations

import re

TRANSPORT: dict[int, str] = {
    0x0: "NO_ERROR", 0x1: "INTERNAL_ERROR", 0x2: "CONNECTION_REFUSED", 0x3: "FLOW_CONTROL_ERROR",
    0x4: "STREAM_LIMIT_ERROR", 0x5: "STREAM_STATE_ERROR", 0x6: "FINAL_SIZE_ERROR", 0x7: "FRAME_ENCODING_ERROR",
    0x8: "TRANSPORT_PARAMETER_ERROR", 0x9: "CONNECTION_ID_LIMIT_ERROR", 0xA: "PROTOCOL_VIOLATION",
    0xB: "INVALID_TOKEN", 0xC: "APPLICATION_ERROR", 0xD: "CRYPTO_BUFFER_EXCEEDED", 0xE: "KEY_UPDATE_ERROR",
    0xF: "AEAD_LIMIT_REACHED", 0x10: "NO_VIABLE_PATH",
}

APPLICATION: dict[int, str] = {
    0x100: "H3_NO_ERROR", 0x101: "H3_GENERAL_PROTOCOL_ERROR", 0x102: "H3_INTERNAL_ERROR",
    0x103: "H3_STREAM_CREATION_ERROR", 0x104: "H3_CLOSED_CRITICAL_STREAM", 0x105: "H3_FRAME_UNEXPECTED",
    0x106: "H3_FRAME_ERROR", 0x107: "H3_EXCESSIVE_LOAD", 0x108: "H3_ID_ERROR", 0x109: "H3_SETTINGS_ERROR",
    0x10A: "H3_MISSING_SETTINGS", 0x10B: "H3_REQUEST_REJECTED", 0x10C: "H3_REQUEST_CANCELLED",
    0x10D: "H3_REQUEST_INCOMPLETE", 0x10E: "H3_MESSAGE_ERROR", 0x10F: "H3_CONNECT_ERROR",
    0x110: "H3_VERSION_FALLBACK",
    0x200: "QPACK_DECOMPRESSION_FAILED", 0x201: "QPACK_ENCODER_STREAM_ERROR", 0x202: "QPACK_DECODER_STREAM_ERROR",
}

_CODE = re.compile(r"\b(application|transport) error (0x[0-9a-fA-F]+)\b(?! \()")


def name(kind: str, code: int) -> str | None:
    """The registered name of a close code ("application" or "transport"), None if it has none here."""
    if kind == "transport" and 0x100 <= code <= 0x1FF:
        return f"CRYPTO_ERROR, TLS alert {code - 0x100}"
    return (APPLICATION if kind == "application" else TRANSPORT).get(code)


def named(text: str) -> str:
    """`text` with each "application error 0x..." / "transport error 0x..." followed by its name in brackets."""
    def one(m: re.Match[str]) -> str:
        found = name(m.group(1).lower(), int(m.group(2), 16))
        return f"{m.group(0)} ({found})" if found else m.group(0)
    return _CODE.sub(one, text)
