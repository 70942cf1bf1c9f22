//! What quiclab's Rust HTTP/3 endpoints (quinn-h3, quiche-h3) share, once: the paths the servers answer and the
//! files behind them (`route`), the download client's endpoint contract (`contract`: the environment the lab's
//! adapter `lab.endpoints.envfetch` sets), its report (`report`: the one JSON line every fetch command prints), the
//! congestion-control names (`cc`), the key log / qlog environment (`evidence`) and the library version read from
//! Cargo.lock at build time (`lockfile`).
//!
//! Everything here is pure (no sockets, no clock) except `evidence`'s file openers and `report::rcvbuf_errors`,
//! which run the image's `quiclab-rcvbuf-errors`.

pub mod cc;
pub mod cli;
pub mod contract;
pub mod evidence;
pub mod lockfile;
pub mod report;
pub mod route;

/// Where the lab's objects are mounted in a server container (the `objects` volume at /srv/www/obj).
pub const ROOT: &str = "/srv/www";
/// The lab CA every client verifies the server's certificate against.
pub const CA_FILE: &str = "/certs/ca.pem";
/// Flow-control windows (stream; the connection's is 1.5 times this), as quic-go's and aioquic's endpoints: the
/// libraries' defaults are too small for the lab's bandwidth-delay products.
pub const WINDOW: u64 = 16 << 20;
/// The HTTP/3 ALPN token.
pub const ALPN_H3: &[u8] = b"h3";
