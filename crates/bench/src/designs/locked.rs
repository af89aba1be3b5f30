//! The designs PEPC compares itself against (§4.2 Listing 1, §7.1), on the same packet
//! work as ours (GTP-U parse, IPv4 parse, 5-tuple, PCEF, counters, decap/encap) so the
//! only difference measured is how UE state is shared between the threads:
//!
//! * `rwlock` — the PEPC paper's own design: the data thread's `HashMap<id, Arc<UE>>`
//!   whose entries hold a `RwLock` on control state (read by the data thread) and a
//!   separate `RwLock` on counters (written by the data thread); the control thread
//!   modifies control state in place under the write lock; inserts and removals reach
//!   the data thread's maps through a channel synced every 32 packets.
//! * `datapath-writer` — one `RwLock` per UE over control state and counters together;
//!   the data thread takes it for writing on every packet (§7.1).
//! * `giant-lock` — one lock over the whole state table, taken by the data thread per
//!   packet and by the control thread per update (§7.1).

use pepc_slice::pcef::RuleSet;
use pepc_wire::flow::five_tuple;
use pepc_wire::gtpu::{self, GtpuPacket};
use pepc_wire::ipv4::Ipv4Packet;
use pepc_wire::{Batch, Verdict};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    RwLock,
    DatapathWriter,
    GiantLock,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Ctrl {
    pub teid_ul: u32,
    pub ip: u32,
    pub enb_teid: u32,
    pub enb_addr: u32,
    pub qci: u8,
    pub ambr: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
}

/// Per-UE entry for `rwlock` (split locks) and `datapath-writer` (one lock).
pub struct Ue {
    pub ctrl: RwLock<Ctrl>,
    pub counters: RwLock<Counters>,
    pub both: RwLock<(Ctrl, Counters)>,
}

/// The giant-lock design's single table.
#[derive(Default)]
pub struct Table {
    pub by_teid: HashMap<u32, (Ctrl, Counters)>,
    pub by_ip: HashMap<u32, u32>,
}

pub enum Sync {
    Insert(Arc<Ue>),
    Remove { teid: u32, ip: u32 },
}

pub struct LockedData {
    mode: Mode,
    by_teid: HashMap<u32, Arc<Ue>>,
    by_ip: HashMap<u32, Arc<Ue>>,
    giant: Arc<Mutex<Table>>,
    sync_rx: Receiver<Sync>,
    rules: RuleSet,
    pub drops: u64,
}

pub struct LockedControl {
    mode: Mode,
    pub ues: HashMap<u32, Arc<Ue>>, // cp_state, by uplink TEID
    giant: Arc<Mutex<Table>>,
    sync_tx: Sender<Sync>,
}

pub fn new(mode: Mode) -> (LockedControl, LockedData) {
    let (tx, rx) = std::sync::mpsc::channel();
    let giant = Arc::new(Mutex::new(Table::default()));
    (
        LockedControl {
            mode,
            ues: HashMap::new(),
            giant: giant.clone(),
            sync_tx: tx,
        },
        LockedData {
            mode,
            by_teid: HashMap::new(),
            by_ip: HashMap::new(),
            giant,
            sync_rx: rx,
            rules: RuleSet::new(vec![pepc_slice::pcef::Rule::any(0)]),
            drops: 0,
        },
    )
}

impl LockedControl {
    pub fn attach(&mut self, c: Ctrl) {
        match self.mode {
            Mode::GiantLock => {
                let mut t = self.giant.lock().expect("poisoned");
                t.by_teid.insert(c.teid_ul, (c, Counters::default()));
                t.by_ip.insert(c.ip, c.teid_ul);
            }
            _ => {
                let ue = Arc::new(Ue {
                    ctrl: RwLock::new(c),
                    counters: RwLock::new(Counters::default()),
                    both: RwLock::new((c, Counters::default())),
                });
                self.ues.insert(c.teid_ul, ue.clone());
                let _ = self.sync_tx.send(Sync::Insert(ue));
            }
        }
    }

    pub fn detach(&mut self, teid: u32, ip: u32) {
        match self.mode {
            Mode::GiantLock => {
                let mut t = self.giant.lock().expect("poisoned");
                t.by_teid.remove(&teid);
                t.by_ip.remove(&ip);
            }
            _ => {
                self.ues.remove(&teid);
                let _ = self.sync_tx.send(Sync::Remove { teid, ip });
            }
        }
    }

    /// S1 handover: new eNB tunnel, written in place under the UE's lock.
    pub fn handover(&mut self, teid: u32, enb_addr: u32, enb_teid: u32) -> bool {
        match self.mode {
            Mode::GiantLock => {
                let mut t = self.giant.lock().expect("poisoned");
                if let Some((c, _)) = t.by_teid.get_mut(&teid) {
                    c.enb_addr = enb_addr;
                    c.enb_teid = enb_teid;
                    return true;
                }
                false
            }
            Mode::RwLock => self.ues.get(&teid).is_some_and(|u| {
                let mut c = u.ctrl.write().expect("poisoned");
                c.enb_addr = enb_addr;
                c.enb_teid = enb_teid;
                true
            }),
            Mode::DatapathWriter => self.ues.get(&teid).is_some_and(|u| {
                let mut g = u.both.write().expect("poisoned");
                g.0.enb_addr = enb_addr;
                g.0.enb_teid = enb_teid;
                true
            }),
        }
    }
}

