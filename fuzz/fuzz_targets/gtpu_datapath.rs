//! GTP-U / IPv4 / UDP parsing (pepc-wire) and the slice's data path fed the packets;
//! the AF_XDP ports' Ethernet frame parser on the whole input.
//!
//! Each input builds a small slice with three attached UEs (one with a dedicated
//! bearer and PCEF rules, one on a second PDN) and then runs a script of records
//! `op, len (u16 BE), octets`: packets are collected into uplink and downlink batches,
//! optionally re-targeted at a UE's TEID or address so they get past classification,
//! and control operations (release to idle, new eNB tunnel, detach, syncs, clock)
//! are interleaved so the buffering, paging and stale-TEID paths run too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pepc_node::io::afxdp::{parse_frame, Role};
use pepc_slice::context::FIRST_EBI;
use pepc_slice::control::{AttachParams, BearerParams, ControlPlane, PdnParams};
use pepc_slice::datapath::DataPlane;
use pepc_slice::pcef::{Action, PortRange, Rule};
use pepc_slice::slice::{build, SliceConfig};
use pepc_wire::gtpu::{self, GtpuPacket, GtpuRepr};
use pepc_wire::{five_tuple, Batch, Ipv4Packet, Ipv4Repr, PacketBuf, UdpPacket, UdpRepr, Verdict};
use std::net::{Ipv4Addr, SocketAddrV4};

const ENB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

struct Ue {
    slot: u32,
    ips: Vec<Ipv4Addr>,
    teids: Vec<u32>,
}

fn slice() -> (ControlPlane, DataPlane, Vec<Ue>) {
    let mut cfg = SliceConfig::for_users(0);
    // Small tables and rings: built for every input.
    cfg.ue_slots = 8;
    cfg.bearer_slots = 16;
    cfg.update_ring = 1 << 8;
    cfg.request_ring = 1 << 6;
    // Enough to buffer for the idle UE and run out (the script sends at most a few
    // hundred packets); the default 2,048 buffers cost most of an input's time.
    cfg.pending_pool = 64;
    let (mut cp, dp) = build(&cfg);
    let mut deny = Rule::any(1);
    deny.remote_ports = PortRange::single(23);
    deny.action = Action::Drop;
    let mut voice = Rule::any(2);
    voice.remote_ports = PortRange { lo: 5060, hi: 5061 };
    voice.bearer = Some(6);
    cp.install_rule_set(3, vec![deny, voice]).expect("rule set");
    let mut ues = Vec::new();
    for i in 0..3u32 {
        let mut p = AttachParams::new(1000 + u64::from(i));
        p.enb_addr = ENB;
        p.enb_teid = 0x100 + i;
        let a = cp.attach(&p).expect("attach");
        let mut ue = Ue {
            slot: a.ue_slot,
            ips: vec![a.ue_ip],
            teids: vec![a.teid_ul],
        };
        if i == 1 {
            cp.set_rule_set(a.ue_slot, 3).expect("rule set");
            let bp = BearerParams {
                ebi: 6,
                linked_ebi: FIRST_EBI,
                qci: 1,
                arp: Default::default(),
                mbr_ul: 0,
                mbr_dl: 0,
                gbr_ul: 64_000,
                gbr_dl: 64_000,
                charging_key: 9,
            };
            ue.teids.push(cp.add_bearer(a.ue_slot, bp).expect("bearer"));
            cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x600).expect("tunnel");
        }
        if i == 2 {
            let pp = PdnParams {
                apn: "ims".into(),
                ebi: 6,
                qci: 5,
                arp: Default::default(),
                charging_key: 0,
            };
            let pdn = cp.add_pdn(a.ue_slot, &pp).expect("second PDN");
            cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x700).expect("tunnel");
            ue.ips.push(pdn.ue_ip);
            ue.teids.push(pdn.teid_ul);
        }
        ues.push(ue);
    }
    cp.flush();
    let mut dp = dp;
    dp.sync(0);
    (cp, dp, ues)
}

/// The wire parsers on their own, with the invariants of pepc-wire's tests.
fn wire(data: &[u8]) {
    if let Ok(p) = GtpuPacket::new_checked(data) {
        if let Ok(hl) = p.check() {
            assert_eq!(p.header_len(), hl);
            assert!(p.payload().len() <= data.len());
            for ie in p.ies() {
                let _ = ie;
            }
            let _ = gtpu::parse_echo(&p);
            let _ = gtpu::parse_error_indication(&p);
            if let Ok(r) = GtpuRepr::parse(&p) {
                let mut out = vec![0u8; r.buffer_len()];
                if r.emit(&mut GtpuPacket::new_unchecked(&mut out[..])).is_ok() {
                    let q = GtpuPacket::new_checked(&out[..]).expect("emitted GTP-U parses");
                    assert_eq!(GtpuRepr::parse(&q).as_ref(), Ok(&r), "GTP-U round trip");
                }
            }
        }
    }
    let mut b = PacketBuf::new();
    if b.fill(data) {
        if let Ok(teid) = gtpu::decap_gpdu(&mut b) {
            gtpu::encap_gpdu(&mut b, teid).expect("re-encapsulates what it decapsulated");
        }
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = p.verify_checksum();
        if let Ok(r) = Ipv4Repr::parse(&p) {
            let mut o = [0u8; 20];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut o[..]))
                .expect("20 octets");
        }
        if let Ok(u) = UdpPacket::new_checked(p.payload()) {
            let _ = UdpRepr::parse(&u, p.src_addr(), p.dst_addr());
        }
    }
    let _ = five_tuple(data);
}

