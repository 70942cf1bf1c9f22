//! IPv4/IPv6 prefixes ("10.71.1.0/24", "fd00:71:1::/64").

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid CIDR {0:?}: expected ADDRESS/PREFIX, e.g. 10.71.1.0/24")]
pub struct CidrError(pub String);

/// An address prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: &IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                let mask = mask32(self.prefix);
                u32::from(net) & mask == u32::from(*a) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                let mask = mask128(self.prefix);
                u128::from(net) & mask == u128::from(*a) & mask
            }
            _ => false,
        }
    }
}

fn mask32(p: u8) -> u32 {
    if p == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(p))
    }
}

fn mask128(p: u8) -> u128 {
    if p == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(p))
    }
}

impl FromStr for Cidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let err = || CidrError(s.to_string());
        let (a, p) = s.split_once('/').ok_or_else(err)?;
        let addr: IpAddr = a.parse().map_err(|_| err())?;
        let prefix: u8 = p.parse().map_err(|_| err())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(err());
        }
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_match() {
        let c: Cidr = "10.71.1.0/24".parse().unwrap();
        assert!(c.contains(&"10.71.1.200".parse().unwrap()));
        assert!(!c.contains(&"10.71.2.1".parse().unwrap()));
        assert!(!c.contains(&"::1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(&"1.2.3.4".parse().unwrap()));
        let v6: Cidr = "fd00:71:1::/64".parse().unwrap();
        assert!(v6.contains(&"fd00:71:1::5".parse().unwrap()));
        assert!(!v6.contains(&"fd00:71:2::5".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("10.0.0.0".parse::<Cidr>().is_err());
        assert!("x/8".parse::<Cidr>().is_err());
        assert_eq!(c.to_string(), "10.71.1.0/24");
    }
}
