//! Drop-tail and drop-head FIFOs (mahimahi `drop_tail_packet_queue` /
//! `drop_head_packet_queue`, Linux `pfifo`/`bfifo`/`pfifo_head_drop`).

use super::{InService, Limits, QdiscEvents, QueueDiscipline};
use crate::config::QdiscConfig;
use crate::pkt::Pkt;
use crate::stats::DropCause;
use crate::time::Time;
use std::collections::VecDeque;

/// A FIFO with packet and/or byte limits that drops at the tail (the
/// arriving packet) or at the head (the oldest waiting ones) when full.
#[derive(Debug, Default)]
pub struct Fifo {
    items: VecDeque<Pkt>,
    bytes: u64,
    limits: Limits,
    head_drop: bool,
}

impl Fifo {
    pub fn new(limits: Limits, head_drop: bool) -> Fifo {
        Fifo {
            limits,
            head_drop,
            ..Fifo::default()
        }
    }

    pub fn push(&mut self, pkt: Pkt) {
        self.bytes += pkt.len() as u64;
        self.items.push_back(pkt);
    }

    pub fn pop(&mut self) -> Option<Pkt> {
        let p = self.items.pop_front()?;
        self.bytes -= p.len() as u64;
        Some(p)
    }

    pub fn front(&self) -> Option<&Pkt> {
        self.items.front()
    }

    /// Does a packet of `len` bytes fit (with the packet in service)?
    pub fn fits(&self, len: usize, s: InService) -> bool {
        self.limits
            .fits(self.items.len() + s.count(), self.bytes + s.bytes(), len)
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }
}

impl QueueDiscipline for Fifo {
    fn enqueue(&mut self, pkt: Pkt, _now: Time, s: InService, ev: &mut QdiscEvents) {
        // Drop-head makes room by dropping the oldest packets, if the arriving
        // one would fit in an empty queue.
        if self.head_drop && self.limits.fits(s.count(), s.bytes(), pkt.len()) {
            while !self.fits(pkt.len(), s) {
                if let Some(old) = self.pop() {
                    ev.drop(DropCause::Queue, old);
                }
            }
        }
        if self.fits(pkt.len(), s) {
            self.push(pkt);
        } else {
            ev.drop(DropCause::Queue, pkt);
        }
    }

    fn dequeue(&mut self, _now: Time, _ev: &mut QdiscEvents) -> Option<Pkt> {
        self.pop()
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    fn reconfigure(&mut self, cfg: &QdiscConfig) -> bool {
        match cfg {
            QdiscConfig::DropTail => !self.head_drop,
            QdiscConfig::DropHead => self.head_drop,
            _ => false,
        }
    }

    fn drain(&mut self) -> Vec<Pkt> {
        self.bytes = 0;
        self.items.drain(..).collect()
    }

    fn restore(&mut self, pkt: Pkt) {
        self.push(pkt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u8, len: usize) -> Pkt {
        let mut b = vec![0u8; len];
        b[0] = n;
        Pkt::test(b)
    }

    fn ids(q: &mut Fifo) -> Vec<u8> {
        q.drain().iter().map(|p| p.buf[0]).collect()
    }

    #[test]
    fn tail_and_head_drop() {
        let lim = Limits::new((Some(3), None));
        let none = InService(None);
        let mut ev = QdiscEvents::default();
        let mut tail = Fifo::new(lim, false);
        let mut head = Fifo::new(lim, true);
        for i in 0..5 {
            tail.enqueue(p(i, 100), Time::ZERO, none, &mut ev);
            head.enqueue(p(i, 100), Time::ZERO, none, &mut ev);
        }
        assert_eq!(ids(&mut tail), vec![0, 1, 2]);
        assert_eq!(ids(&mut head), vec![2, 3, 4]);
        let dropped: Vec<u8> = ev.drops.iter().map(|(_, p)| p.buf[0]).collect();
        assert_eq!(dropped, vec![3, 0, 4, 1]);
        // The packet in service counts; a packet that could not fit even in an
        // empty queue is dropped itself, without emptying the queue for nothing.
        let mut h = Fifo::new(Limits::new((None, Some(1000))), true);
        let mut ev = QdiscEvents::default();
        h.enqueue(p(1, 500), Time::ZERO, InService(Some(400)), &mut ev);
        h.enqueue(p(2, 700), Time::ZERO, InService(Some(400)), &mut ev);
        h.enqueue(p(3, 600), Time::ZERO, InService(Some(400)), &mut ev);
        let dropped: Vec<u8> = ev.drops.iter().map(|(_, p)| p.buf[0]).collect();
        assert_eq!(dropped, vec![2, 1]);
        assert_eq!(ids(&mut h), vec![3]);
    }
}
