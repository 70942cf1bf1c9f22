//! Checked view of an IP packet read from the TUN device.
//!
//! Packets are untrusted: every access is bounds-checked and [`classify`]
//! returns an error instead of panicking, whatever the bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use thiserror::Error;

/// Why a packet could not be classified.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum PacketError {
    #[error("empty packet")]
    Empty,
    #[error("unsupported IP version {0}")]
    BadVersion(u8),
    #[error("truncated packet: {0}")]
    Truncated(&'static str),
    #[error("bad header: {0}")]
    BadHeader(&'static str),
}

/// Transport protocol, as carried in the IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
    Other(u8),
}

impl Protocol {
    pub fn from_number(n: u8) -> Protocol {
        match n {
            6 => Protocol::Tcp,
            17 => Protocol::Udp,
            1 => Protocol::Icmp,
            58 => Protocol::Icmpv6,
            other => Protocol::Other(other),
        }
    }

    /// Index into the bounded metrics label set tcp|udp|icmp|other.
    pub fn class(self) -> ProtoClass {
        match self {
            Protocol::Tcp => ProtoClass::Tcp,
            Protocol::Udp => ProtoClass::Udp,
            Protocol::Icmp | Protocol::Icmpv6 => ProtoClass::Icmp,
            Protocol::Other(_) => ProtoClass::Other,
        }
    }
}

/// The bounded protocol label used in metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtoClass {
    Tcp = 0,
    Udp = 1,
    Icmp = 2,
    Other = 3,
}

impl ProtoClass {
    pub const ALL: [ProtoClass; 4] = [
        ProtoClass::Tcp,
        ProtoClass::Udp,
        ProtoClass::Icmp,
        ProtoClass::Other,
    ];
    pub fn label(self) -> &'static str {
        match self {
            ProtoClass::Tcp => "tcp",
            ProtoClass::Udp => "udp",
            ProtoClass::Icmp => "icmp",
            ProtoClass::Other => "other",
        }
    }
}

/// What the emulator needs to know about a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub version: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: Protocol,
    /// Length of the buffer (what will be written back), in bytes.
    pub len: usize,
    /// Length declared by the IP header.
    pub ip_len: usize,
    /// Offset of the transport header (past the IPv4 options or the IPv6
    /// extension headers walked), `<= ip_len`.
    pub l4_offset: usize,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at + 2)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// Parse the IP header of `bytes`; never panics.
pub fn classify(bytes: &[u8]) -> Result<Meta, PacketError> {
    let first = *bytes.first().ok_or(PacketError::Empty)?;
    match first >> 4 {
        4 => classify_v4(bytes),
        6 => classify_v6(bytes),
        v => Err(PacketError::BadVersion(v)),
    }
}

