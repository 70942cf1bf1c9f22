//! One turn of a loop between a TUN device and a [`Link`], sans-IO: the
//! device and the clock are traits, so the scheduling rules are tested in
//! virtual time (`tests/turn.rs`) and the real driver is a thin shell.
//!
//! Rules, so that a packet is stamped close to when it reached the device
//! and the link never idles while packets wait unread:
//!
//! * reads and writes alternate in bounded batches: at most [`READ_BATCH`]
//!   packets are read (each stamped when read), then at most
//!   [`WRITE_BATCH`] due packets are written (a TUN write carries the
//!   kernel's forwarding work, so a long run of writes would leave arrivals
//!   waiting unread), and so on;
//! * the loop may sleep only after a read found the device empty and no
//!   write is due; the sleep itself (`ppoll` with `POLLIN`) returns at once
//!   if a packet arrived in between.
//!
//! For every packet read, the turn records how long it may have waited in
//! the device unread because of the loop's own work: the time since the loop
//! last found the device empty or woke up (the kernel's wake-up latency is
//! not included).

use crate::link::{Link, LinkVerdict};
use crate::time::{Time, NS_PER_MS, NS_PER_US};
use std::collections::VecDeque;
use std::io;

/// Packets read per batch before due packets are written.
pub const READ_BATCH: usize = 32;
/// Packets written per batch before the device is read again.
pub const WRITE_BATCH: usize = 32;
/// Capacity of a fresh packet buffer; longer packets still fit.
pub const BUF_CAP: usize = 2048;
const MAX_POOL: usize = 8192;

/// What a loop needs from its TUN device.
pub trait Device {
    /// Read one packet into `buf` (replacing its contents); `Ok(false)` when
    /// none is waiting.
    fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<bool>;
    /// Write one packet; `Ok(false)` when the device cannot take it now.
    fn write(&mut self, pkt: &[u8]) -> io::Result<bool>;
}

/// The loop's clock.
pub trait Clock {
    fn now(&mut self) -> Time;
}

/// Upper bounds (in seconds) of the read-wait histogram's buckets.
pub const READ_WAIT_BUCKETS_S: [f64; 8] = [1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 1e-1];

/// A cumulative-ready histogram of read waits.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WaitHistogram {
    /// Counts per bucket of [`READ_WAIT_BUCKETS_S`] plus one for +Inf
    /// (not cumulative).
    pub counts: [u64; 9],
    pub sum_seconds: f64,
}

impl WaitHistogram {
    pub fn record(&mut self, ns: u64) {
        let s = ns as f64 / 1e9;
        let i = READ_WAIT_BUCKETS_S
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(READ_WAIT_BUCKETS_S.len());
        self.counts[i] += 1;
        self.sum_seconds += s;
    }
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
    pub fn add(&mut self, o: &WaitHistogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts) {
            *a += b;
        }
        self.sum_seconds += o.sum_seconds;
    }
}

/// Recycled packet buffers, so the steady state does not allocate.
#[derive(Debug, Default)]
pub struct Pool(Vec<Vec<u8>>);

impl Pool {
    pub fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_else(|| Vec::with_capacity(BUF_CAP))
    }
    pub fn give(&mut self, b: Vec<u8>) {
        if self.0.len() < MAX_POOL && b.capacity() <= 16 * 1024 {
            self.0.push(b);
        }
    }
}

/// What a turn found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnResult {
    /// Packets read and written.
    pub read: usize,
    pub written: usize,
    /// The last read found the device empty.
    pub drained: bool,
    /// Packets are due (or a write would block): turn again without sleeping
    /// (after waiting for `POLLOUT` if `blocked`).
    pub due: bool,
    pub blocked: bool,
}

impl TurnResult {
    /// Nothing to do until a packet arrives or the link's next deadline.
    pub fn idle(&self) -> bool {
        self.drained && !self.due
    }
}

