//! The HTTP/3 file server: one quinn endpoint on ${PORT:-443}/udp; each connection gets its own transport config
//! (its qlog file), each request its own task. Paths map to files by quiclab_h3_common::route.

use std::net::{Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
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
                    Ok(connecting) => { tokio::spawn(connection(connecting)); }
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

async fn connection(connecting: quinn::Connecting) {
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
                tokio::spawn(async move {
                    match resolver.resolve_request().await {
                        Ok((req, stream)) => {
                            if let Err(e) = answer(req, stream).await {
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

async fn answer(req: Request<()>, mut stream: Stream) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let head = req.method() == http::Method::HEAD;
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let (status, file) = match route(req.method().as_str(), path) {
        Route::Health => (StatusCode::NO_CONTENT, None),
        Route::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, None),
        Route::NotFound => (StatusCode::NOT_FOUND, None),
        Route::File { rel, content_type } => match open(&Path::new(ROOT).join(rel)).await {
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
