//! Minimal HTTP/1.1 on std::net: one request per connection, then close.
//! Enough for the control API and the `show`/`set` client commands.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Largest accepted request or response body (traces can be long).
pub const MAX_BODY: usize = 64 * 1024 * 1024;
const MAX_HEAD_LINES: usize = 100;
const MAX_LINE: usize = 8192;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

fn read_line<R: BufRead>(r: &mut R) -> io::Result<String> {
    let mut buf = Vec::new();
    let n = r.take(MAX_LINE as u64).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Err(bad("connection closed"));
    }
    if buf.last() != Some(&b'\n') {
        return Err(bad("header line too long"));
    }
    let s = String::from_utf8(buf).map_err(|_| bad("header is not UTF-8"))?;
    Ok(s.trim_end_matches(['\r', '\n']).to_string())
}

/// Read headers; returns the first line and the Content-Length.
fn read_head<R: BufRead>(r: &mut R) -> io::Result<(String, usize)> {
    let first = read_line(r)?;
    let mut len = 0usize;
    for _ in 0..MAX_HEAD_LINES {
        let line = read_line(r)?;
        if line.is_empty() {
            return Ok((first, len));
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().map_err(|_| bad("bad Content-Length"))?;
                if len > MAX_BODY {
                    return Err(bad("body too large"));
                }
            }
        }
    }
    Err(bad("too many header lines"))
}

fn read_body<R: BufRead>(r: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// Read one request from a connection.
pub fn read_request(stream: &TcpStream) -> io::Result<Request> {
    let mut r = BufReader::new(stream);
    let (first, len) = read_head(&mut r)?;
    let mut parts = first.split_whitespace();
    let method = parts
        .next()
        .ok_or_else(|| bad("empty request line"))?
        .to_string();
    let path = parts
        .next()
        .ok_or_else(|| bad("no request path"))?
        .to_string();
    let body = read_body(&mut r, len)?;
    Ok(Request { method, path, body })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Write a complete response and close.
pub fn write_response(
    mut stream: &TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// Client side: one request, returns (status, body).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> io::Result<(u16, Vec<u8>)> {
    let stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or(&[]);
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut w = &stream;
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    let mut r = BufReader::new(&stream);
    let (status_line, len) = read_head(&mut r)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let body = read_body(&mut r, len)?;
    Ok((status, body))
}
