//! quiclab-quinn: an HTTP/3 file server and download client on quinn (0.11) with the h3 / h3-quinn crates and
//! rustls (ring), nothing more.
//!
//!   quiclab-quinn server [--cc=cubic|newreno|bbr]  serves /srv/www (the lab's objects under /obj/) over HTTP/3 on
//!                                                  ${PORT:-443}/udp with /pki/quinn/{cert,key}.pem; /healthz 204.
//!   quiclab-quinn fetch     the endpoint contract (quiclab_h3_common::contract); one JSON line; 127 for non-h3.
//!   quiclab-quinn version   the quinn, h3 and rustls versions it was built with (from Cargo.lock).
//!
//! Modules: `transport` (quinn's TransportConfig: congestion control, windows, qlog), `tls` (rustls configs: the
//! lab CA, the server's key pair, the key log), `server`, `fetch`.

mod fetch;
mod server;
mod tls;
mod transport;

use quiclab_h3_common::cli::{self, Command};

fn version() -> String {
    format!("quinn {} (quinn-proto {}, h3 {}, h3-quinn {}, rustls {})", env!("QUINN_VERSION"),
            env!("QUINN_PROTO_VERSION"), env!("H3_VERSION"), env!("H3_QUINN_VERSION"), env!("RUSTLS_VERSION"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match cli::parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quiclab-quinn: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let code = match command {
        Command::Version => {
            println!("{}", version());
            0
        }
        Command::Server { cc } => runtime.block_on(server::run(&cc)),
        Command::Fetch => runtime.block_on(fetch::run()),
    };
    std::process::exit(code);
}
