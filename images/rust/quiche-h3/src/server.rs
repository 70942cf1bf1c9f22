//! The HTTP/3 file server: one UDP socket on ${PORT:-443}, quiche connections keyed by the connection ID the
//! server chose (derived from the client's first DCID by an HMAC, so a repeated Initial finds its connection),
//! quiche's h3 layer per connection. A response whose body does not fit the stream's flow-control credit is kept
//! and resumed when quiche reports the stream writable.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::Instant;

use quiche::h3::{self, NameValue};
use quiclab_h3_common::route::{route, Route};
use quiclab_h3_common::{evidence, ROOT};
use ring::rand::SecureRandom;

use crate::config::{self, Role};
use crate::driver::{self, Held};

const CERT: &str = "/pki/quiche/cert.pem";
const KEY: &str = "/pki/quiche/key.pem";

/// A response still being written: its header section (when even that was blocked) and the body left.
struct Partial {
    headers: Option<Vec<h3::Header>>,
    body: Vec<u8>,
    written: usize,
}

struct Client {
    conn: quiche::Connection,
    h3: Option<h3::Connection>,
    partial: HashMap<u64, Partial>,
    held: Option<Held>,
}

fn stop_requested() -> &'static std::sync::atomic::AtomicBool {
    static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    &STOP
}

pub fn run(cc: &str) -> i32 {
    let (mut config, cc_name) = match config::build(Role::Server { cert: CERT, key: KEY }, cc) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quiclab-quiche server: {e}");
            return if e.starts_with("congestion control") { 2 } else { 1 };
        }
    };
    let port: u16 = match std::env::var("PORT").ok().filter(|p| !p.is_empty()).map(|p| p.parse()) {
        None => 443,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            eprintln!("quiclab-quiche server: bad PORT: allowed is a port number");
            return 2;
        }
    };
    let socket = match UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], port))) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("quiclab-quiche server: port {port}/udp: {e}");
            return 1;
        }
    };
    let local = socket.local_addr().expect("a bound socket has an address");
    let h3_config = h3::Config::new().expect("quiche's h3 config");
    let rng = ring::rand::SystemRandom::new();
    let mut seed = [0u8; 32];
    rng.fill(&mut seed).expect("random bytes");
    let cid_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &seed);
    install_stop_handler();
    eprintln!("quiclab-quiche server: {} on {port}/udp, congestion control {cc_name}", crate::version());
    let mut clients: HashMap<Vec<u8>, Client> = HashMap::new();
    while !stop_requested().load(std::sync::atomic::Ordering::Relaxed) {
        let deadline = driver::earliest(clients.values().flat_map(|c| [c.conn.timeout_instant(),
                                                                       c.held.as_ref().map(Held::at)]));
        // wake up at least once a second to notice a stop request
        let deadline = driver::earliest([deadline, Some(Instant::now() + std::time::Duration::from_secs(1))]);
        let packets = match driver::receive(&socket, deadline) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("quiclab-quiche server: receive: {e}");
                return 1;
            }
        };
        for (mut packet, from) in packets {
            if let Some(id) = find_or_accept(&mut clients, &mut packet, from, local, &socket, &mut config, &cid_key) {
                let client = clients.get_mut(&id).expect("just found");
                if let Err(e) = client.conn.recv(&mut packet, quiche::RecvInfo { from, to: local }) {
                    if e != quiche::Error::Done {
                        eprintln!("quiclab-quiche server: recv: {e}");
                    }
                }
            }
        }
        let now = Instant::now();
        for client in clients.values_mut() {
            if client.conn.timeout_instant().is_some_and(|t| t <= now) {
                client.conn.on_timeout();
            }
            serve(client, &h3_config);
            driver::flush(&mut client.conn, &socket, &mut client.held);
        }
        clients.retain(|_, c| !c.conn.is_closed());
    }
    0
}

/// SIGTERM / SIGINT end the server (docker stop, the lab stopping an instance): a flag the loop checks.
fn install_stop_handler() {
    const SIGINT: i32 = 2;
    const SIGTERM: i32 = 15;
    extern "C" fn on_signal(_: i32) {
        stop_requested().store(true, std::sync::atomic::Ordering::Relaxed);
    }
    extern "C" {
        fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe
    unsafe {
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
    }
}

/// The key of the connection this packet belongs to, accepting a new one for an Initial; None: dropped.
fn find_or_accept(clients: &mut HashMap<Vec<u8>, Client>, packet: &mut [u8], from: SocketAddr, local: SocketAddr,
                  socket: &UdpSocket, config: &mut quiche::Config, cid_key: &ring::hmac::Key) -> Option<Vec<u8>> {
    let hdr = quiche::Header::from_slice(packet, quiche::MAX_CONN_ID_LEN).ok()?;
    if clients.contains_key(&hdr.dcid[..]) {
        return Some(hdr.dcid.to_vec());
    }
    let tag = ring::hmac::sign(cid_key, &hdr.dcid);
    let id = tag.as_ref()[..quiche::MAX_CONN_ID_LEN].to_vec();
    if clients.contains_key(&id) {
        return Some(id);
    }
    if hdr.ty != quiche::Type::Initial {
        return None;
    }
    if !quiche::version_is_supported(hdr.version) {
        let mut out = [0u8; config::MAX_DATAGRAM];
        if let Ok(n) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut out) {
            let _ = socket.send_to(&out[..n], from);
        }
        return None;
    }
    let scid = quiche::ConnectionId::from_ref(&id);
    let mut conn = match quiche::accept(&scid, None, local, from, config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quiclab-quiche server: accept: {e}");
            return None;
        }
    };
    if let Some(keys) = evidence::key_log() {
        conn.set_keylog(Box::new(keys));
    }
    // unbuffered: what a connection logged is on disk while it lives (the lab collects a running instance's files)
    if let Some(file) = evidence::qlog_file(&hex::encode(&hdr.dcid[..]), "server") {
        conn.set_qlog(Box::new(file), "quiclab-quiche server".into(),
                      crate::version());
    }
    clients.insert(id.clone(), Client { conn, h3: None, partial: HashMap::new(), held: None });
    Some(id)
}

