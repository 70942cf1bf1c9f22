//! quiclab-quiche: an HTTP/3 file server and download client on quiche (0.30) and its own h3 module, nothing more.
//!
//!   quiclab-quiche server [--cc=cubic|reno|bbr2]  serves /srv/www (the lab's objects under /obj/) over HTTP/3 on
//!                                                 ${PORT:-443}/udp with /pki/quiche/{cert,key}.pem; /healthz 204.
//!   quiclab-quiche fetch     the endpoint contract (quiclab_h3_common::contract); one JSON line; 127 for non-h3.
//!   quiclab-quiche version   the quiche and boring-sys (vendored BoringSSL) versions it was built with.
//!
//! quiche is sans-IO: `config` builds its Config (congestion control, windows, TLS, key log), `outcome` classifies
//! how a connection closed (pure), `driver` is the thin UDP loop around it (receive, timers, pacing-aware send),
//! `server` and `fetch` are the two roles.

mod config;
mod driver;
mod fetch;
mod outcome;
mod server;

use quiclab_h3_common::cli::{self, Command};

fn version() -> String {
    format!("quiche {} (boring-sys {}, vendored BoringSSL)", env!("QUICHE_VERSION"), env!("BORING_SYS_VERSION"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match cli::parse(&args) {
        Ok(Command::Version) => {
            println!("{}", version());
            0
        }
        Ok(Command::Server { cc }) => server::run(&cc),
        Ok(Command::Fetch) => fetch::run(),
        Err(e) => {
            eprintln!("quiclab-quiche: {e}");
            2
        }
    };
    std::process::exit(code);
}
