//! The download client (quiclab_h3_common::contract) on quiche: one connection to the server (HOST_ADDR, or the
//! URL's host resolved), the certificate verified against the lab CA for the URL's host name (SNI and
//! verification both use it), the objects fetched in turn with quiche's h3 client, each body hashed as it streams
//! in; one JSON line (quiclab_h3_common::report).
//!
//! Timings from the start of the connection attempt: the handshake when quiche says the connection is established,
//! the first response's header section, the last body byte of the last object.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiche::h3::{self, NameValue};
use quiclab_h3_common::contract::{self, FetchArgs, Target};
use quiclab_h3_common::evidence;
use quiclab_h3_common::report::{self, BodyDigest, Outcome, Timings, Transfer};
use ring::rand::SecureRandom;

use crate::config::{self, Role};
use crate::driver::{self, Held};
use crate::outcome;

/// H3_NO_ERROR: the connection is closed after the last object.
const H3_NO_ERROR: u64 = 0x100;

pub fn run() -> i32 {
    let args = match contract::parse(|k| std::env::var(k).ok()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{}", e.message("quiche"));
            return e.exit_code();
        }
    };
    let (mut config, cc) = match config::build(Role::Client, &args.cc) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quiche fetch: {e}");
            return contract::USAGE;
        }
    };
    let drops0 = report::rcvbuf_errors();
    let start = Instant::now();
    let mut fetch = Fetch { start, timings: Timings::default(), transfers: Vec::new(), current: None, next: 0 };
    let outcome = fetch.session(&args, &mut config);
    if outcome != Outcome::Ok || fetch.timings.total == 0.0 {
        fetch.timings.total = start.elapsed().as_secs_f64();
    }
    let drops = match (drops0, report::rcvbuf_errors()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    println!("{}", report::line(args.targets.len(), fetch.transfers, &fetch.timings, outcome, cc, drops).to_json());
    0
}

/// The object being fetched.
struct Current {
    stream_id: u64,
    status: u16,
    digest: BodyDigest,
    started: Instant,
}

struct Fetch {
    start: Instant,
    timings: Timings,
    transfers: Vec<Transfer>,
    current: Option<Current>,
    next: usize,
}

