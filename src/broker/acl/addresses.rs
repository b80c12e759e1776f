//! The white addresses of the plain ACL (`RemoteAddressStrategyFactory` in Java): blank
//! (none), `*` (all), a list, or one address with ranges and wildcards in its last parts, for
//! IPv4 and IPv6, read and matched as Java 4.9.8's `AclUtils` and strategies do.

use std::net::IpAddr;

/// Which client addresses a rule lets in (`RemoteAddressStrategy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Addresses {
    /// Blank: none.
    None,
    /// `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*`.
    All,
    /// One address, a comma list or `a.b.c.{x,y}`.
    Set(Vec<IpAddr>),
    /// A wildcard or range in one group, the groups before it equal to `head` and later
    /// ones not looked at (Java's `RangeRemoteAddressStrategy`): IPv4 octets with the range
    /// in octet 1–3; IPv6 groups with `*` last and a range last or before that `*`.
    Range {
        v6: bool,
        head: Vec<u16>,
        low: u16,
        high: u16,
    },
}

impl Addresses {
    pub(super) fn parse(text: &str) -> Result<Addresses, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Addresses::None);
        }
        if matches!(text, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(Addresses::All);
        }
        let bad = || format!("Netaddress examine Exception netaddress is {text}");
        let ip = |s: &str| s.trim().parse::<IpAddr>().map_err(|_| bad());
        if let Some(open) = text.strip_suffix('}').and_then(|t| t.rfind('{')) {
            let prefix = &text[..open];
            let items = &text[open + 1..text.len() - 1];
            let set: Result<Vec<IpAddr>, String> = items
                .split(',')
                .map(|item| ip(&format!("{prefix}{}", item.trim())))
                .collect();
            return set.map(Addresses::Set);
        }
        if text.contains(',') {
            return text
                .split(',')
                .map(ip)
                .collect::<Result<_, _>>()
                .map(Addresses::Set);
        }
        if text.contains('*') || text.contains('-') {
            return Self::range(text);
        }
        Ok(Addresses::Set(vec![ip(text)?]))
    }

    fn range(text: &str) -> Result<Addresses, String> {
        if text.contains(':') {
            return Self::range_v6(text);
        }
        let bad =
            || format!("RangeRemoteAddressStrategy netaddress examine scope Exception {text}");
        let octets: Vec<&str> = text.split('.').map(str::trim).collect();
        if octets.len() != 4 {
            return Err(bad());
        }
        let octet = |s: &str| s.parse::<u8>().map(u16::from).map_err(|_| bad());
        for index in 1..4 {
            let (low, high) = match octets[index] {
                "*" => (0, 255),
                part if part.contains('-') => {
                    let (low, high) = part.split_once('-').ok_or_else(bad)?;
                    let (low, high) = (octet(low)?, octet(high)?);
                    if low > high {
                        return Err(bad());
                    }
                    (low, high)
                }
                _ => continue,
            };
            let head = octets[..index]
                .iter()
                .map(|o| octet(o))
                .collect::<Result<Vec<u16>, String>>()?;
            return Ok(Addresses::Range {
                v6: false,
                head,
                low,
                high,
            });
        }
        Err(bad())
    }

    /// An IPv6 range as Java's `AclUtils.IPv6AddressCheck` and `v6ipProcess` read it: `*`
    /// only at the end; a range in the last group, or in the one before a final `*`; the
    /// groups before it, `::` filled out, are the head.
    fn range_v6(text: &str) -> Result<Addresses, String> {
        let bad = || format!("Netaddress examine scope Exception netaddress is {text}");
        let star = text.find('*');
        let colons: Vec<usize> = text.match_indices(':').map(|(i, _)| i).collect();
        let (Some(&last), second_last) = (colons.last(), colons.iter().rev().nth(1)) else {
            return Err(bad());
        };
        if star.is_some_and(|at| at != text.len() - 1) {
            return Err(bad());
        }
        // The group that holds the range or wildcard, and the `::`-filled length of the head.
        let (head_end, groups) = match (star, text.find('-')) {
            (_, Some(minus)) if minus <= last && star.is_none() => return Err(bad()),
            (Some(_), Some(minus)) => match second_last {
                Some(&end) if minus > end => (end, 6),
                _ => return Err(bad()),
            },
            _ => (last, 7),
        };
        let (low, high) = match &text[head_end + 1..] {
            "*" => (0, 0xffff),
            spec => {
                let range = spec.strip_suffix(":*").unwrap_or(spec);
                let (low, high) = range.split_once('-').ok_or_else(bad)?;
                let hex = |s: &str| u16::from_str_radix(s.trim(), 16).map_err(|_| bad());
                let (low, high) = (hex(low)?, hex(high)?);
                if low > high || high == 0 {
                    return Err(bad());
                }
                (low, high)
            }
        };
        let head = Self::v6_head(&text[..head_end], groups).ok_or_else(bad)?;
        if head.len() >= 8 {
            return Err(bad());
        }
        Ok(Addresses::Range {
            v6: true,
            head,
            low,
            high,
        })
    }

    /// Java's `AclUtils.expandIP(prefix, groups)`: `::` widened so that the prefix has
    /// `groups` groups (when it has fewer colons), every group hex, empty ones zero.
    fn v6_head(prefix: &str, groups: usize) -> Option<Vec<u16>> {
        let pad = groups.saturating_sub(prefix.matches(':').count());
        let filled = if pad > 0 {
            prefix.replace("::", &":".repeat(pad + 1))
        } else {
            prefix.to_owned()
        };
        filled
            .split(':')
            .map(|group| match group.trim() {
                "" => Some(0),
                group if group.len() <= 4 => u16::from_str_radix(group, 16).ok(),
                _ => None,
            })
            .collect()
    }

    pub(super) fn matches(&self, ip: Option<IpAddr>) -> bool {
        let Some(ip) = ip else {
            return false;
        };
        match self {
            Addresses::None => false,
            Addresses::All => true,
            Addresses::Set(set) => set.contains(&ip),
            Addresses::Range {
                v6,
                head,
                low,
                high,
            } => {
                let groups: Vec<u16> = match ip {
                    IpAddr::V4(v4) if !v6 => v4.octets().map(u16::from).to_vec(),
                    IpAddr::V6(v6_ip) if *v6 => v6_ip.segments().to_vec(),
                    _ => return false,
                };
                groups.starts_with(head)
                    && groups
                        .get(head.len())
                        .is_some_and(|group| (*low..=*high).contains(group))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_rules_parse_as_javas_strategies() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let rule = |s: &str| Addresses::parse(s).unwrap();
        assert!(rule("*").matches(ip("1.2.3.4")) && !rule("").matches(ip("1.2.3.4")));
        assert!(rule("192.168.1.{1,2}").matches(ip("192.168.1.2")));
        assert!(!rule("192.168.1.{1,2}").matches(ip("192.168.1.3")));
        assert!(rule("1.1.1.1,2.2.2.2").matches(ip("2.2.2.2")));
        assert!(rule("10.1.1-100.*").matches(ip("10.1.50.200")));
        assert!(!rule("10.1.1-100.*").matches(ip("10.1.101.1")));
        // Later octets are not looked at, as in Java.
        assert!(rule("192.168.*.5").matches(ip("192.168.7.9")));
        assert!(Addresses::parse("10.1.-5.*").is_err());
        assert!(Addresses::parse("not an address").is_err());
    }

    #[test]
    fn ipv6_ranges_parse_and_match_as_javas() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let rule = |s: &str| Addresses::parse(s).unwrap();
        let last = rule("2::ac5:78:1-200");
        assert!(last.matches(ip("2::ac5:78:100")));
        assert!(!last.matches(ip("2::ac5:78:201")) && !last.matches(ip("2::ac5:79:1")));
        let before_star = rule("1:2:3:4:5:6:1-200:*");
        assert!(before_star.matches(ip("1:2:3:4:5:6:1ff:ffff")));
        assert!(!before_star.matches(ip("1:2:3:4:5:6:201:0")));
        // `fe80::*` is fe80:0 then any third group, as Java fills it out.
        assert!(rule("fe80::*").matches(ip("fe80::1")));
        assert!(!rule("fe80::*").matches(ip("fe80:1::1")));
        assert!(rule("1:2:3:*").matches(ip("1:2:3:ffff::")));
        assert!(!rule("1:2:3:*").matches(ip("1:2:4::")));
        // Families do not cross.
        assert!(!rule("10.1.1-100.*").matches(ip("::1")));
        assert!(!rule("0:0:0:*").matches(ip("0.0.0.1")));
        // Java refuses all but the last; the last it takes and never matches.
        for bad in [
            "1:*:3:4",
            "1:2-3:4:5",
            "1:2:3-4:*:*",
            "1:2:5-3",
            "1:2:x-3",
            "1:2:3*",
        ] {
            let error = Addresses::parse(bad).unwrap_err();
            assert!(error.contains(bad), "{bad}: {error}");
        }
    }
}