/// The h3 layer of one connection: start it once the handshake is done, resume blocked responses, answer requests.
fn serve(client: &mut Client, h3_config: &h3::Config) {
    let Client { conn, h3: h3_conn, partial, .. } = client;
    if h3_conn.is_none() && conn.is_established() {
        match h3::Connection::with_transport(conn, h3_config) {
            Ok(h) => *h3_conn = Some(h),
            Err(e) => {
                eprintln!("quiclab-quiche server: h3: {e}");
                let _ = conn.close(true, 0x101, b"h3 setup failed"); // H3_GENERAL_PROTOCOL_ERROR
                return;
            }
        }
    }
    let Some(h3c) = h3_conn.as_mut() else { return };
    for stream_id in conn.writable() {
        resume(conn, h3c, partial, stream_id);
    }
    let mut sink = [0u8; 4096];
    loop {
        match h3c.poll(conn) {
            Ok((stream_id, h3::Event::Headers { list, .. })) => answer(conn, h3c, partial, stream_id, &list),
            Ok((stream_id, h3::Event::Data)) => while h3c.recv_body(conn, stream_id, &mut sink).is_ok() {},
            Ok(_) => {}
            Err(h3::Error::Done) => break,
            Err(e) => {
                eprintln!("quiclab-quiche server: h3: {e}");
                break;
            }
        }
    }
}

fn response_headers(status: u16, length: usize, content_type: Option<&str>) -> Vec<h3::Header> {
    let mut h = vec![
        h3::Header::new(b":status", status.to_string().as_bytes()),
        h3::Header::new(b"server", b"quiclab-quiche"),
        h3::Header::new(b"cache-control", b"no-store"),
        h3::Header::new(b"content-length", length.to_string().as_bytes()),
    ];
    if let Some(ct) = content_type {
        h.push(h3::Header::new(b"content-type", ct.as_bytes()));
    }
    h
}

fn answer(conn: &mut quiche::Connection, h3c: &mut h3::Connection, partial: &mut HashMap<u64, Partial>,
          stream_id: u64, request: &[h3::Header]) {
    let method = field(request, b":method");
    let path = field(request, b":path");
    let (status, body, content_type) = match route(&method, &path) {
        Route::Health => (204, None, None),
        Route::MethodNotAllowed => (405, None, None),
        Route::NotFound => (404, None, None),
        Route::File { rel, content_type } => match read_file(&Path::new(ROOT).join(rel)) {
            Some(bytes) => (200, Some(bytes), Some(content_type)),
            None => (404, None, None),
        },
    };
    let length = body.as_ref().map_or(0, Vec::len);
    let body = if method == "HEAD" { Vec::new() } else { body.unwrap_or_default() };
    let headers = response_headers(status, length, content_type);
    partial.insert(stream_id, Partial { headers: Some(headers), body, written: 0 });
    resume(conn, h3c, partial, stream_id);
}

/// Write what the stream takes of a response; forget it once all of it is written.
fn resume(conn: &mut quiche::Connection, h3c: &mut h3::Connection, partial: &mut HashMap<u64, Partial>,
          stream_id: u64) {
    let Some(p) = partial.get_mut(&stream_id) else { return };
    if let Some(headers) = &p.headers {
        match h3c.send_response(conn, stream_id, headers, p.body.is_empty()) {
            Ok(()) => p.headers = None,
            Err(h3::Error::StreamBlocked | h3::Error::Done) => return,
            Err(e) => {
                eprintln!("quiclab-quiche server: response on stream {stream_id}: {e}");
                partial.remove(&stream_id);
                return;
            }
        }
    }
    while p.written < p.body.len() {
        match h3c.send_body(conn, stream_id, &p.body[p.written..], true) {
            Ok(n) if n > 0 => p.written += n,
            Ok(_) | Err(h3::Error::Done) => return,
            Err(e) => {
                eprintln!("quiclab-quiche server: body on stream {stream_id}: {e}");
                partial.remove(&stream_id);
                return;
            }
        }
    }
    partial.remove(&stream_id);
}

/// A request's header field as text ("" when absent).
fn field(request: &[h3::Header], name: &[u8]) -> String {
    request.iter().find(|h| h.name() == name).map_or_else(String::new, |h| String::from_utf8_lossy(h.value()).into_owned())
}

/// A regular file's bytes, or None.
fn read_file(path: &Path) -> Option<Vec<u8>> {
    std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    std::fs::read(path).ok()
}
