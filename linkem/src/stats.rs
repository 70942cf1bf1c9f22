//! Plain counters kept by the (single-threaded) core, and the snapshot the
//! driver publishes for the metrics endpoint.

use crate::packet::ProtoClass;

/// Why a packet was dropped (bounded label set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    Loss = 0,
    Queue = 1,
    Outage = 2,
}

impl DropCause {
    pub const ALL: [DropCause; 3] = [DropCause::Loss, DropCause::Queue, DropCause::Outage];
    pub fn label(self) -> &'static str {
        match self {
            DropCause::Loss => "loss",
            DropCause::Queue => "queue",
            DropCause::Outage => "outage",
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
    pub drops: [u64; 3],
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
}
