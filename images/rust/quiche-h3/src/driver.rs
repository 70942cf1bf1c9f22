//! The thin UDP loop around quiche's sans-IO connections: wait for datagrams until a deadline (quiche's timer,
//! a held packet's pacing time, the fetch's deadline), drain what else is queued, and send what quiche produces,
//! holding a packet whose pacing release time (`SendInfo::at`) is still ahead instead of bursting it.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::config::MAX_DATAGRAM;

/// Datagrams handled per wake-up before the connections get to send (ACKs go out in time under load).
const BATCH: usize = 64;
/// A packet due within this is sent now (the loop's timers are not finer).
const PACING_SLACK: Duration = Duration::from_millis(1);

/// A packet quiche produced that waits for its pacing time.
pub struct Held {
    packet: Vec<u8>,
    to: SocketAddr,
    at: Instant,
}

impl Held {
    pub fn at(&self) -> Instant {
        self.at
    }
}

/// The earliest of some deadlines.
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

/// Datagrams that arrived before `deadline` (None: wait as long as it takes), at most BATCH.
pub fn receive(socket: &UdpSocket, deadline: Option<Instant>) -> io::Result<Vec<(Vec<u8>, SocketAddr)>> {
    let mut buf = [0u8; 65535];
    let mut got = Vec::new();
    let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    if wait.is_some_and(|w| w.is_zero()) {
        socket.set_nonblocking(true)?;
    } else {
        socket.set_nonblocking(false)?;
        socket.set_read_timeout(wait.map(|w| w.max(Duration::from_micros(100))))?;
    }
    while got.len() < BATCH {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => got.push((buf[..n].to_vec(), from)),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        socket.set_nonblocking(true)?; // after the first: only what is already queued
    }
    Ok(got)
}

/// Send what `conn` has to send now; a packet not yet due is kept in `held`. Returns when to come back for it.
pub fn flush(conn: &mut quiche::Connection, socket: &UdpSocket, held: &mut Option<Held>) -> Option<Instant> {
    let mut out = [0u8; MAX_DATAGRAM];
    loop {
        let next = match held.take() {
            Some(h) => h,
            None => match conn.send(&mut out) {
                Ok((n, info)) => Held { packet: out[..n].to_vec(), to: info.to, at: info.at },
                Err(quiche::Error::Done) => return None,
                Err(e) => {
                    eprintln!("quiche send: {e}");
                    let _ = conn.close(false, 0x1, b"send failed");
                    return None;
                }
            },
        };
        if next.at > Instant::now() + PACING_SLACK {
            let at = next.at;
            *held = Some(next);
            return Some(at);
        }
        match socket.send_to(&next.packet, next.to) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *held = Some(next);
                return Some(Instant::now() + PACING_SLACK);
            }
            Err(e) => eprintln!("udp send to {}: {e}", next.to),
        }
    }
}