fn address(args: &FetchArgs) -> Result<SocketAddr, Outcome> {
    let first = &args.targets[0];
    if let Some(ip) = args.host_addr {
        return Ok(SocketAddr::new(ip, first.port));
    }
    (first.host.as_str(), first.port)
        .to_socket_addrs()
        .map_err(|e| Outcome::Connect(format!("{}: {e}", first.host)))?
        .next()
        .ok_or_else(|| Outcome::Connect(format!("{}: no address", first.host)))
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl Fetch {
    fn session(&mut self, args: &FetchArgs, config: &mut quiche::Config) -> Outcome {
        let deadline = self.start + Duration::from_secs_f64(args.timeout_s);
        let first = &args.targets[0];
        let peer = match address(args) {
            Ok(a) => a,
            Err(o) => return o,
        };
        let bind = if peer.is_ipv6() { SocketAddr::from(([0u16; 8], 0)) } else { SocketAddr::from(([0, 0, 0, 0], 0)) };
        let socket = match UdpSocket::bind(bind) {
            Ok(s) => s,
            Err(e) => return Outcome::Connect(e.to_string()),
        };
        let local = socket.local_addr().expect("a bound socket has an address");
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        if ring::rand::SystemRandom::new().fill(&mut scid).is_err() {
            return Outcome::Failed("no random bytes for a connection ID".into());
        }
        let scid = quiche::ConnectionId::from_ref(&scid);
        let mut conn = match quiche::connect(Some(first.host.as_str()), &scid, local, peer, config) {
            Ok(c) => c,
            Err(e) => return Outcome::Connect(format!("quiche connect: {e}")),
        };
        if let Some(keys) = evidence::key_log() {
            conn.set_keylog(Box::new(keys));
        }
        if let Some(file) = evidence::qlog_file(&hex::encode(&scid[..]), "client") {
            conn.set_qlog(Box::new(file), "quiclab-quiche fetch".into(), crate::version());
        }
        let h3_config = match h3::Config::new() {
            Ok(c) => c,
            Err(e) => return Outcome::Failed(format!("h3 config: {e}")),
        };
        let mut h3_conn: Option<h3::Connection> = None;
        let mut held: Option<Held> = None;
        let mut result: Option<Outcome> = None;
        loop {
            let pacing = driver::flush(&mut conn, &socket, &mut held);
            if let Some(done) = result.take() {
                // the last object is in (or the fetch failed): the close is sent, the report is not held up
                // for the draining period
                return done;
            }
            if conn.is_closed() {
                break;
            }
            if Instant::now() >= deadline {
                let _ = conn.close(true, H3_NO_ERROR, b"timeout");
                driver::flush(&mut conn, &socket, &mut held);
                return Outcome::TimedOut(format!("timed out after {} s", args.timeout_s));
            }
            let wake = driver::earliest([conn.timeout_instant(), pacing, Some(deadline)]);
            match driver::receive(&socket, wake) {
                Ok(packets) => {
                    for (mut packet, from) in packets {
                        if let Err(e) = conn.recv(&mut packet, quiche::RecvInfo { from, to: local }) {
                            if e != quiche::Error::Done {
                                eprintln!("quiche fetch: recv: {e}");
                            }
                        }
                    }
                }
                Err(e) => return Outcome::Failed(format!("receive: {e}")),
            }
            if conn.timeout_instant().is_some_and(|t| t <= Instant::now()) {
                conn.on_timeout();
            }
            if h3_conn.is_none() && conn.is_established() {
                self.timings.handshake = Some(self.start.elapsed().as_secs_f64());
                match h3::Connection::with_transport(&mut conn, &h3_config) {
                    Ok(h) => h3_conn = Some(h),
                    Err(e) => return Outcome::Failed(format!("h3: {e}")),
                }
            }
            if let Some(h3c) = h3_conn.as_mut() {
                if let Err(o) = self.step(&mut conn, h3c, &args.targets) {
                    let _ = conn.close(true, if o == Outcome::Ok { H3_NO_ERROR } else { 0x102 }, b"");
                    if o == Outcome::Ok {
                        self.timings.total = self.start.elapsed().as_secs_f64();
                    }
                    result = Some(o);
                }
            }
        }
        outcome::closed(conn.is_established() || self.timings.handshake.is_some(),
                        conn.local_error().map(Into::into), conn.peer_error().map(Into::into), conn.is_timed_out())
    }

    /// Requests and responses: Err(Ok) when every object is in, Err(outcome) when the fetch failed.
    fn step(&mut self, conn: &mut quiche::Connection, h3c: &mut h3::Connection, targets: &[Target])
            -> Result<(), Outcome> {
        if self.current.is_none() {
            let Some(target) = targets.get(self.next) else { return Err(Outcome::Ok) };
            let request = [
                h3::Header::new(b":method", b"GET"),
                h3::Header::new(b":scheme", b"https"),
                h3::Header::new(b":authority", target.authority.as_bytes()),
                h3::Header::new(b":path", target.path.as_bytes()),
                h3::Header::new(b"user-agent", b"quiclab-quiche"),
            ];
            let stream_id = h3c.send_request(conn, &request, true)
                .map_err(|e| Outcome::Failed(format!("request for {}: {e}", target.url)))?;
            self.current = Some(Current { stream_id, status: 0, digest: BodyDigest::default(), started: Instant::now() });
        }
        let mut buf = [0u8; 65536];
        loop {
            match h3c.poll(conn) {
                Ok((sid, h3::Event::Headers { list, .. })) => {
                    let Some(cur) = self.current.as_mut().filter(|c| c.stream_id == sid) else { continue };
                    self.timings.first_header.get_or_insert_with(|| self.start.elapsed().as_secs_f64());
                    cur.status = list.iter().find(|h| h.name() == b":status")
                        .and_then(|h| std::str::from_utf8(h.value()).ok()?.parse().ok()).unwrap_or(0);
                }
                Ok((sid, h3::Event::Data)) => {
                    let Some(cur) = self.current.as_mut().filter(|c| c.stream_id == sid) else { continue };
                    while let Ok(n) = h3c.recv_body(conn, sid, &mut buf) {
                        cur.digest.update(&buf[..n]);
                    }
                }
                Ok((sid, h3::Event::Finished)) => {
                    let Some(cur) = self.current.take_if(|c| c.stream_id == sid) else { continue };
                    let target = &targets[self.next];
                    let (size, sha256) = cur.digest.finish();
                    self.transfers.push(Transfer { url: target.url.clone(), status: cur.status, size, sha256,
                                                   t: unix_now(), total: cur.started.elapsed().as_secs_f64() });
                    self.next += 1;
                    if cur.status != 200 {
                        return Err(Outcome::Failed(format!("HTTP {} for {}", cur.status, target.url)));
                    }
                    return self.step(conn, h3c, targets);
                }
                Ok((sid, h3::Event::Reset(code))) if self.current.as_ref().is_some_and(|c| c.stream_id == sid) => {
                    return Err(Outcome::Failed(format!("the server reset the stream (0x{code:x}) for {}",
                                                       targets[self.next].url)));
                }
                Ok((_, h3::Event::GoAway)) if self.current.is_some() => {}
                Ok(_) => {}
                Err(h3::Error::Done) => return Ok(()),
                Err(e) => return Err(Outcome::Failed(format!("h3: {e}"))),
            }
        }
    }
}
