//! Queue disciplines in front of the link server, behind one trait (as
//! mahimahi's `AbstractPacketQueue`): drop-tail, drop-head, CoDel, fq_codel
//! and PIE, chosen by name in [`build`].
//!
//! A discipline holds the packets waiting for the link; the packet being
//! serialized has left it but still counts against the limits (the whole
//! bottleneck buffer, as linkem has always counted it). Drops and ECN marks
//! are reported through [`QdiscEvents`], whether they happen on arrival
//! (tail drop, head drop, PIE's early drop) or when the link takes the next
//! packet (CoDel).

mod codel;
mod fifo;
mod fq_codel;
mod pie;

pub use codel::{Codel, CodelParams, CodelVars};
pub use fifo::Fifo;
pub use fq_codel::FqCodel;
pub use pie::Pie;

use crate::config::QdiscConfig;
use crate::pkt::Pkt;
use crate::rng::Rng;
use crate::stats::DropCause;
use crate::time::Time;

/// The IP MTU the AQMs use for their "less than one/two packets queued"
/// rules (Linux: `psched_mtu`, 1514 with the Ethernet header).
pub const MTU: u64 = 1500;

/// Queue limits; `None` = no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub packets: Option<u32>,
    pub bytes: Option<u64>,
}

impl Limits {
    pub fn new((packets, bytes): (Option<u32>, Option<u64>)) -> Limits {
        Limits { packets, bytes }
    }

    /// Would `len` more bytes fit next to `count` packets of `bytes` bytes?
    pub fn fits(&self, count: usize, bytes: u64, len: usize) -> bool {
        self.packets.is_none_or(|l| count < l as usize)
            && self
                .bytes
                .is_none_or(|l| bytes.saturating_add(len as u64) <= l)
    }

    /// Is the queue over its limits?
    pub fn exceeded(&self, count: usize, bytes: u64) -> bool {
        self.packets.is_some_and(|l| count > l as usize) || self.bytes.is_some_and(|l| bytes > l)
    }
}

/// The packet being serialized, which counts against the limits.
#[derive(Debug, Clone, Copy, Default)]
pub struct InService(pub Option<usize>);

impl InService {
    pub fn count(self) -> usize {
        usize::from(self.0.is_some())
    }
    pub fn bytes(self) -> u64 {
        self.0.unwrap_or(0) as u64
    }
}

/// Drops and marks a discipline made, for the pipeline to count and hand back.
#[derive(Debug, Default)]
pub struct QdiscEvents {
    pub drops: Vec<(DropCause, Pkt)>,
    pub ecn_marks: u64,
}

impl QdiscEvents {
    pub fn drop(&mut self, cause: DropCause, pkt: Pkt) {
        self.drops.push((cause, pkt));
    }
}

/// A queue discipline (sans-IO: every call gets `now`).
pub trait QueueDiscipline: Send + std::fmt::Debug {
    /// Offer a packet arriving at `now`; it is kept, or it (or others) are
    /// dropped into `ev`.
    fn enqueue(&mut self, pkt: Pkt, now: Time, in_service: InService, ev: &mut QdiscEvents);
    /// The next packet for the link, which is free at `now`. AQM drops and
    /// marks happen here.
    fn dequeue(&mut self, now: Time, ev: &mut QdiscEvents) -> Option<Pkt>;
    /// When [`QueueDiscipline::on_timer`] must run next (PIE's update).
    fn next_timer(&self) -> Option<Time> {
        None
    }
    fn on_timer(&mut self, _now: Time) {}
    /// Packets waiting (not counting the one being serialized).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes waiting.
    fn bytes(&self) -> u64;
    /// New limits for future arrivals; packets already queued stay.
    fn set_limits(&mut self, limits: Limits);
    /// Swap in the parameters of `cfg`, keeping the state, if it is of this
    /// discipline's kind; `false` if it is not.
    fn reconfigure(&mut self, cfg: &QdiscConfig) -> bool;
    /// Every waiting packet, in the order it would have been served.
    fn drain(&mut self) -> Vec<Pkt>;
    /// Take back a packet drained from another discipline (no admission
    /// check, its arrival time kept).
    fn restore(&mut self, pkt: Pkt);
}

/// The discipline `cfg` names, with `limits`, starting at `now`; `rng`
/// seeds its randomness (PIE's drops, fq_codel's flow hash).
pub fn build(cfg: &QdiscConfig, limits: Limits, now: Time, rng: Rng) -> Box<dyn QueueDiscipline> {
    match cfg {
        QdiscConfig::DropTail => Box::new(Fifo::new(limits, false)),
        QdiscConfig::DropHead => Box::new(Fifo::new(limits, true)),
        QdiscConfig::Codel { .. } => Box::new(Codel::new(cfg, limits)),
        QdiscConfig::FqCodel { .. } => Box::new(FqCodel::new(cfg, limits, rng.clone().next_u64())),
        QdiscConfig::Pie { .. } => Box::new(Pie::new(cfg, limits, now, rng)),
    }
}