impl LockedData {
    /// Apply inserts/removals (every batch of 32 packets, as PEPC does).
    pub fn sync(&mut self) {
        while let Ok(s) = self.sync_rx.try_recv() {
            match s {
                Sync::Insert(ue) => {
                    let c = *ue.ctrl.read().expect("poisoned");
                    self.by_ip.insert(c.ip, ue.clone());
                    self.by_teid.insert(c.teid_ul, ue);
                }
                Sync::Remove { teid, ip } => {
                    self.by_teid.remove(&teid);
                    self.by_ip.remove(&ip);
                }
            }
        }
    }

    pub fn uplink(&mut self, batch: &mut Batch) {
        self.sync();
        for buf in batch.packets_mut() {
            let (teid, hdr) = match GtpuPacket::new_checked(buf.as_slice()) {
                Ok(p) if p.msg_type() == gtpu::G_PDU => (p.teid(), p.header_len()),
                _ => {
                    self.drops += 1;
                    buf.meta.verdict = Verdict::Drop;
                    continue;
                }
            };
            let inner = &buf.as_slice()[hdr..];
            let Ok(ip) = Ipv4Packet::new_checked(inner) else {
                self.drops += 1;
                continue;
            };
            let (len, src) = (ip.total_len() as usize, u32::from(ip.src_addr()));
            let Ok(ft) = five_tuple(inner) else { continue };
            let ok = match self.mode {
                Mode::RwLock => self.by_teid.get(&teid).is_some_and(|u| {
                    let c = u.ctrl.read().expect("poisoned");
                    if c.ip != src {
                        return false;
                    }
                    let mut k = u.counters.write().expect("poisoned");
                    k.ul_packets += 1;
                    k.ul_bytes += len as u64;
                    true
                }),
                Mode::DatapathWriter => self.by_teid.get(&teid).is_some_and(|u| {
                    let mut g = u.both.write().expect("poisoned");
                    if g.0.ip != src {
                        return false;
                    }
                    g.1.ul_packets += 1;
                    g.1.ul_bytes += len as u64;
                    true
                }),
                Mode::GiantLock => {
                    let mut t = self.giant.lock().expect("poisoned");
                    t.by_teid.get_mut(&teid).is_some_and(|(c, k)| {
                        if c.ip != src {
                            return false;
                        }
                        k.ul_packets += 1;
                        k.ul_bytes += len as u64;
                        true
                    })
                }
            };
            if !ok || !self.rules.apply(true, &ft, len, 0).forward {
                self.drops += 1;
                buf.meta.verdict = Verdict::Drop;
                continue;
            }
            buf.strip(hdr);
            buf.truncate(len);
            buf.meta.verdict = Verdict::ToSgi;
        }
    }

    pub fn downlink(&mut self, batch: &mut Batch) {
        self.sync();
        for buf in batch.packets_mut() {
            let data = buf.as_slice();
            let Ok(ip) = Ipv4Packet::new_checked(data) else {
                self.drops += 1;
                continue;
            };
            let (len, dst) = (ip.total_len() as usize, u32::from(ip.dst_addr()));
            let Ok(ft) = five_tuple(data) else { continue };
            let tunnel = match self.mode {
                Mode::RwLock => self.by_ip.get(&dst).map(|u| {
                    let c = *u.ctrl.read().expect("poisoned");
                    let mut k = u.counters.write().expect("poisoned");
                    k.dl_packets += 1;
                    k.dl_bytes += len as u64;
                    (c.enb_teid, c.enb_addr)
                }),
                Mode::DatapathWriter => self.by_ip.get(&dst).map(|u| {
                    let mut g = u.both.write().expect("poisoned");
                    g.1.dl_packets += 1;
                    g.1.dl_bytes += len as u64;
                    (g.0.enb_teid, g.0.enb_addr)
                }),
                Mode::GiantLock => {
                    let mut t = self.giant.lock().expect("poisoned");
                    let teid = t.by_ip.get(&dst).copied();
                    teid.and_then(|teid| t.by_teid.get_mut(&teid))
                        .map(|(c, k)| {
                            k.dl_packets += 1;
                            k.dl_bytes += len as u64;
                            (c.enb_teid, c.enb_addr)
                        })
                }
            };
            let Some((teid, addr)) = tunnel else {
                self.drops += 1;
                buf.meta.verdict = Verdict::Drop;
                continue;
            };
            if !self.rules.apply(false, &ft, len, 0).forward {
                self.drops += 1;
                continue;
            }
            buf.truncate(len);
            if gtpu::encap_gpdu(buf, teid).is_err() {
                self.drops += 1;
                continue;
            }
            buf.meta.peer = SocketAddrV4::new(Ipv4Addr::from(addr), gtpu::GTPU_PORT);
            buf.meta.verdict = Verdict::ToS1u;
        }
    }
}
