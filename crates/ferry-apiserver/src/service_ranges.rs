//! Where Services' cluster IPs and node ports come from
//! (`--service-cluster-ip-range`, `--service-node-port-range`) and how a
//! free one is picked, as kube-apiserver's allocators do. The hub's settings
//! hold the ranges; the Service strategy (`strategy::core::service`)
//! allocates from them.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

/// Where Services' addresses and node ports come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRanges {
    /// The first address of the range and its prefix length.
    pub cluster_ip: (Ipv4Addr, u8),
    pub node_ports: RangeInclusive<u16>,
}

impl Default for ServiceRanges {
    fn default() -> Self {
        ServiceRanges {
            cluster_ip: (Ipv4Addr::new(10, 96, 0, 0), 12),
            node_ports: 30000..=32767,
        }
    }
}

impl ServiceRanges {
    /// The `n`th of a set of ranges that differ from each other and from the
    /// defaults, for hubs standing in for distinct clusters (the quickstarts'
    /// and the tests'): cluster IPs from `10.<128 + n % 64>.0.0/16`, node ports
    /// from the `n % 5`th 512-port slice of 30000-32767.
    pub fn distinct(n: u32) -> ServiceRanges {
        let first_port = 30000 + (n % 5) as u16 * 512;
        ServiceRanges {
            cluster_ip: (Ipv4Addr::new(10, 128 + (n % 64) as u8, 0, 0), 16),
            node_ports: first_port..=first_port + 511,
        }
    }

    /// Parse `--service-cluster-ip-range` (`10.96.0.0/12`, IPv4 only).
    pub fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
        let (ip, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR (like 10.96.0.0/12)"))?;
        let ip: Ipv4Addr = ip
            .parse()
            .map_err(|_| format!("{s:?}: {ip:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| (8..=30).contains(p))
            .ok_or_else(|| format!("{s:?}: the prefix length must be between 8 and 30"))?;
        let mask = u32::MAX << (32 - prefix);
        Ok((Ipv4Addr::from(u32::from(ip) & mask), prefix))
    }

    /// Parse `--service-node-port-range` (`30000-32767`).
    pub fn parse_ports(s: &str) -> Result<RangeInclusive<u16>, String> {
        let bad = || format!("{s:?} is not a port range (like 30000-32767)");
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let (a, b): (u16, u16) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a == 0 || a > b {
            return Err(bad());
        }
        Ok(a..=b)
    }

    /// The addresses Services may get: the range less its network address,
    /// its broadcast address and the first address (`default/kubernetes`'s).
    fn hosts(&self) -> RangeInclusive<u32> {
        let (base, prefix) = self.cluster_ip;
        let base = u32::from(base);
        let size = 1u32 << (32 - prefix);
        base + 2..=base + size - 2
    }

    pub fn contains_ip(&self, ip: Ipv4Addr) -> bool {
        let (base, prefix) = self.cluster_ip;
        let mask = u32::MAX << (32 - prefix);
        u32::from(ip) & mask == u32::from(base)
    }

    /// The range as the flag writes it (`10.96.0.0/12`).
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.cluster_ip.0, self.cluster_ip.1)
    }
}

/// A free address of `ranges` that `taken` does not hold; random, so two
/// writes racing are unlikely to pick the same one.
pub fn allocate_ip(ranges: &ServiceRanges, taken: &HashSet<String>) -> Option<String> {
    let hosts = ranges.hosts();
    let (start, len) = (*hosts.start(), hosts.end() - hosts.start() + 1);
    let offset = rand::random_range(0..len);
    (0..len)
        .map(|i| Ipv4Addr::from(start + (offset + i) % len).to_string())
        .find(|ip| !taken.contains(ip))
}

/// A free node port of `ranges` that `taken` does not hold.
pub fn allocate_port(ranges: &ServiceRanges, taken: &HashSet<u16>) -> Option<u16> {
    let (start, len) = (*ranges.node_ports.start(), ranges.node_ports.len() as u32);
    let offset = rand::random_range(0..len);
    (0..len)
        .map(|i| start + ((offset + i) % len) as u16)
        .find(|p| !taken.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_like_the_flags() {
        assert_eq!(
            ServiceRanges::parse_cidr("10.96.0.0/12"),
            Ok((Ipv4Addr::new(10, 96, 0, 0), 12))
        );
        assert!(ServiceRanges::parse_cidr("10.96.0.0").is_err());
        assert_eq!(ServiceRanges::parse_ports("30000-32767"), Ok(30000..=32767));
        assert!(ServiceRanges::parse_ports("5-1").is_err());
    }

    #[test]
    fn allocation_skips_taken_addresses_and_the_first() {
        let ranges = ServiceRanges {
            cluster_ip: (Ipv4Addr::new(10, 0, 0, 0), 29),
            node_ports: 30000..=30001,
        };
        // 10.0.0.0/29: .2 to .6 for Services (.1 is `default/kubernetes`'s).
        let taken: HashSet<String> = ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(allocate_ip(&ranges, &taken).as_deref(), Some("10.0.0.6"));
        let mut all = taken.clone();
        all.insert("10.0.0.6".into());
        assert_eq!(allocate_ip(&ranges, &all), None);
        assert_eq!(
            allocate_port(&ranges, &[30000].into_iter().collect()),
            Some(30001)
        );
        assert!(ranges.contains_ip(Ipv4Addr::new(10, 0, 0, 7)));
        assert!(!ranges.contains_ip(Ipv4Addr::new(10, 0, 0, 8)));
    }
}
