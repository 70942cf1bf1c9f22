//! The loop's scheduling rules in virtual time (`linkem::turn`): a simulated
//! TUN device with a ring, read and write costs on a virtual clock.
//! Invariants: under a load the loop can carry, no packet waits unread in the
//! ring longer than one read batch plus one write batch; the loop never
//! sleeps while the ring holds a packet; the recorded read wait is an upper
//! bound of the true one; every packet leaves within the same bound of its
//! release time.

mod common;

use common::flow_packet;
use linkem::link::Link;
use linkem::time::{Time, NS_PER_MS};
use linkem::turn::{Clock, Device, Turner, READ_BATCH, WRITE_BATCH};
use linkem::Config;
use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

const READ_NS: u64 = 500;
const WRITE_NS: u64 = 3_000;

struct SimClock(Rc<Cell<Time>>);

impl Clock for SimClock {
    fn now(&mut self) -> Time {
        self.0.get()
    }
}

struct FakeTun {
    clock: Rc<Cell<Time>>,
    arrivals: VecDeque<(Time, Vec<u8>)>,
    ring: VecDeque<(Time, Vec<u8>)>,
    capacity: usize,
    ring_drops: usize,
    /// True time each packet waited in the ring.
    waits: Vec<u64>,
    written: Vec<(Time, Vec<u8>)>,
}

impl FakeTun {
    fn fill(&mut self) {
        let now = self.clock.get();
        while self.arrivals.front().is_some_and(|a| a.0 <= now) {
            let a = self.arrivals.pop_front().unwrap();
            if self.ring.len() < self.capacity {
                self.ring.push_back(a);
            } else {
                self.ring_drops += 1;
            }
        }
    }
    fn spend(&self, ns: u64) {
        self.clock.set(self.clock.get().plus_nanos(ns));
    }
}

impl Device for FakeTun {
    fn read(&mut self, buf: &mut Vec<u8>) -> std::io::Result<bool> {
        self.fill();
        self.spend(READ_NS);
        match self.ring.pop_front() {
            Some((t, p)) => {
                self.waits.push(self.clock.get().nanos_since(t));
                buf.clear();
                buf.extend_from_slice(&p);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn write(&mut self, pkt: &[u8]) -> std::io::Result<bool> {
        self.spend(WRITE_NS);
        self.written.push((self.clock.get(), pkt.to_vec()));
        Ok(true)
    }
}

/// Run arrivals through a link with `delay_us` in the simulated loop.
fn simulate(arrivals: Vec<Time>, delay_us: u64) -> (FakeTun, Turner) {
    let clock = Rc::new(Cell::new(Time::ZERO));
    let cfg = Config::from_json(&format!(r#"{{"downlink": {{"delay_us": {delay_us}}}}}"#)).unwrap();
    let mut link = Link::new(
        "10.71.1.0/24".parse().unwrap(),
        "10.71.2.0/24".parse().unwrap(),
        cfg,
        Time::ZERO,
    );
    let mut dev = FakeTun {
        clock: clock.clone(),
        arrivals: arrivals
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, flow_packet(i as u64, 1000, 0)))
            .collect(),
        ring: VecDeque::new(),
        capacity: 1000,
        ring_drops: 0,
        waits: Vec::new(),
        written: Vec::new(),
    };
    let mut turner = Turner::new();
    let mut sim = SimClock(clock.clone());
    loop {
        let r = turner.turn(&mut link, &mut dev, &mut sim).unwrap();
        if r.idle() {
            dev.fill();
            if !dev.ring.is_empty() {
                continue; // ppoll(POLLIN) returns at once
            }
            let next = [dev.arrivals.front().map(|a| a.0), link.next_deadline()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) => {
                    clock.set(clock.get().max(t));
                    turner.woke(clock.get());
                }
                None => break,
            }
        }
    }
    (dev, turner)
}

#[test]
fn waits_in_the_ring_are_bounded_by_one_batch_each_way() {
    // 200,000 packets/s for 0.5 s, each costing the loop 3.5 us: 70 % busy.
    let arrivals: Vec<Time> = (0..100_000u64).map(|i| Time(i * 5_000)).collect();
    let (dev, mut turner) = simulate(arrivals, 1_000);
    assert_eq!(dev.ring_drops, 0);
    assert_eq!(dev.written.len(), 100_000);
    let bound = READ_BATCH as u64 * READ_NS + WRITE_BATCH as u64 * WRITE_NS + READ_NS;
    let worst = *dev.waits.iter().max().unwrap();
    assert!(
        worst <= bound,
        "a packet waited {worst} ns unread (bound {bound})"
    );
    // The recorded wait bounds the true one from above, within a batch.
    let recorded = turner.take_max_wait();
    assert!(
        recorded >= worst && recorded <= bound + WRITE_NS,
        "{recorded} vs {worst}"
    );
    assert_eq!(turner.read_wait.count(), 100_000);
    // Every packet leaves within the bound of its release (arrival + 1 ms).
    for (t, p) in &dev.written {
        let seq = common::seq_of(p);
        let late = t.nanos_since(Time(seq * 5_000 + NS_PER_MS));
        assert!(
            late <= bound + WRITE_NS,
            "packet {seq} written {late} ns late"
        );
    }
}

#[test]
fn a_burst_is_read_before_the_loop_sleeps() {
    // 800 packets at once, then one more much later.
    let mut arrivals = vec![Time::from_micros(10); 800];
    arrivals.push(Time::from_millis(50));
    let (dev, _) = simulate(arrivals, 0);
    assert_eq!(dev.ring_drops, 0);
    assert_eq!(dev.written.len(), 801);
    // Unshaped packets leave as they are read: reads and writes alternate,
    // so the first packets go out before the last of the burst is read.
    let first_out = dev.written[0].0;
    let last_read = Time::from_micros(10).plus_nanos(*dev.waits[..800].iter().max().unwrap());
    assert!(first_out < last_read);
    assert!(
        dev.waits[800] <= READ_NS,
        "after the burst the loop slept and woke for the late packet"
    );
}
