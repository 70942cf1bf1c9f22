//! ECN codepoints of an IP packet (RFC 3168) and CE marking.
//!
//! Like Linux's `INET_ECN_set_ce`: an ECT(0) or ECT(1) packet is marked CE
//! (the IPv4 header checksum updated incrementally, RFC 1624), a CE packet
//! counts as marked already, a Not-ECT packet cannot be marked (the caller
//! drops it instead). Never panics on short or garbled buffers.

/// The two ECN bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    NotEct = 0,
    Ect1 = 1,
    Ect0 = 2,
    Ce = 3,
}

impl Ecn {
    fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
}

/// The packet's ECN codepoint (None if it is not a plausible IP packet).
pub fn codepoint(pkt: &[u8]) -> Option<Ecn> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(Ecn::from_bits(pkt[1])),
        6 if pkt.len() >= 40 => Some(Ecn::from_bits(pkt[1] >> 4)),
        _ => None,
    }
}

/// Mark the packet CE if it is ECN-capable; `true` if it now carries CE.
pub fn set_ce(pkt: &mut [u8]) -> bool {
    match codepoint(pkt) {
        Some(Ecn::Ce) => true,
        Some(Ecn::Ect0 | Ecn::Ect1) => {
            if pkt[0] >> 4 == 4 {
                let old = u16::from_be_bytes([pkt[0], pkt[1]]);
                pkt[1] |= 3;
                let new = u16::from_be_bytes([pkt[0], pkt[1]]);
                let hc = u16::from_be_bytes([pkt[10], pkt[11]]);
                pkt[10..12].copy_from_slice(&checksum_update(hc, old, new).to_be_bytes());
            } else {
                pkt[1] |= 0x30;
            }
            true
        }
        _ => false,
    }
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The IPv4 header checksum of `hdr` (for tests and fixtures).
pub fn ipv4_header_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, c) in hdr.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(tos: u8) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[1] = tos;
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 71, 2, 10]);
        p[16..20].copy_from_slice(&[10, 71, 1, 10]);
        let c = ipv4_header_checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn ipv4_marking_keeps_the_checksum_valid() {
        for tos in [0x01u8, 0x02, 0xb9, 0xfe] {
            let mut p = v4(tos);
            assert!(set_ce(&mut p), "tos {tos:#x}");
            assert_eq!(p[1], tos | 3);
            assert_eq!(
                u16::from_be_bytes([p[10], p[11]]),
                ipv4_header_checksum(&p[..20])
            );
            assert_eq!(codepoint(&p), Some(Ecn::Ce));
        }
        let mut not_ect = v4(0xb8);
        assert!(!set_ce(&mut not_ect));
        assert_eq!(not_ect, v4(0xb8));
        let mut ce = v4(0x03);
        assert!(set_ce(&mut ce));
        assert_eq!(ce, v4(0x03));
    }

    #[test]
    fn ipv6_marking() {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[1] = 0x20; // traffic class 0x02: ECT(0)
        assert_eq!(codepoint(&p), Some(Ecn::Ect0));
        assert!(set_ce(&mut p));
        assert_eq!((p[0], p[1]), (0x60, 0x30));
        p[1] = 0;
        assert!(!set_ce(&mut p));
    }

    #[test]
    fn garbage_is_not_marked() {
        assert!(!set_ce(&mut []));
        assert!(!set_ce(&mut [0x45, 2, 0]));
        assert!(!set_ce(&mut [0x12; 60]));
    }
}