/// Output of the data path: what it sends on S1-U is a GTP-U packet.
fn check_out(b: &Batch) {
    for p in b.packets() {
        if p.meta.verdict == Verdict::ToS1u {
            let g = GtpuPacket::new_checked(p.as_slice()).expect("S1-U output is GTP-U");
            assert!(g.check().is_ok(), "S1-U output is well-formed GTP-U");
        }
    }
}

struct Run {
    cp: ControlPlane,
    dp: DataPlane,
    ues: Vec<Ue>,
    ul: Batch,
    dl: Batch,
    now: u64,
}

impl Run {
    fn flush(&mut self) {
        if self.ul.len > 0 {
            self.dp.uplink(&mut self.ul, self.now);
            check_out(&self.ul);
            self.ul.clear();
        }
        if self.dl.len > 0 {
            self.dp.downlink(&mut self.dl, self.now);
            check_out(&self.dl);
            self.dl.clear();
        }
    }

    fn push(&mut self, uplink: bool, bytes: &[u8]) {
        let b = if uplink { &mut self.ul } else { &mut self.dl };
        if b.bufs[b.len].fill(bytes) {
            b.bufs[b.len].meta.peer = std::net::SocketAddrV4::new(ENB, 2152);
            b.len += 1;
        }
        if b.len == b.capacity() {
            self.flush();
        }
    }

    fn control(&mut self) {
        let mut ev = Vec::new();
        self.cp.poll_requests(&mut ev);
        self.cp.flush();
        self.dp.sync(self.now);
        let mut out = Batch::default();
        for uplink in [true, false] {
            // Bounded: a drained packet must not come back to the ready list forever.
            for _ in 0..64 {
                if self.dp.take_ready(&mut out, uplink) == 0 {
                    break;
                }
                if uplink {
                    self.dp.uplink(&mut out, self.now);
                } else {
                    self.dp.downlink(&mut out, self.now);
                }
                check_out(&out);
                out.clear();
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The AF_XDP ports' frame parser sees the same octets as a frame.
    for role in [
        Role::S1u {
            addr: SocketAddrV4::new(ENB, 2152),
        },
        Role::Sgi {
            pools: vec![],
            next_hop: None,
        },
    ] {
        if let Some((off, len, _)) = parse_frame(&role, data) {
            assert!(off + len <= data.len());
        }
    }
    let (cp, dp, ues) = slice();
    let mut r = Run {
        cp,
        dp,
        ues,
        ul: Batch::default(),
        dl: Batch::default(),
        now: 1,
    };
    let mut rest = data;
    while let [op, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (body, next) = tail.split_at(len);
        rest = next;
        wire(body);
        let ue = &r.ues[usize::from(op >> 4) % r.ues.len()];
        let k = usize::from(op >> 6);
        let (slot, teid, ip) = (
            ue.slot,
            ue.teids[k % ue.teids.len()],
            ue.ips[k % ue.ips.len()],
        );
        match op & 0x0f {
            0 => r.push(true, body),
            1 => {
                // A G-PDU for the UE's tunnel carrying the octets as its inner packet,
                // from the UE's address when the inner packet is IPv4.
                let mut inner = body.to_vec();
                if inner.len() >= 20 && inner[0] >> 4 == 4 {
                    inner[12..16].copy_from_slice(&ip.octets());
                }
                r.push(true, &pepc_slice::packets::gpdu(teid, &inner));
            }
            2 => {
                // The octets as a GTP-U packet re-addressed to the UE's tunnel.
                let mut g = body.to_vec();
                if g.len() >= 8 {
                    g[4..8].copy_from_slice(&teid.to_be_bytes());
                }
                r.push(true, &g);
            }
            3 => r.push(false, body),
            4 => {
                let mut d = body.to_vec();
                if d.len() >= 20 {
                    d[16..20].copy_from_slice(&ip.octets());
                }
                r.push(false, &d);
            }
            5 => {
                r.flush();
                let _ = r.cp.release_access_bearers(slot);
            }
            6 => {
                r.flush();
                let _ = r.cp.release_to_idle(slot);
            }
            7 => {
                r.flush();
                let t = u32::from_be_bytes([0, 0, body.first().copied().unwrap_or(0), 1]);
                let _ = r.cp.set_enb_tunnel(slot, FIRST_EBI, ENB, t);
            }
            8 => {
                r.flush();
                let _ = r.cp.detach(slot);
            }
            9 => {
                r.flush();
                r.cp.paging_failed(slot);
            }
            10 => {
                r.flush();
                r.control();
            }
            11 => r.now += 1_000_000 * (1 + body.len() as u64),
            _ => r.flush(),
        }
    }
    r.flush();
    r.control();
});
