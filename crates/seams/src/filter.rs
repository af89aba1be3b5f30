//! Flow filters of PCC rules: the IPFilterRule grammar (RFC 6733 §4.3.1) as Gx uses
//! it in Flow-Description (TS 29.212 §5.4.2), from the UE's point of view.

use crate::pcrf::PolicyError;
use std::net::Ipv4Addr;

/// Which way a flow filter applies (Flow-Direction, TS 29.212 §5.3.65).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowDirection {
    Downlink,
    Uplink,
    Both,
}

/// One flow of a PCC rule from the UE's point of view: the remote (PDN side)
/// prefix and ports, the UE's ports, the protocol (`None`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowFilter {
    pub direction: FlowDirection,
    pub protocol: Option<u8>,
    pub remote: Ipv4Addr,
    pub remote_len: u8,
    pub remote_ports: (u16, u16),
    pub ue_ports: (u16, u16),
}

const ANY_PORT: (u16, u16) = (0, u16::MAX);

impl FlowFilter {
    /// An IPFilterRule (RFC 6733 §4.3.1) as Gx uses it in Flow-Description
    /// (TS 29.212 §5.4.2): `permit out <proto> from <remote> [ports] to assigned
    /// [ports]` (downlink: "out" is towards the UE) or `permit in <proto> from
    /// assigned [ports] to <remote> [ports]`. The UE's side may also be its address
    /// or `any`; `direction` says which way it applies (Flow-Direction).
    pub fn parse(s: &str, direction: FlowDirection) -> Result<FlowFilter, PolicyError> {
        let bad = |why: &str| PolicyError::BadFlow(format!("{s:?}: {why}"));
        let mut t = s.split_ascii_whitespace().peekable();
        if t.next() != Some("permit") {
            return Err(bad("only permit rules are taken"));
        }
        let out = match t.next() {
            Some("out") => true,
            Some("in") => false,
            _ => return Err(bad("expected in or out")),
        };
        let protocol = match t.next() {
            Some("ip") => None,
            Some(p) => Some(p.parse::<u8>().map_err(|_| bad("bad protocol"))?),
            None => return Err(bad("no protocol")),
        };
        if t.next() != Some("from") {
            return Err(bad("expected from"));
        }
        let src = t.next().ok_or_else(|| bad("no source"))?;
        let src_ports = ports(&mut t).map_err(&bad)?;
        if t.next() != Some("to") {
            return Err(bad("expected to"));
        }
        let dst = t.next().ok_or_else(|| bad("no destination"))?;
        let dst_ports = ports(&mut t).map_err(&bad)?;
        if let Some(x) = t.next() {
            return Err(bad(&format!("unsupported option {x:?}")));
        }
        let (remote, remote_ports, ue, ue_ports) = if out {
            (src, src_ports, dst, dst_ports)
        } else {
            (dst, dst_ports, src, src_ports)
        };
        // The UE's side: its address, whichever it is (`assigned`), or one written out.
        if ue != "assigned" {
            prefix(ue).map_err(|w| bad(&format!("the UE's side: {w}")))?;
        }
        let (remote, remote_len) = prefix(remote).map_err(&bad)?;
        Ok(FlowFilter {
            direction,
            protocol,
            remote,
            remote_len,
            remote_ports,
            ue_ports,
        })
    }

    /// The Flow-Description of this filter, downlink form.
    pub fn describe(&self) -> String {
        let proto = self.protocol.map_or("ip".to_string(), |p| p.to_string());
        let remote = if self.remote_len == 0 {
            "any".to_string()
        } else {
            format!("{}/{}", self.remote, self.remote_len)
        };
        format!(
            "permit out {proto} from {remote}{} to assigned{}",
            port_text(self.remote_ports),
            port_text(self.ue_ports)
        )
    }
}

fn port_text(p: (u16, u16)) -> String {
    match p {
        ANY_PORT => String::new(),
        (a, b) if a == b => format!(" {a}"),
        (a, b) => format!(" {a}-{b}"),
    }
}

/// The optional port (or range) after an address.
fn ports<'a>(
    t: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>,
) -> Result<(u16, u16), &'static str> {
    let Some(p) = t.peek().copied() else {
        return Ok(ANY_PORT);
    };
    if !p.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(ANY_PORT);
    }
    t.next();
    if p.contains(',') {
        return Err("port lists are not supported (one port or range per flow)");
    }
    let (a, b) = p.split_once('-').unwrap_or((p, p));
    let a: u16 = a.parse().map_err(|_| "bad port")?;
    let b: u16 = b.parse().map_err(|_| "bad port")?;
    if a > b {
        return Err("port range upside down");
    }
    Ok((a, b))
}

/// A remote address: `any`, `a.b.c.d` or `a.b.c.d/len`; the UE's side (`assigned`)
/// is no remote.
fn prefix(s: &str) -> Result<(Ipv4Addr, u8), &'static str> {
    match s {
        "any" => Ok((Ipv4Addr::UNSPECIFIED, 0)),
        "assigned" => Err("the remote side is the UE's (assigned)"),
        s => {
            let (a, l) = s.split_once('/').unwrap_or((s, "32"));
            let a: Ipv4Addr = a
                .parse()
                .map_err(|_| "bad IPv4 address (IPv6 is not served)")?;
            let l: u8 = l.parse().map_err(|_| "bad prefix length")?;
            if l > 32 {
                return Err("prefix longer than 32");
            }
            Ok((a, l))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_descriptions_parse_both_ways() {
        let f = FlowFilter::parse(
            "permit out 17 from 10.45.0.0/16 5060 to assigned 4000-4999",
            FlowDirection::Both,
        )
        .unwrap();
        assert_eq!(f.protocol, Some(17));
        assert_eq!((f.remote, f.remote_len), (Ipv4Addr::new(10, 45, 0, 0), 16));
        assert_eq!(f.remote_ports, (5060, 5060));
        assert_eq!(f.ue_ports, (4000, 4999));
        assert_eq!(
            f.describe(),
            "permit out 17 from 10.45.0.0/16 5060 to assigned 4000-4999"
        );
        let g = FlowFilter::parse(
            "permit in 17 from assigned 4000-4999 to 10.45.0.0/16 5060",
            FlowDirection::Both,
        )
        .unwrap();
        assert_eq!(f, g);
        let any = FlowFilter::parse(
            "permit out ip from any to assigned",
            FlowDirection::Downlink,
        )
        .unwrap();
        assert_eq!(
            (any.protocol, any.remote_len, any.ue_ports),
            (None, 0, ANY_PORT)
        );
        for bad in [
            "deny out ip from any to assigned",
            "permit out ip from assigned to any",
            "permit out 17 from 10.0.0.1 9-1 to assigned",
            "permit out 17 from 10.0.0.1 1,2 to assigned",
            "permit out 17 from 10.0.0.1/33 to assigned",
            "permit out 17 from fe80::1 to assigned",
            "permit out 300 from any to assigned",
            "permit out 17 from any to assigned frag",
            "permit",
        ] {
            assert!(
                FlowFilter::parse(bad, FlowDirection::Both).is_err(),
                "{bad}"
            );
        }
    }
}
