//! Writes the seed corpora under fuzz/corpus/<target>/ from the shared real captures
//! (../shared/captures, relative to the repository) and from the MME harness flows.
//!
//!   cd fuzz && CARGO_TARGET_DIR=../target cargo run --example seed_corpora
//!
//! (The main workspace's target dir already holds every dependency in the dev
//! profile, so only this crate builds.) File names are content hashes, so re-running
//! adds nothing twice.

#[path = "../../crates/s1ap/tests/common/captures.rs"]
mod captures;

use pepc_fuzz::flow::{self, Rec};
use pepc_s1ap::msg::S1apMessage;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn captures_dir() -> PathBuf {
    root().join("../../shared/captures")
}

fn capture_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(captures_dir())
        .expect("../shared/captures present")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    v.sort();
    v
}

/// FNV-1a: a stable name for a seed across runs and Rust versions.
fn name(b: &[u8]) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &x in b {
        h = (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

struct Corpus {
    dir: PathBuf,
    seen: BTreeSet<Vec<u8>>,
    limit: usize,
}

impl Corpus {
    fn new(target: &str, limit: usize) -> Corpus {
        let dir = root().join("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        Corpus {
            dir,
            seen: BTreeSet::new(),
            limit,
        }
    }
    fn add(&mut self, b: Vec<u8>) {
        if self.seen.len() >= self.limit || !self.seen.insert(b.clone()) {
            return;
        }
        std::fs::write(self.dir.join(name(&b)), &b).expect("write seed");
    }
    fn report(&self) {
        println!("{}: {} seeds", self.dir.display(), self.seen.len());
    }
}

/// A record of the gtpu_datapath / sctp_endpoint script format.
fn rec(op: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![op];
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// UDP payloads to or from `port` in IPv4 datagrams, and the datagrams themselves.
fn udp_payloads(path: &Path, port: u16) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let Ok(frames) = pepc_wire::pcap::read_capture(path) else {
        return (vec![], vec![]);
    };
    let mut payloads = Vec::new();
    let mut inner_ip = Vec::new();
    for d in pepc_wire::pcap::ipv4_datagrams(&frames) {
        let ip = &d.bytes;
        let hl = usize::from(ip[0] & 0x0f) * 4;
        if ip.get(9) != Some(&17) || ip.len() < hl + 8 {
            inner_ip.push(ip.to_vec());
            continue;
        }
        let u = &ip[hl..];
        let (sp, dp) = (
            u16::from_be_bytes([u[0], u[1]]),
            u16::from_be_bytes([u[2], u[3]]),
        );
        if sp == port || dp == port {
            payloads.push(u[8..].to_vec());
        } else {
            inner_ip.push(ip.to_vec());
        }
    }
    (payloads, inner_ip)
}

/// SCTP packets (IP protocol 132, or in UDP 9899) of a capture.
fn sctp_packets(path: &Path) -> Vec<Vec<u8>> {
    let Ok(frames) = pepc_wire::pcap::read_capture(path) else {
        return vec![];
    };
    let mut v = Vec::new();
    for d in pepc_wire::pcap::ipv4_datagrams(&frames) {
        let ip = &d.bytes;
        let hl = usize::from(ip[0] & 0x0f) * 4;
        match ip.get(9) {
            Some(132) if ip.len() > hl + 12 => v.push(ip[hl..].to_vec()),
            Some(17) if ip.len() > hl + 20 => {
                let u = &ip[hl..];
                let (sp, dp) = (
                    u16::from_be_bytes([u[0], u[1]]),
                    u16::from_be_bytes([u[2], u[3]]),
                );
                if sp == captures::SCTP_UDP_PORT || dp == captures::SCTP_UDP_PORT {
                    v.push(u[8..].to_vec());
                }
            }
            _ => {}
        }
    }
    v
}

fn main() {
    let flows = flow::recorded_flows();

    // Every recorded flow replays to the end with its UEs registered: the streams
    // are deterministic, so the mutations start from real flows.
    for (n, recs) in &flows {
        let o = flow::replay(recs);
        println!("flow {n}: {o:?}");
        assert!(o.max_ues > 0, "flow {n} registered nobody on replay");
    }

    let mut s1ap = Corpus::new("s1ap_decode", 400);
    let mut nas = Corpus::new("nas_decode", 300);
    let mut mme = Corpus::new("mme_flow", 100);
    let mut nas_pdus = Vec::new();
    for (_, recs) in &flows {
        mme.add(flow::serialize(recs));
        for r in recs {
            if let Rec::S1ap { bytes, .. } = r {
                s1ap.add(bytes.clone());
                if let Ok(p) = pepc_s1ap::peek::peek(bytes) {
                    if let Some(n) = p.nas_pdu {
                        nas_pdus.push(n.to_vec());
                    }
                }
            }
        }
    }
    let mut gtpu_payloads = Vec::new();
    let mut ip_packets = Vec::new();
    let mut sctp = Vec::new();
    for f in capture_files() {
        for p in captures::s1ap_payloads(&f) {
            if let Ok(m) = S1apMessage::decode(&p.bytes) {
                let nas_pdu = match &m {
                    S1apMessage::InitialUeMessage(x) => Some(x.nas_pdu.clone()),
                    S1apMessage::UplinkNasTransport(x) => Some(x.nas_pdu.clone()),
                    S1apMessage::DownlinkNasTransport(x) => Some(x.nas_pdu.clone()),
                    _ => None,
                };
                nas_pdus.extend(nas_pdu);
            }
            s1ap.add(p.bytes);
        }
        let (g, ip) = udp_payloads(&f, 2152);
        gtpu_payloads.extend(g);
        ip_packets.extend(ip);
        sctp.extend(sctp_packets(&f));
    }
    // NAS: the selector octet (algorithms, header type, COUNTs) varied over seeds.
    for (i, n) in nas_pdus.iter().enumerate() {
        let mut v = vec![(i * 37) as u8];
        v.extend_from_slice(n);
        nas.add(v);
    }

    // GTP-U + data path: captured GTP-U and IP packets as raw uplink/downlink
    // records, and re-targeted at the slice's UEs, with control operations between.
    let mut gtpu = Corpus::new("gtpu_datapath", 200);
    gtpu_payloads.sort();
    gtpu_payloads.dedup();
    ip_packets.sort();
    ip_packets.dedup();
    for (i, chunk) in gtpu_payloads.chunks(4).enumerate() {
        let mut s = Vec::new();
        for (j, g) in chunk.iter().enumerate() {
            let ue = ((i + j) % 3) as u8;
            s.extend(rec(0, g));
            s.extend(rec(2 | ue << 4, g));
            if g.len() > 8 {
                s.extend(rec(1 | ue << 4, &g[8..]));
            }
        }
        gtpu.add(s);
    }
    for (i, chunk) in ip_packets.chunks(4).enumerate() {
        let mut s = Vec::new();
        let ue = (i % 3) as u8;
        for p in chunk {
            s.extend(rec(3, p));
            s.extend(rec(4 | ue << 4, p));
            s.extend(rec(1 | ue << 4, p));
        }
        // Idle, downlink buffered, paging fails or the UE comes back.
        s.extend(rec(6 | ue << 4, &[]));
        s.extend(rec(10, &[]));
        if let Some(p) = chunk.first() {
            s.extend(rec(4 | ue << 4, p));
        }
        s.extend(rec(10, &[]));
        s.extend(rec(if i % 2 == 0 { 7 } else { 9 } | ue << 4, &[i as u8]));
        s.extend(rec(10, &[]));
        gtpu.add(s);
    }

    // SCTP: each captured packet's chunks as from the peer, and the same as raw.
    let mut sc = Corpus::new("sctp_endpoint", 200);
    sctp.sort();
    sctp.dedup();
    for (i, chunk) in sctp.chunks(3).enumerate() {
        let mut s = Vec::new();
        for p in chunk {
            s.extend(rec(0, &p[12..]));
            if i % 4 == 0 {
                s.extend(rec(1, p));
            }
        }
        s.extend(rec(3, b"s1ap"));
        s.extend(rec(4, &[10]));
        sc.add(s);
    }

    let mut cfg = Corpus::new("config_parse", 50);
    for c in CONFIGS {
        cfg.add(c.as_bytes().to_vec());
    }

    // Diameter: the S6a requests we build (AIR, resync AIR, ULR, PUR); the answers'
    // parsers are reached by the fuzzer from these (same header, other AVPs).
    let mut diam = Corpus::new("diameter_decode", 20);
    let h = pepc_diameter::s6a::Head {
        session_id: "mme.example.org;1;2",
        origin_host: "mme.example.org",
        origin_realm: "example.org",
        destination_realm: "hss.example.org",
        destination_host: Some("hss.example.org"),
        user_name: "001010000000001",
    };
    let plmn = [0x00, 0xf1, 0x10];
    let mut b = Vec::new();
    pepc_diameter::s6a::air(&mut b, &h, plmn, None);
    diam.add(std::mem::take(&mut b));
    pepc_diameter::s6a::air(&mut b, &h, plmn, Some((&[7; 16], &[9; 14])));
    diam.add(std::mem::take(&mut b));
    pepc_diameter::s6a::ulr(&mut b, &h, plmn);
    diam.add(std::mem::take(&mut b));
    pepc_diameter::s6a::pur(&mut b, &h);
    diam.add(std::mem::take(&mut b));
    // Gx: our CCR-I/U/T, and a CCA with a dynamic rule and a monitoring grant (the
    // decision parser's input), and a Flow-Description as text.
    let g = pepc_diameter::gx::Head {
        session_id: "pgw.example.org;1;2;gx",
        origin_host: "pgw.example.org",
        origin_realm: "example.org",
        destination_realm: "pcrf.example.org",
        destination_host: None,
    };
    let session = pepc_mme::pcrf::PolicySession {
        imsi: 1010000000001,
        apn: "internet".into(),
        ebi: 5,
        ue_ip: std::net::Ipv4Addr::new(10, 45, 0, 2),
    };
    let q = pepc_mme::pcrf::SessionQos {
        qci: 9,
        arp_priority: 8,
        ambr_ul: 1000,
        ambr_dl: 2000,
    };
    let usage = [pepc_mme::pcrf::UsageReport {
        key: "mk1".into(),
        ul_bytes: 1,
        dl_bytes: 2,
    }];
    for (kind, qos, u) in [(1, Some(&q), &[][..]), (2, None, &usage[..]), (3, None, &[][..])] {
        pepc_diameter::gx::ccr(&mut b, &g, kind, kind - 1, &session, qos, u);
        diam.add(std::mem::take(&mut b));
    }
    {
        use pepc_diameter::codec::{begin, finish, AvpWriter};
        use pepc_diameter::dict::{app, avp, avp3, cmd, VENDOR_3GPP as V};
        begin(&mut b, 0x40, cmd::CREDIT_CONTROL, app::GX, 1, 1);
        let mut w = AvpWriter::new(&mut b);
        w.str(avp::SESSION_ID, 0, true, "pgw.example.org;1;2;gx");
        w.u32(avp::RESULT_CODE, 0, true, 2001);
        w.grouped(avp3::CHARGING_RULE_INSTALL, V, true, |w| {
            w.grouped(avp3::CHARGING_RULE_DEFINITION, V, true, |w| {
                w.octets(avp3::CHARGING_RULE_NAME, V, true, b"video");
                w.grouped(avp3::FLOW_INFORMATION, V, true, |w| {
                    w.str(
                        avp3::FLOW_DESCRIPTION,
                        V,
                        true,
                        "permit out 17 from 198.51.100.7 5060 to assigned 4000",
                    );
                    w.u32(avp3::FLOW_DIRECTION, V, true, 3);
                });
                w.grouped(avp3::QOS_INFORMATION, V, true, |w| {
                    w.u32(avp3::QOS_CLASS_IDENTIFIER, V, true, 2);
                    w.u32(avp3::GUARANTEED_BITRATE_UL, V, true, 64000);
                    w.u32(avp3::GUARANTEED_BITRATE_DL, V, true, 64000);
                    w.grouped(avp3::ALLOCATION_RETENTION_PRIORITY, V, true, |w| {
                        w.u32(avp3::PRIORITY_LEVEL, V, true, 3)
                    });
                });
                w.u32(avp3::PRECEDENCE, V, true, 10);
                w.u32(avp::RATING_GROUP, 0, true, 100);
            });
        });
        w.grouped(avp3::USAGE_MONITORING_INFORMATION, V, true, |w| {
            w.octets(avp3::MONITORING_KEY, V, true, b"mk1");
            w.grouped(avp::GRANTED_SERVICE_UNIT, 0, true, |w| {
                w.u64(avp::CC_TOTAL_OCTETS, 0, true, 2000)
            });
        });
        finish(&mut b);
        diam.add(std::mem::take(&mut b));
    }
    diam.add(b"permit out 17 from 10.45.0.0/16 5060 to assigned 4000-4999".to_vec());
    let scenarios = root().join("../crates/emulator/scenarios");
    if let Ok(rd) = std::fs::read_dir(scenarios) {
        for e in rd.flatten() {
            if let Ok(b) = std::fs::read(e.path()) {
                cfg.add(b);
            }
        }
    }

    for c in [&s1ap, &nas, &mme, &gtpu, &sc, &cfg] {
        c.report();
    }
}

/// Node and pepc configs with every section and key (see crates/node/src/config.rs
/// and crates/pepc/src/epc.rs), and a few that are wrong in one key.
const CONFIGS: &[&str] = &[
    "",
    "[node]\nslices = 2\nue_pool = \"10.0.0.0/8\"\npdn_pools = [\"172.16.0.0/8\"]\n\
     max_users = 1000\nprewarm_users = 100\npin = false\ndemux = \"auto\"\nring_batches = 64\n\
     [s1u]\nbind = \"127.0.0.1:2152\"\n\
     [sgi]\nmode = \"udp\"\ntun_name = \"pepc0\"\nsink_local = \"127.0.0.1:15212\"\n\
     sink_peer = \"127.0.0.1:15211\"\n\
     [synthetic]\nusers = 10\nrate = 100\n",
    "[mme]\nenabled = true\nplmn = \"00101\"\nmme_group_id = 1\nmme_code = 1\nname = \"pepc\"\n\
     tacs = [1, 2]\neea = [\"eea0\", \"eea2\"]\neia = [\"eia2\", \"eia1\"]\npaging_attempts = 3\n\
     esm_info_request = false\ndefault_apn = \"internet\"\nnetwork_name = \"pepc\"\n\
     ambr_ul = 50000000\nambr_dl = 100000000\nslice_policy = \"hash\"\n\
     [s1mme]\ntransport = \"udp\"\nbind = \"127.0.0.1\"\nsctp_port = 36412\nudp_port = 9899\n\
     verbose = false\n[hss]\ndb = \"memory\"\n",
    "[node]\nslices = 65\n",
    "[node]\nue_pool = \"10.0.0.0/33\"\n",
    "[node]\nmax_users = 1000\nprewarm_users = 1001\n",
    "[node]\ndemux = \"none\"\nslices = 2\n",
    "[mme]\nplmn = \"0010\"\n[s1mme]\ntransport = \"sctp\"\n",
    "[mme]\neea = [\"eea9\"]\n",
    "[s1u]\nbind = \"nope\"\n",
];