fn classify_v4(b: &[u8]) -> Result<Meta, PacketError> {
    if b.len() < 20 {
        return Err(PacketError::Truncated("IPv4 header shorter than 20 bytes"));
    }
    let ihl = usize::from(b[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(PacketError::BadHeader("IPv4 IHL below 5"));
    }
    if b.len() < ihl {
        return Err(PacketError::Truncated("IPv4 options past end of buffer"));
    }
    let total = usize::from(be16(b, 2).ok_or(PacketError::Truncated("IPv4 length"))?);
    if total < ihl {
        return Err(PacketError::BadHeader(
            "IPv4 total length below header length",
        ));
    }
    if total > b.len() {
        return Err(PacketError::Truncated(
            "IPv4 total length past end of buffer",
        ));
    }
    let src = Ipv4Addr::new(b[12], b[13], b[14], b[15]);
    let dst = Ipv4Addr::new(b[16], b[17], b[18], b[19]);
    Ok(Meta {
        version: 4,
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        protocol: Protocol::from_number(b[9]),
        len: b.len(),
        ip_len: total,
        l4_offset: ihl,
    })
}

fn addr16(b: &[u8], at: usize) -> Option<Ipv6Addr> {
    let s: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
    Some(Ipv6Addr::from(s))
}

fn classify_v6(b: &[u8]) -> Result<Meta, PacketError> {
    if b.len() < 40 {
        return Err(PacketError::Truncated("IPv6 header shorter than 40 bytes"));
    }
    let payload = usize::from(be16(b, 4).ok_or(PacketError::Truncated("IPv6 length"))?);
    let total = 40 + payload;
    if total > b.len() {
        return Err(PacketError::Truncated(
            "IPv6 payload length past end of buffer",
        ));
    }
    let src = addr16(b, 8).ok_or(PacketError::Truncated("IPv6 source"))?;
    let dst = addr16(b, 24).ok_or(PacketError::Truncated("IPv6 destination"))?;
    let (protocol, l4_offset) = v6_upper_protocol(&b[..total], b[6]);
    Ok(Meta {
        version: 6,
        src: IpAddr::V6(src),
        dst: IpAddr::V6(dst),
        protocol,
        len: b.len(),
        ip_len: total,
        l4_offset,
    })
}

/// Walk (a bounded number of) IPv6 extension headers to the upper protocol
/// and its offset. A chain that runs past the packet yields
/// `Other(next_header)`.
fn v6_upper_protocol(b: &[u8], mut next: u8) -> (Protocol, usize) {
    let mut at = 40usize;
    for _ in 0..8 {
        let hdr_len = match next {
            0 | 43 | 60 => match b.get(at + 1) {
                Some(&l) => (usize::from(l) + 1) * 8,
                None => return (Protocol::Other(next), at),
            },
            44 => 8,
            51 => match b.get(at + 1) {
                Some(&l) => (usize::from(l) + 2) * 4,
                None => return (Protocol::Other(next), at),
            },
            _ => return (Protocol::from_number(next), at),
        };
        match b.get(at) {
            Some(&n) if at + hdr_len <= b.len() => {
                next = n;
                at += hdr_len;
            }
            _ => return (Protocol::Other(next), at),
        }
    }
    (Protocol::Other(next), at)
}

/// A hash of the packet's flow (addresses, protocol and, for TCP/UDP, ports)
/// mixed with `perturbation`; packets that cannot be parsed share one flow.
pub fn flow_hash(bytes: &[u8], perturbation: u64) -> u64 {
    let Ok(m) = classify(bytes) else {
        return perturbation;
    };
    let mut h = perturbation ^ 0x9E37_79B9_7F4A_7C15;
    let mut mix = |x: u64| {
        h = (h ^ x).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 29;
    };
    for a in [m.src, m.dst] {
        match a {
            IpAddr::V4(v) => mix(u64::from(u32::from(v))),
            IpAddr::V6(v) => {
                let x = u128::from(v);
                mix(x as u64);
                mix((x >> 64) as u64);
            }
        }
    }
    let proto = match m.protocol {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Icmp => 1,
        Protocol::Icmpv6 => 58,
        Protocol::Other(n) => n,
    };
    mix(u64::from(proto));
    let fragment = m.version == 4 && be16(bytes, 6).is_some_and(|f| f & 0x1fff != 0);
    if matches!(m.protocol, Protocol::Tcp | Protocol::Udp) && !fragment {
        if let Some(p) = bytes.get(m.l4_offset..m.l4_offset + 4) {
            mix(u64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]])));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(proto: u8, payload: usize) -> Vec<u8> {
        let total = 20 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&[10, 71, 2, 10]);
        p[16..20].copy_from_slice(&[10, 71, 1, 10]);
        p
    }

    #[test]
    fn ipv4_tcp() {
        let p = v4(6, 20);
        let m = classify(&p).unwrap();
        assert_eq!(m.version, 4);
        assert_eq!(m.protocol, Protocol::Tcp);
        assert_eq!(m.src, "10.71.2.10".parse::<IpAddr>().unwrap());
        assert_eq!(m.dst, "10.71.1.10".parse::<IpAddr>().unwrap());
        assert_eq!((m.len, m.ip_len, m.l4_offset), (40, 40, 20));
    }

    #[test]
    fn flow_hash_separates_ports_and_ignores_payload() {
        let mut a = v4(17, 20);
        a[20..24].copy_from_slice(&[0x1f, 0x90, 0x01, 0xbb]);
        let mut b = a.clone();
        b[30] = 99; // payload
        let mut c = a.clone();
        c[21] = 0x91; // source port
        assert_eq!(flow_hash(&a, 1), flow_hash(&b, 1));
        assert_ne!(flow_hash(&a, 1), flow_hash(&c, 1));
        assert_ne!(flow_hash(&a, 1), flow_hash(&a, 2));
        assert_eq!(flow_hash(&[1, 2, 3], 7), 7);
    }

    #[test]
    fn ipv4_udp_and_icmp() {
        assert_eq!(classify(&v4(17, 8)).unwrap().protocol, Protocol::Udp);
        let m = classify(&v4(1, 8)).unwrap();
        assert_eq!(m.protocol, Protocol::Icmp);
        assert_eq!(m.protocol.class().label(), "icmp");
        assert_eq!(
            classify(&v4(47, 8)).unwrap().protocol.class(),
            ProtoClass::Other
        );
    }

    #[test]
    fn ipv6_udp() {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&8u16.to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[8..24].copy_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        p[24..40].copy_from_slice(&"fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        let m = classify(&p).unwrap();
        assert_eq!(m.version, 6);
        assert_eq!(m.protocol, Protocol::Udp);
        assert_eq!(m.dst, "fd00::1".parse::<IpAddr>().unwrap());
        // Hop-by-hop header in front of ICMPv6.
        let mut q = vec![0u8; 56];
        q[..40].copy_from_slice(&p[..40]);
        q[4..6].copy_from_slice(&16u16.to_be_bytes());
        q[6] = 0;
        q[40] = 58;
        q[41] = 0;
        assert_eq!(classify(&q).unwrap().protocol, Protocol::Icmpv6);
        assert_eq!(classify(&q).unwrap().l4_offset, 48);
        assert_eq!(classify(&q).unwrap().protocol.class(), ProtoClass::Icmp);
    }

    #[test]
    fn truncated() {
        let p = v4(6, 20);
        assert!(matches!(classify(&p[..19]), Err(PacketError::Truncated(_))));
        assert!(matches!(classify(&p[..30]), Err(PacketError::Truncated(_))));
        let mut bad_ihl = p.clone();
        bad_ihl[0] = 0x4f; // 60-byte header in a 40-byte packet
        assert!(matches!(classify(&bad_ihl), Err(PacketError::Truncated(_))));
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[5] = 1;
        assert!(matches!(classify(&v6), Err(PacketError::Truncated(_))));
        assert!(matches!(
            classify(&v6[..39]),
            Err(PacketError::Truncated(_))
        ));
        assert_eq!(classify(&[]), Err(PacketError::Empty));
    }

    #[test]
    fn wrong_version() {
        let mut p = v4(6, 20);
        p[0] = 0x55;
        assert_eq!(classify(&p), Err(PacketError::BadVersion(5)));
        let mut q = v4(6, 20);
        q[0] = 0x44;
        assert!(matches!(classify(&q), Err(PacketError::BadHeader(_))));
    }

    #[test]
    fn trailing_bytes_allowed() {
        let mut p = v4(17, 8);
        p.extend_from_slice(&[0; 4]);
        let m = classify(&p).unwrap();
        assert_eq!((m.len, m.ip_len), (32, 28));
    }
}
