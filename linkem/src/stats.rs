//! Plain counters kept by the (single-threaded) core, and the snapshot the
//! driver publishes for the metrics endpoint.

use crate::packet::ProtoClass;

/// Why a packet was dropped (bounded label set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// The loss model before the queue.
    Loss = 0,
    /// The queue was full (tail drop, head drop, fq_codel's fat-flow drop).
    Queue = 1,
    /// The link was down.
    Outage = 2,
    /// The active queue management (CoDel, fq_codel's CoDel, PIE) dropped it.
    Aqm = 3,
    /// The loss model after the link (`loss_after`).
    LossAfter = 4,
    /// The kernel dropped it before linkem read it: the TUN device's queue
    /// was full (counted by the driver from the device's `tx_dropped`).
    TunQueue = 5,
}

/// Number of [`DropCause`]s.
pub const DROP_CAUSES: usize = 6;

impl DropCause {
    pub const ALL: [DropCause; DROP_CAUSES] = [
        DropCause::Loss,
        DropCause::Queue,
        DropCause::Outage,
        DropCause::Aqm,
        DropCause::LossAfter,
        DropCause::TunQueue,
    ];
    pub fn label(self) -> &'static str {
        match self {
            DropCause::Loss => "loss",
            DropCause::Queue => "queue",
            DropCause::Outage => "outage",
            DropCause::Aqm => "aqm",
            DropCause::LossAfter => "loss_after",
            DropCause::TunQueue => "tun_queue",
        }
    }
}

/// Traffic direction (bounded label set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Downlink,
    Uplink,
    Other,
}

impl Direction {
    pub const ALL: [Direction; 3] = [Direction::Downlink, Direction::Uplink, Direction::Other];
    pub fn label(self) -> &'static str {
        match self {
            Direction::Downlink => "downlink",
            Direction::Uplink => "uplink",
            Direction::Other => "other",
        }
    }
}

/// Per-direction counters, indexed by [`ProtoClass`] / [`DropCause`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirCounters {
    pub received_packets: [u64; 4],
    pub received_bytes: [u64; 4],
    pub delivered_packets: [u64; 4],
    pub delivered_bytes: [u64; 4],
    pub drops: [u64; DROP_CAUSES],
    /// Copies made by duplication (each also counts when delivered or dropped).
    pub duplicated: u64,
    /// Packets with a flipped bit (they are delivered; the receiver drops them).
    pub corrupted: u64,
    /// ECN-capable packets marked CE instead of being dropped.
    pub ecn_marked: u64,
}

impl DirCounters {
    pub fn received(&mut self, p: ProtoClass, len: usize) {
        self.received_packets[p as usize] += 1;
        self.received_bytes[p as usize] += len as u64;
    }
    pub fn delivered(&mut self, p: ProtoClass, len: usize) {
        self.delivered_packets[p as usize] += 1;
        self.delivered_bytes[p as usize] += len as u64;
    }
    pub fn dropped(&mut self, c: DropCause) {
        self.drops[c as usize] += 1;
    }
    /// Drops by the link itself (every cause but the TUN queue's, which
    /// happen before a packet is received).
    pub fn link_drops(&self) -> u64 {
        self.total_drops() - self.drops[DropCause::TunQueue as usize]
    }
    pub fn total_received(&self) -> u64 {
        self.received_packets.iter().sum()
    }
    pub fn total_delivered(&self) -> u64 {
        self.delivered_packets.iter().sum()
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// Gauges describing one direction at snapshot time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DirGauges {
    pub queue_packets: u64,
    pub queue_bytes: u64,
    pub delay_line_packets: u64,
    /// Rate in force, bit/s; 0 = unlimited.
    pub rate_bps: u64,
    pub delay_seconds: f64,
    pub jitter_seconds: f64,
    pub loss_ratio: f64,
}

/// Everything the metrics endpoint shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Indexed like [`Direction::ALL`].
    pub counters: [DirCounters; 3],
    /// Indexed like [`Direction::ALL`] (the "other" direction is unshaped).
    pub gauges: [DirGauges; 3],
    pub config_applied_total: u64,
    pub malformed_packets_total: u64,
    pub write_errors_total: u64,
    /// How long packets waited unread in the TUN device because of the loop's own work (driver).
    pub read_wait: crate::turn::WaitHistogram,
}

impl DirCounters {
    /// Add `o`'s counts to these.
    pub fn add(&mut self, o: &DirCounters) {
        let add = |a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        add(&mut self.received_packets, &o.received_packets);
        add(&mut self.received_bytes, &o.received_bytes);
        add(&mut self.delivered_packets, &o.delivered_packets);
        add(&mut self.delivered_bytes, &o.delivered_bytes);
        add(&mut self.drops, &o.drops);
        self.duplicated += o.duplicated;
        self.corrupted += o.corrupted;
        self.ecn_marked += o.ecn_marked;
    }
}

impl Snapshot {
    /// Fold in the snapshot of another loop running the same configuration (one loop per TUN device):
    /// counters and occupancy gauges add up; the configured gauges (rate, delay, jitter, loss) are the same in
    /// both and are kept; `config_applied_total` is the larger of the two (both loops apply every configuration).
    pub fn merge(&mut self, o: &Snapshot) {
        for (a, b) in self.counters.iter_mut().zip(&o.counters) {
            a.add(b);
        }
        for (a, b) in self.gauges.iter_mut().zip(&o.gauges) {
            a.queue_packets += b.queue_packets;
            a.queue_bytes += b.queue_bytes;
            a.delay_line_packets += b.delay_line_packets;
        }
        self.config_applied_total = self.config_applied_total.max(o.config_applied_total);
        self.malformed_packets_total += o.malformed_packets_total;
        self.write_errors_total += o.write_errors_total;
        self.read_wait.add(&o.read_wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_keeps_configured_gauges() {
        let mut a = Snapshot::default();
        a.counters[0].received(ProtoClass::Tcp, 100);
        a.counters[0].dropped(DropCause::Queue);
        a.gauges[0].queue_packets = 2;
        a.gauges[0].rate_bps = 5;
        a.config_applied_total = 3;
        a.malformed_packets_total = 1;
        let mut b = a.clone();
        b.counters[2].delivered(ProtoClass::Udp, 7);
        b.gauges[0].delay_line_packets = 4;
        b.config_applied_total = 2;
        b.write_errors_total = 9;
        a.merge(&b);
        assert_eq!(a.counters[0].received_bytes[ProtoClass::Tcp as usize], 200);
        assert_eq!(a.counters[0].drops[DropCause::Queue as usize], 2);
        assert_eq!(a.counters[2].total_delivered(), 1);
        assert_eq!(a.gauges[0].queue_packets, 4);
        assert_eq!(a.gauges[0].delay_line_packets, 4);
        assert_eq!(a.gauges[0].rate_bps, 5);
        assert_eq!(a.config_applied_total, 3);
        assert_eq!(a.malformed_packets_total, 2);
        assert_eq!(a.write_errors_total, 9);
    }
}