/// The loop state that outlives one turn.
#[derive(Debug, Default)]
pub struct Turner {
    pub pool: Pool,
    /// Packets due but refused by the device (EAGAIN), oldest first.
    pending: VecDeque<Vec<u8>>,
    pub write_errors: u64,
    /// When the loop last wrote a packet.
    pub last_release: Time,
    /// When a read last found the device empty (or the loop last woke up).
    empty_since: Time,
    pub read_wait: WaitHistogram,
    /// Longest read wait since the last [`Turner::take_max_wait`].
    max_wait_ns: u64,
}

impl Turner {
    pub fn new() -> Turner {
        Turner::default()
    }

    /// The loop woke up at `now` (from a sleep): packets read from here on
    /// were not kept waiting by the loop before this instant.
    pub fn woke(&mut self, now: Time) {
        self.empty_since = now;
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The longest read wait seen since the last call, ns.
    pub fn take_max_wait(&mut self) -> u64 {
        std::mem::take(&mut self.max_wait_ns)
    }

    /// One turn: a read batch, then a write batch.
    pub fn turn(
        &mut self,
        link: &mut Link,
        dev: &mut impl Device,
        clock: &mut impl Clock,
    ) -> io::Result<TurnResult> {
        let mut r = TurnResult::default();
        for _ in 0..READ_BATCH {
            let mut buf = self.pool.take();
            if !dev.read(&mut buf)? {
                self.pool.give(buf);
                self.empty_since = clock.now();
                r.drained = true;
                break;
            }
            let now = clock.now();
            let waited = now.nanos_since(self.empty_since);
            self.read_wait.record(waited);
            self.max_wait_ns = self.max_wait_ns.max(waited);
            r.read += 1;
            if let LinkVerdict::Malformed(b) = link.push(buf, now) {
                self.pool.give(b);
            }
            while let Some((_, _, b)) = link.pop_drop() {
                self.pool.give(b);
            }
        }
        let now = clock.now();
        while r.written < WRITE_BATCH {
            let pkt = match self.pending.pop_front() {
                Some(p) => p,
                None => match link.poll(now) {
                    Some(p) => p,
                    None => break,
                },
            };
            self.last_release = now;
            match dev.write(&pkt) {
                Ok(true) => {
                    r.written += 1;
                    self.pool.give(pkt);
                }
                Ok(false) => {
                    self.pending.push_front(pkt);
                    r.blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.pending.push_front(pkt),
                Err(_) => {
                    self.write_errors += 1;
                    self.pool.give(pkt);
                }
            }
        }
        while let Some((_, _, b)) = link.pop_drop() {
            self.pool.give(b);
        }
        r.due =
            r.blocked || !self.pending.is_empty() || link.next_deadline().is_some_and(|d| d <= now);
        Ok(r)
    }
}

/// How long before a deadline the loop stops sleeping and polls instead, by
/// default.
pub const DEFAULT_SPIN_NS: u64 = 200 * NS_PER_US;
/// The loop spins only when its previous release is at least this long ago.
/// Sparse packets (a ping, a handshake, a low-rate flow) leave within
/// microseconds of their time for little CPU; when releases come back to back
/// (a bulk transfer: 8,600 packets/s at 100 Mbit/s) spinning would hold a
/// whole core, which on a small machine the endpoints need, so the loop
/// sleeps on its 1 us-slack timer instead. A late wake-up then delays packets
/// by the timer's lateness but never slows the link: the link serves each
/// packet from the previous one's finish time, not from when it was handled.
pub const SPIN_AFTER_GAP_NS: u64 = NS_PER_MS;

/// How long an idle loop may sleep at `now` (None = until a packet arrives),
/// given the link's next deadline and the spin rule.
pub fn sleep_for(
    deadline: Option<Time>,
    now: Time,
    last_release: Time,
    spin_ns: u64,
) -> Option<u64> {
    let d = deadline?.nanos_since(now);
    if now.nanos_since(last_release) >= SPIN_AFTER_GAP_NS {
        Some(d.saturating_sub(spin_ns))
    } else {
        Some(d)
    }
}
