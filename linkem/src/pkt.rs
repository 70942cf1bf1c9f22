//! A packet inside one direction's pipeline.

use crate::packet::ProtoClass;
use crate::time::Time;

/// A packet with what the stages need to know about it.
#[derive(Debug)]
pub struct Pkt {
    /// The whole IP packet (what is written back).
    pub buf: Vec<u8>,
    pub proto: ProtoClass,
    /// When it reached the link (after outage, loss and duplication); the
    /// queue disciplines measure sojourn times from here.
    pub arrival: Time,
    /// Chosen by netem-style reordering: released at its departure from the
    /// link, without the delay.
    pub skip_delay: bool,
}

impl Pkt {
    pub fn new(buf: Vec<u8>, proto: ProtoClass, arrival: Time) -> Pkt {
        Pkt {
            buf,
            proto,
            arrival,
            skip_delay: false,
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// A packet of `buf` arriving at time 0 (tests).
    pub fn test(buf: Vec<u8>) -> Pkt {
        Pkt::new(buf, ProtoClass::Udp, Time::ZERO)
    }
}
