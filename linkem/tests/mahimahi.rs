//! Differential test of the trace stage against mahimahi's delivery rule: a
//! line-by-line port of mahimahi's `LinkQueue` (`rationalize`,
//! `use_a_delivery_opportunity`, `read_packet`; src/packet/link_queue.cc)
//! with an unlimited drop-tail queue, in nanoseconds instead of
//! milliseconds, against linkem's pipeline with the same trace.

mod common;

use common::*;
use linkem::time::{Time, NS_PER_MS};
use proptest::prelude::*;
use serde_json::json;
use std::collections::VecDeque;

/// Bytes per delivery opportunity (linkem's choice; mahimahi uses 1504,
/// its TUN MTU).
const PACKET_SIZE: u64 = 1500;

struct MahimahiLink {
    schedule: Vec<u64>,
    next_delivery: usize,
    base_timestamp: u64,
    queue: VecDeque<(u64, u64)>,
    in_transit: Option<u64>,
    in_transit_bytes_left: u64,
    output: Vec<(u64, u64)>,
}

impl MahimahiLink {
    fn new(trace_ms: &[u64]) -> MahimahiLink {
        MahimahiLink {
            schedule: trace_ms.iter().map(|t| t * NS_PER_MS).collect(),
            next_delivery: 0,
            base_timestamp: 0,
            queue: VecDeque::new(),
            in_transit: None,
            in_transit_bytes_left: 0,
            output: Vec::new(),
        }
    }

    fn next_delivery_time(&self) -> u64 {
        self.schedule[self.next_delivery] + self.base_timestamp
    }

    fn use_a_delivery_opportunity(&mut self) {
        self.next_delivery = (self.next_delivery + 1) % self.schedule.len();
        if self.next_delivery == 0 {
            self.base_timestamp += self.schedule.last().unwrap();
        }
    }

    fn rationalize(&mut self, now: u64) {
        while self.next_delivery_time() <= now {
            let this_delivery_time = self.next_delivery_time();
            let mut bytes_left_in_this_delivery = PACKET_SIZE;
            self.use_a_delivery_opportunity();
            while bytes_left_in_this_delivery > 0 {
                if self.in_transit_bytes_left == 0 {
                    let Some((seq, len)) = self.queue.pop_front() else {
                        break;
                    };
                    self.in_transit = Some(seq);
                    self.in_transit_bytes_left = len;
                }
                let amount = bytes_left_in_this_delivery.min(self.in_transit_bytes_left);
                self.in_transit_bytes_left -= amount;
                bytes_left_in_this_delivery -= amount;
                if self.in_transit_bytes_left == 0 {
                    self.output
                        .push((self.in_transit.take().unwrap(), this_delivery_time));
                }
            }
        }
    }

    fn read_packet(&mut self, now: u64, seq: u64, len: u64) {
        self.rationalize(now);
        self.queue.push_back((seq, len));
    }
}

fn trace() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(0u64..4, 1..40).prop_map(|gaps| {
        let mut t = 0;
        let mut v: Vec<u64> = gaps
            .iter()
            .map(|g| {
                t += g;
                t
            })
            .collect();
        if let Some(last) = v.last_mut() {
            *last += 1;
        }
        v
    })
}

/// Arrival gaps: some land exactly on millisecond instants (ties with
/// opportunities), most do not.
fn arrivals() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec(
        (
            prop_oneof![0u64..3_000_000, (0u64..4).prop_map(|m| m * NS_PER_MS)],
            40u64..=1500,
        ),
        1..400,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn trace_stage_delivers_as_mahimahi(trace in trace(), gaps in arrivals()) {
        let mut t = 0;
        let arr: Vec<Arrival> = gaps
            .iter()
            .map(|&(g, len)| {
                t += g;
                Arrival::new(Time(t), len as usize)
            })
            .collect();
        let mut mm = MahimahiLink::new(&trace);
        for (i, a) in arr.iter().enumerate() {
            mm.read_packet(a.at.as_nanos(), i as u64, a.len as u64);
        }
        while !mm.queue.is_empty() || mm.in_transit.is_some() {
            let t = mm.next_delivery_time();
            mm.rationalize(t);
        }
        let out = run(&dir(json!({"trace_ms": trace, "queue_limit_bytes": 1_000_000_000u64})), 1, &arr);
        prop_assert!(out.dropped.is_empty());
        let ours: Vec<(u64, u64)> = out.delivered.iter().map(|(s, t)| (*s, t.as_nanos())).collect();
        prop_assert_eq!(ours, mm.output);
    }
}
