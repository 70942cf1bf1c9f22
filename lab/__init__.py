"""quiclab: measure QUIC/HTTP-3 against TCP (HTTP/1.1, HTTP/2) through an emulated link."""

__version__ = "0.1.0"
