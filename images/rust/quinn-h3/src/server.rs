//! The HTTP/3 file server: one quinn endpoint on ${PORT:-443}/udp; each connection gets its own transport config
//! (its qlog file), each request its own task. Paths map to files by quiclab_h3_common::route. A request's task reads
//! the request stream to its end after answering (`end_request`: never an implicit STOP_SENDING with error 0).

use std::net::{Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use h3::error::Code;
use http::{Request, Response, StatusCode};
use quiclab_h3_common::route::{route, Route};
use quiclab_h3_common::ROOT;
use tokio::io::AsyncReadExt;

use crate::{tls, transport};

const CERT: &str = "/pki/quinn/cert.pem";
const KEY: &str = "/pki/quinn/key.pem";
const CHUNK: usize = 64 << 10;

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

pub async fn run(cc: &str) -> i32 {
    let (name, algorithm) = match transport::algorithm(cc) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("quiclab-quinn server: {e}");
            return 2;
        }
    };
    let port: u16 = match std::env::var("PORT").ok().filter(|p| !p.is_empty()).map(|p| p.parse()) {
        None => 443,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            eprintln!("quiclab-quinn server: bad PORT: allowed is a port number");
            return 2;
        }
    };
    let crypto = match tls::server(CERT, KEY) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("quiclab-quinn server: {e}");
            return 1;
        }
    };
    let base = quinn::ServerConfig::with_crypto(crypto);
    let mut first = base.clone();
    first.transport_config(Arc::new(transport::config(algorithm, None)));
    // IPv6 any: the socket takes IPv4 too (quinn sets IPV6_V6ONLY off); IPv4 any where there is no IPv6
    let endpoint = match quinn::Endpoint::server(first.clone(), SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| quinn::Endpoint::server(first, SocketAddr::from(([0, 0, 0, 0], port))))
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("quiclab-quinn server: port {port}/udp: {e}");
            return 1;
        }
    };
    eprintln!("quiclab-quinn server: {} on {port}/udp, congestion control {name}", crate::version());
    let stop = stop();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                let mut config = base.clone();
                let id = incoming.orig_dst_cid().to_string();
                config.transport_config(Arc::new(transport::config(algorithm, Some((&id, "server")))));
                match incoming.accept_with(Arc::new(config)) {
                    Ok(connecting) => { tokio::spawn(connection(connecting, Arc::from(Path::new(ROOT)))); }
                    Err(e) => eprintln!("quiclab-quinn server: {e}"),
                }
            }
            _ = &mut stop => break,
        }
    }
    endpoint.close(0u32.into(), b"bye");
    endpoint.wait_idle().await;
    0
}

async fn stop() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
}

/// One connection: its requests, each answered from files under `root` in its own task.
async fn connection(connecting: quinn::Connecting, root: Arc<Path>) {
    let conn = match connecting.await {
        Ok(c) => c,
        Err(e) => return eprintln!("quiclab-quinn server: handshake: {e}"),
    };
    let mut h3 = match h3::server::builder().build::<_, Bytes>(h3_quinn::Connection::new(conn)).await {
        Ok(h) => h,
        Err(e) => return eprintln!("quiclab-quinn server: h3: {e}"),
    };
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                let root = root.clone();
                tokio::spawn(async move {
                    match resolver.resolve_request().await {
                        Ok((req, stream)) => {
                            if let Err(e) = answer(&root, req, stream).await {
                                eprintln!("quiclab-quinn server: request: {e}");
                            }
                        }
                        Err(e) => eprintln!("quiclab-quinn server: request: {e}"),
                    }
                });
            }
            Ok(None) => break,
            Err(e) => {
                if !e.is_h3_no_error() {
                    eprintln!("quiclab-quinn server: connection: {e}");
                }
                break;
            }
        }
    }
}

fn response(status: StatusCode, length: u64, content_type: Option<&str>) -> Response<()> {
    let mut r = Response::builder()
        .status(status)
        .header("server", "quiclab-quinn")
        .header("cache-control", "no-store")
        .header("content-length", length);
    if let Some(ct) = content_type {
        r = r.header("content-type", ct);
    }
    r.body(()).expect("a valid response")
}

/// Answer a request, then read the request stream to its end (`end_request`). A response that failed part-way is
/// reset with H3_INTERNAL_ERROR: dropping the stream would otherwise finish it, a truncated body ending cleanly.
async fn answer(root: &Path, req: Request<()>, mut stream: Stream)
                -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let outcome = respond(root, &req, &mut stream).await;
    if outcome.is_err() {
        stream.stop_stream(Code::H3_INTERNAL_ERROR);
    }
    end_request(&mut stream).await;
    outcome
}

/// Read what is left of the request up to the stream's FIN (a GET or HEAD ends with its HEADERS frame; a request body
/// is read and dropped) before the stream is dropped. quinn's RecvStream, dropped before its end was read, stops the
/// stream: STOP_SENDING with error 0 (quinn::RecvStream's Drop), which is not an HTTP/3 error code. curl 8.23 (ngtcp2
/// 1.24, nghttp3 1.17) closes its stream with that code and reports "stream 0 reset by server (error 0x0)", exit 18,
/// even after the whole response arrived; curl 8.14 ignores it. No time limit: a client that keeps its request open
/// holds this task until it ends the request, resets it, or the connection closes (quinn's idle timeout). A read
/// cannot be given up part-way anyway: h3-quinn keeps the quinn stream inside its pending read until that completes.
async fn end_request(stream: &mut Stream) {
    loop {
        match stream.recv_data().await {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return, // the end read (no STOP_SENDING on drop), or the stream or connection gone
        }
    }
}

