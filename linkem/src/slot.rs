//! netem-style slotting (`slot`): packets leave only at slot instants, as on
//! a medium with transmit opportunities (Wi-Fi aggregation, cellular TTIs).
//!
//! Slots form a process in time starting when the configuration is applied:
//! slot k+1 opens `max(1 us, delay + jitter * X)` after slot k (X from the
//! jitter distributions). A packet whose delay is over waits for the next
//! slot at or after that moment; a slot passes at most `packets` packets
//! and `bytes` bytes (the packet that crosses the byte budget still goes),
//! the rest wait for the following slot. Unlike netem, whose next slot is
//! drawn from the moment a packet asks after an idle period, the slots here
//! do not depend on the traffic (a packet arriving at a random time waits
//! for the residual of the current slot interval).

use crate::config::SlotConfig;
use crate::delay::DelayParams;
use crate::pkt::Pkt;
use crate::rng::Rng;
use crate::time::{Time, NS_PER_US};
use std::collections::VecDeque;

/// Catch up at most this many slots after an idle period, then restart the
/// process at the packet's release (bounded work; the process is stationary).
const MAX_CATCH_UP: u32 = 100_000;
/// Shortest slot interval, ns.
const MIN_INTERVAL_NS: u64 = 1_000;

#[derive(Debug, Clone)]
struct Active {
    interval: DelayParams,
    packets: u64,
    bytes: u64,
    next_open: Time,
    packets_left: u64,
    bytes_left: u64,
}

/// The slot stage (a pass-through when slotting is off).
#[derive(Debug, Default)]
pub struct SlotStage {
    active: Option<Active>,
    /// Packets with their assigned slot times (non-decreasing).
    fifo: VecDeque<(Time, Pkt)>,
}

impl SlotStage {
    pub fn new(cfg: Option<&SlotConfig>, at: Time) -> SlotStage {
        let mut s = SlotStage::default();
        s.reconfigure(cfg, at);
        s
    }

    /// New slots from `at` on (the first opens at `at`); packets already
    /// assigned keep their slot times.
    pub fn reconfigure(&mut self, cfg: Option<&SlotConfig>, at: Time) {
        self.active = cfg.map(|c| {
            let packets = c.packets.map_or(u64::MAX, u64::from);
            let bytes = c.bytes.unwrap_or(u64::MAX);
            Active {
                interval: DelayParams {
                    delay_ns: c.delay_us.saturating_mul(NS_PER_US),
                    jitter_ns: c.jitter_us.saturating_mul(NS_PER_US),
                    dist: c.dist,
                },
                packets,
                bytes,
                next_open: at,
                packets_left: packets,
                bytes_left: bytes,
            }
        });
    }

    /// Does this stage hold or shape anything?
    pub fn in_use(&self) -> bool {
        self.active.is_some() || !self.fifo.is_empty()
    }

    /// A packet whose delay ends at `release` (calls in release order).
    pub fn insert(&mut self, release: Time, pkt: Pkt, rng: &mut Rng) {
        let out = match &mut self.active {
            None => release.max(self.fifo.back().map_or(release, |b| b.0)),
            Some(a) => {
                let mut steps = 0;
                while a.next_open < release {
                    steps += 1;
                    if steps > MAX_CATCH_UP {
                        a.next_open = release;
                    } else {
                        a.next_open = a.next_open.plus_nanos(draw(&a.interval, rng));
                    }
                    a.packets_left = a.packets;
                    a.bytes_left = a.bytes;
                }
                let out = a.next_open;
                a.packets_left -= 1;
                a.bytes_left = a.bytes_left.saturating_sub(pkt.len() as u64);
                if a.packets_left == 0 || a.bytes_left == 0 {
                    a.next_open = a.next_open.plus_nanos(draw(&a.interval, rng));
                    a.packets_left = a.packets;
                    a.bytes_left = a.bytes;
                }
                out
            }
        };
        self.fifo.push_back((out, pkt));
    }

    pub fn next_release(&self) -> Option<Time> {
        self.fifo.front().map(|f| f.0)
    }

    pub fn pop_due(&mut self, now: Time) -> Option<Pkt> {
        if self.next_release()? <= now {
            self.fifo.pop_front().map(|f| f.1)
        } else {
            None
        }
    }

    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }
}

fn draw(p: &DelayParams, rng: &mut Rng) -> u64 {
    p.sample(rng).max(MIN_INTERVAL_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(packets: Option<u32>, bytes: Option<u64>) -> SlotConfig {
        SlotConfig {
            delay_us: 1_000,
            jitter_us: 0,
            dist: Default::default(),
            packets,
            bytes,
        }
    }

    fn times(s: &mut SlotStage) -> Vec<u64> {
        std::iter::from_fn(|| {
            let t = s.next_release()?;
            s.pop_due(t).map(|_| t.as_nanos() / 1_000)
        })
        .collect()
    }

    #[test]
    fn packets_wait_for_slots_and_budgets() {
        let mut rng = Rng::new(1);
        let mut s = SlotStage::new(Some(&cfg(Some(2), None)), Time::ZERO);
        for us in [0u64, 10, 20, 30, 2_500] {
            s.insert(Time::from_micros(us), Pkt::test(vec![0; 100]), &mut rng);
        }
        // Slot 0 at 0 us takes the packet due at 0; the next three are due
        // after it: two go at 1 ms, one at 2 ms; the last waits for 3 ms.
        assert_eq!(times(&mut s), vec![0, 1_000, 1_000, 2_000, 3_000]);
        let mut b = SlotStage::new(Some(&cfg(None, Some(150))), Time::ZERO);
        for _ in 0..3 {
            b.insert(Time::from_micros(1), Pkt::test(vec![0; 100]), &mut rng);
        }
        assert_eq!(times(&mut b), vec![1_000, 1_000, 2_000]);
        let mut off = SlotStage::new(None, Time::ZERO);
        off.insert(Time(5), Pkt::test(vec![1]), &mut rng);
        assert_eq!(off.pop_due(Time(5)).map(|p| p.buf), Some(vec![1]));
    }
}
