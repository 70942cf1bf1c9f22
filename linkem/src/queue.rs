//! Drop-tail FIFO in front of the link server, with packet and/or byte
//! limits. The packet being serialized stays at the head and counts toward
//! the occupancy (the whole bottleneck buffer).

use std::collections::VecDeque;

/// A packet waiting for (or in) serialization.
pub trait ByteLen {
    fn size(&self) -> usize;
}

/// Drop-tail FIFO with occupancy counters.
#[derive(Debug, Clone)]
pub struct Queue<T> {
    items: VecDeque<T>,
    bytes: u64,
    limit_packets: Option<u32>,
    limit_bytes: Option<u64>,
}

impl<T: ByteLen> Queue<T> {
    pub fn new(limits: (Option<u32>, Option<u64>)) -> Queue<T> {
        Queue {
            items: VecDeque::new(),
            bytes: 0,
            limit_packets: limits.0,
            limit_bytes: limits.1,
        }
    }

    /// New limits apply to future arrivals; packets already queued stay.
    pub fn set_limits(&mut self, limits: (Option<u32>, Option<u64>)) {
        self.limit_packets = limits.0;
        self.limit_bytes = limits.1;
    }

    pub fn limits(&self) -> (Option<u32>, Option<u64>) {
        (self.limit_packets, self.limit_bytes)
    }

    /// Would a packet of `len` bytes fit?
    pub fn admits(&self, len: usize) -> bool {
        let pk_ok = self
            .limit_packets
            .is_none_or(|l| self.items.len() < l as usize);
        let by_ok = self
            .limit_bytes
            .is_none_or(|l| self.bytes.saturating_add(len as u64) <= l);
        pk_ok && by_ok
    }

    /// Append (the caller checked [`Queue::admits`]).
    pub fn push(&mut self, item: T) {
        self.bytes += item.size() as u64;
        self.items.push_back(item);
    }

    pub fn front(&self) -> Option<&T> {
        self.items.front()
    }

    pub fn pop(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        self.bytes -= item.size() as u64;
        Some(item)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ByteLen for usize {
        fn size(&self) -> usize {
            *self
        }
    }

    #[test]
    fn limits() {
        let mut q: Queue<usize> = Queue::new((Some(2), None));
        assert!(q.admits(1500));
        q.push(1500);
        q.push(100);
        assert!(!q.admits(1));
        assert_eq!((q.len(), q.bytes()), (2, 1600));
        q.set_limits((None, Some(2000)));
        assert!(q.admits(400));
        assert!(!q.admits(401));
        assert_eq!(q.pop(), Some(1500));
        assert_eq!(q.bytes(), 100);
    }
}