async fn respond(root: &Path, req: &Request<()>, stream: &mut Stream)
                 -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let head = req.method() == http::Method::HEAD;
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let (status, file) = match route(req.method().as_str(), path) {
        Route::Health => (StatusCode::NO_CONTENT, None),
        Route::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, None),
        Route::NotFound => (StatusCode::NOT_FOUND, None),
        Route::File { rel, content_type } => match open(&root.join(rel)).await {
            Some(f) => (StatusCode::OK, Some((f, content_type))),
            None => (StatusCode::NOT_FOUND, None),
        },
    };
    let Some(((mut file, length), content_type)) = file else {
        stream.send_response(response(status, 0, None)).await?;
        return Ok(stream.finish().await?);
    };
    stream.send_response(response(status, length, Some(content_type))).await?;
    if !head {
        let mut left = length;
        while left > 0 {
            let mut buf = BytesMut::zeroed(CHUNK.min(usize::try_from(left).unwrap_or(CHUNK)));
            let n = file.read(&mut buf).await?;
            if n == 0 {
                return Err("the file ended early".into());
            }
            buf.truncate(n);
            left -= n as u64;
            stream.send_data(buf.freeze()).await?;
        }
    }
    Ok(stream.finish().await?)
}

/// A regular file and its length, or None.
async fn open(path: &Path) -> Option<(tokio::fs::File, u64)> {
    let f = tokio::fs::File::open(path).await.ok()?;
    let meta = f.metadata().await.ok()?;
    meta.is_file().then_some((f, meta.len()))
}

#[cfg(test)]
mod tests {
    //! The server against an in-process quinn + h3 client on loopback, with a test CA and key pair (testdata/, for
    //! localhost; never used by the lab). The lab's own check: curl 8.23 against it, tests/lab/test_stacks_rust.py.

    use super::*;
    use bytes::Buf;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");

    /// A server endpoint on loopback answering from `root` as `run` does (without its signal handling).
    fn server(root: &Path) -> (quinn::Endpoint, SocketAddr) {
        let crypto = tls::server(&format!("{TESTDATA}/cert.pem"), &format!("{TESTDATA}/key.pem")).expect("test keys");
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(Arc::new(transport::config(transport::Algorithm::Cubic, None)));
        let endpoint = quinn::Endpoint::server(config, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).expect("a port");
        let addr = endpoint.local_addr().expect("its address");
        let (accepting, root): (_, Arc<Path>) = (endpoint.clone(), Arc::from(root));
        tokio::spawn(async move {
            while let Some(incoming) = accepting.accept().await {
                if let Ok(connecting) = incoming.accept() {
                    tokio::spawn(connection(connecting, root.clone()));
                }
            }
        });
        (endpoint, addr)
    }

    /// GET `path` on `requests`: the status and the body.
    async fn get(requests: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>, path: &str) -> (u16, Vec<u8>) {
        let req = http::Request::get(format!("https://localhost{path}")).body(()).expect("a request");
        let mut stream = requests.send_request(req).await.expect("sent");
        stream.finish().await.expect("the request finished");
        let status = stream.recv_response().await.expect("a response").status().as_u16();
        let mut body = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.expect("the body") {
            while chunk.has_remaining() {
                let n = chunk.chunk().len();
                body.extend_from_slice(chunk.chunk());
                chunk.advance(n);
            }
        }
        (status, body)
    }

    /// The bug curl 8.23 showed (exit 18, "stream 0 reset by server (error 0x0)"): the server's request task dropped
    /// the request stream without reading its FIN, and quinn stopped it with STOP_SENDING error 0. Every answer here
    /// (a file, 204, 404) must leave the client's request streams neither stopped nor reset.
    #[tokio::test]
    async fn answers_never_stop_or_reset_the_request_stream() {
        let root = std::env::temp_dir().join(format!("quiclab-quinn-test-{}", std::process::id()));
        std::fs::create_dir_all(root.join("obj")).expect("a temporary root");
        let object: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.join("obj/10000"), &object).expect("the object");
        let (_server, addr) = server(&root);

        let mut client = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).expect("a port");
        client.set_default_client_config(quinn::ClientConfig::new(Arc::new(
            tls::client(&format!("{TESTDATA}/ca.pem")).expect("the test CA"))));
        let conn = client.connect(addr, "localhost").expect("connect").await.expect("a handshake");
        // no grease: the server rightly stops the client's grease stream (an unknown stream type, RFC 9114 6.2)
        let (mut driver, mut requests) = h3::client::builder().send_grease(false)
            .build::<_, _, Bytes>(h3_quinn::Connection::new(conn.clone())).await.expect("h3");
        let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });

        assert_eq!(get(&mut requests, "/obj/10000").await, (200, object));
        assert_eq!(get(&mut requests, "/healthz").await, (204, Vec::new()));
        assert_eq!(get(&mut requests, "/obj/none").await, (404, Vec::new()));
        // the old server's STOP_SENDING left as its task ended, right after the response: within a loopback round
        // trip of it; half a second is ample even on a loaded host
        tokio::time::sleep(Duration::from_millis(500)).await;
        let frames = conn.stats().frame_rx;
        assert_eq!((frames.stop_sending, frames.reset_stream), (0, 0), "STOP_SENDING and RESET_STREAM frames received");

        conn.close(0u32.into(), b"done");
        drive.abort();
        std::fs::remove_dir_all(&root).expect("the temporary root removed");
    }
}
