//! The download client (quiclab_h3_common::contract): one quinn connection to the server (HOST_ADDR, or the URL's
//! host resolved), the certificate verified against the lab CA for the URL's host name, the objects fetched in
//! turn with h3's client, each body hashed as it streams in; one JSON line (quiclab_h3_common::report).
//!
//! Timings from the start of the connection attempt: the handshake when quinn's `Connecting` resolved (the
//! handshake is confirmed), the first response's header section, the last body byte of the last object.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Buf;
use quiclab_h3_common::contract::{self, FetchArgs};
use quiclab_h3_common::report::{self, BodyDigest, Outcome, Timings, Transfer};

use crate::{tls, transport};

/// H3_NO_ERROR: the connection is closed after the last object.
const H3_NO_ERROR: u32 = 0x100;

pub async fn run() -> i32 {
    let args = match contract::parse(|k| std::env::var(k).ok()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", e.message("quinn"));
            return e.exit_code();
        }
    };
    let (cc, algorithm) = match transport::algorithm(&args.cc) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("quinn fetch: {e}");
            return contract::USAGE;
        }
    };
    let crypto = match tls::client(quiclab_h3_common::CA_FILE) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quinn fetch: {e}");
            return contract::USAGE;
        }
    };
    let drops0 = report::rcvbuf_errors();
    let start = Instant::now();
    let mut timings = Timings::default();
    let mut transfers = Vec::new();
    let session = session(&args, crypto, algorithm, start, &mut timings, &mut transfers);
    let outcome = match tokio::time::timeout(Duration::from_secs_f64(args.timeout_s), session).await {
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(outcome)) => outcome,
        Err(_) => Outcome::TimedOut(format!("timed out after {} s", args.timeout_s)),
    };
    if outcome != Outcome::Ok || timings.total == 0.0 {
        timings.total = start.elapsed().as_secs_f64();
    }
    let drops = match (drops0, report::rcvbuf_errors()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    println!("{}", report::line(args.targets.len(), transfers, &timings, outcome, cc, drops).to_json());
    0
}

fn failed(e: impl std::fmt::Display) -> Outcome {
    Outcome::Failed(e.to_string())
}

/// A handshake failure: the certificate (curl's 60) or anything else (7, could not connect).
fn handshake_failed(e: impl std::fmt::Display) -> Outcome {
    let m = e.to_string();
    if m.to_ascii_lowercase().contains("certificate") {
        Outcome::Certificate(m)
    } else {
        Outcome::Connect(m)
    }
}

async fn address(args: &FetchArgs) -> Result<SocketAddr, Outcome> {
    let first = &args.targets[0];
    if let Some(ip) = args.host_addr {
        return Ok(SocketAddr::new(ip, first.port));
    }
    tokio::net::lookup_host((first.host.as_str(), first.port))
        .await
        .map_err(|e| Outcome::Connect(format!("{}: {e}", first.host)))?
        .next()
        .ok_or_else(|| Outcome::Connect(format!("{}: no address", first.host)))
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

async fn session(args: &FetchArgs, crypto: quinn::crypto::rustls::QuicClientConfig, algorithm: transport::Algorithm,
                 start: Instant, timings: &mut Timings, transfers: &mut Vec<Transfer>) -> Result<(), Outcome> {
    let first = &args.targets[0];
    let addr = address(args).await?;
    let bind = if addr.is_ipv6() { SocketAddr::from(([0u16; 8], 0)) } else { SocketAddr::from(([0, 0, 0, 0], 0)) };
    let endpoint = quinn::Endpoint::client(bind).map_err(|e| Outcome::Connect(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let qlog_id = format!("{:x}{:x}", std::process::id(), SystemTime::now().duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos()));
    config.transport_config(Arc::new(transport::config(algorithm, Some((&qlog_id, "client")))));
    let conn = endpoint.connect_with(config, addr, &first.host).map_err(handshake_failed)?.await
        .map_err(handshake_failed)?;
    timings.handshake = Some(start.elapsed().as_secs_f64());
    let (mut driver, mut requests) = h3::client::new(h3_quinn::Connection::new(conn.clone())).await.map_err(failed)?;
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    for target in &args.targets {
        let t0 = Instant::now();
        let req = http::Request::get(&target.url).header("user-agent", "quiclab-quinn").body(()).map_err(failed)?;
        let mut stream = requests.send_request(req).await.map_err(failed)?;
        stream.finish().await.map_err(failed)?;
        let resp = stream.recv_response().await.map_err(failed)?;
        timings.first_header.get_or_insert_with(|| start.elapsed().as_secs_f64());
        let mut digest = BodyDigest::default();
        while let Some(mut chunk) = stream.recv_data().await.map_err(failed)? {
            while chunk.has_remaining() {
                let n = chunk.chunk().len();
                digest.update(chunk.chunk());
                chunk.advance(n);
            }
        }
        let (size, sha256) = digest.finish();
        let status = resp.status().as_u16();
        transfers.push(Transfer { url: target.url.clone(), status, size, sha256, t: unix_now(),
                                  total: t0.elapsed().as_secs_f64() });
        if resp.version() != http::Version::HTTP_3 {
            return Err(Outcome::Failed(format!("the response came over {:?}, not HTTP/3", resp.version())));
        }
        if status != 200 {
            return Err(Outcome::Failed(format!("HTTP {status} for {}", target.url)));
        }
    }
    timings.total = start.elapsed().as_secs_f64();
    conn.close(H3_NO_ERROR.into(), b"done");
    drop(requests);
    // let the close go out (and the qlog writer finish) without holding the report up for the draining period
    let _ = tokio::time::timeout(Duration::from_millis(500), endpoint.wait_idle()).await;
    drive.abort();
    Ok(())
}
