//! The node's demux (PEPC §3.3): which slice owns a packet or a signaling message.
//!
//! Uplink is steered by TEID and downlink by UE address, both of which encode the slice
//! (see `pepc_slice::ids`); stateless-IoT pools belong to one slice each; identifiers
//! that cannot follow the layout go through a small exception table. Signaling is
//! steered by IMSI (hashed, unless an operator assignment says otherwise), by GUTI
//! (the M-TMSI's top bits carry the slice, as the MME allocates them) or by the
//! MME-UE-S1AP-ID (likewise).

use pepc_slice::ids::{IdLayout, IotPool};
use std::collections::HashMap;

/// Bits at the top of an M-TMSI / MME-UE-S1AP-ID that name the slice.
pub const SLICE_ID_BITS: u32 = 6;

pub fn slice_bits_in_id(id: u32) -> usize {
    (id >> (32 - SLICE_ID_BITS)) as usize
}

/// Put a slice number into the top bits of an M-TMSI or MME-UE-S1AP-ID.
pub fn id_with_slice(slice: usize, low: u32) -> u32 {
    ((slice as u32) << (32 - SLICE_ID_BITS)) | (low & ((1 << (32 - SLICE_ID_BITS)) - 1))
}

#[derive(Debug, Clone)]
pub struct Demux {
    layout: IdLayout,
    slices: usize,
    iot: Vec<(usize, IotPool)>,
    exc_teid: HashMap<u32, usize>,
    exc_ip: HashMap<u32, usize>,
    imsi_assign: HashMap<u64, usize>,
}

impl Demux {
    pub fn new(layout: IdLayout, slices: usize, iot: Vec<(usize, IotPool)>) -> Self {
        Demux {
            layout,
            slices: slices.max(1),
            iot,
            exc_teid: HashMap::new(),
            exc_ip: HashMap::new(),
            imsi_assign: HashMap::new(),
        }
    }

    pub fn slices(&self) -> usize {
        self.slices
    }

    /// Slice of an uplink G-PDU's TEID.
    #[inline]
    pub fn slice_of_teid(&self, teid: u32) -> Option<usize> {
        if let Some((s, _, _)) = self.layout.split_teid(teid) {
            return ((s as usize) < self.slices).then_some(s as usize);
        }
        for (s, p) in &self.iot {
            if p.index_of_teid(teid).is_some() {
                return Some(*s);
            }
        }
        self.exc_teid.get(&teid).copied()
    }

    /// Slice of a downlink packet's destination address.
    #[inline]
    pub fn slice_of_ue_ip(&self, ip: u32) -> Option<usize> {
        if let Some((s, _)) = self.layout.split_ue_ip(ip) {
            return ((s as usize) < self.slices).then_some(s as usize);
        }
        for (s, p) in &self.iot {
            if p.index_of_ip(ip).is_some() {
                return Some(*s);
            }
        }
        self.exc_ip.get(&ip).copied()
    }

    /// Slice for a UE known only by IMSI (attach by IMSI).
    pub fn slice_of_imsi(&self, imsi: u64) -> usize {
        if let Some(&s) = self.imsi_assign.get(&imsi) {
            return s;
        }
        // Fibonacci hashing spreads consecutive IMSIs evenly.
        ((imsi.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) % self.slices
    }

    /// Slice for a UE known by GUTI: the M-TMSI's top bits.
    pub fn slice_of_m_tmsi(&self, m_tmsi: u32) -> Option<usize> {
        let s = slice_bits_in_id(m_tmsi);
        (s < self.slices).then_some(s)
    }

    /// Slice for UE-associated S1AP carrying our MME-UE-S1AP-ID.
    pub fn slice_of_mme_ue_id(&self, id: u32) -> Option<usize> {
        let s = slice_bits_in_id(id);
        (s < self.slices).then_some(s)
    }

    /// Operator assignment of a subscriber to a slice (e.g. IoT devices to the IoT slice).
    pub fn assign_imsi(&mut self, imsi: u64, slice: usize) {
        self.imsi_assign.insert(imsi, slice.min(self.slices - 1));
    }

    /// Identifiers that keep their value when a UE moves to another slice.
    pub fn set_exception_teid(&mut self, teid: u32, slice: Option<usize>) {
        match slice {
            Some(s) => self.exc_teid.insert(teid, s),
            None => self.exc_teid.remove(&teid),
        };
    }

    pub fn set_exception_ip(&mut self, ip: u32, slice: Option<usize>) {
        match slice {
            Some(s) => self.exc_ip.insert(ip, s),
            None => self.exc_ip.remove(&ip),
        };
    }

    /// Slice of a raw uplink S1-U datagram (GTP-U): by TEID; `None` when it names no
    /// slice (the receiving slice answers it with an Error Indication).
    #[inline]
    pub fn steer_uplink(&self, gtpu: &[u8]) -> Option<usize> {
        let teid = u32::from_be_bytes(gtpu.get(4..8)?.try_into().ok()?);
        self.slice_of_teid(teid)
    }

    /// Slice of a raw downlink SGi packet (IPv4): by destination address.
    #[inline]
    pub fn steer_downlink(&self, ip: &[u8]) -> Option<usize> {
        if ip.first()? >> 4 != 4 {
            return None;
        }
        let dst = u32::from_be_bytes(ip.get(16..20)?.try_into().ok()?);
        self.slice_of_ue_ip(dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn demux() -> Demux {
        let layout = IdLayout::new(4, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        let iot = IotPool::new(0xC000_0000, Ipv4Addr::new(100, 64, 0, 0), 1000).unwrap();
        Demux::new(layout, 4, vec![(3, iot)])
    }

    #[test]
    fn steers_by_teid_ip_and_pools() {
        let d = demux();
        let layout = IdLayout::new(4, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        for s in 0..4u32 {
            assert_eq!(d.slice_of_teid(layout.teid(s, 77, 3)), Some(s as usize));
            assert_eq!(
                d.slice_of_ue_ip(u32::from(layout.ue_ip(s, 77))),
                Some(s as usize)
            );
        }
        assert_eq!(d.slice_of_teid(0xC000_0005), Some(3));
        assert_eq!(
            d.slice_of_ue_ip(u32::from(Ipv4Addr::new(100, 64, 0, 5))),
            Some(3)
        );
        assert_eq!(d.slice_of_teid(0x9000_0000), None);
        assert_eq!(d.slice_of_ue_ip(u32::from(Ipv4Addr::new(8, 8, 8, 8))), None);
        let mut gpdu = vec![0x30, 0xff, 0, 0];
        gpdu.extend_from_slice(&layout.teid(2, 5, 0).to_be_bytes());
        assert_eq!(d.steer_uplink(&gpdu), Some(2));
        assert_eq!(d.steer_uplink(&gpdu[..6]), None);
        let mut ip = vec![0x45u8; 20];
        ip[16..20].copy_from_slice(&layout.ue_ip(1, 9).octets());
        assert_eq!(d.steer_downlink(&ip), Some(1));
        ip[0] = 0x60;
        assert_eq!(d.steer_downlink(&ip), None);
    }

    #[test]
    fn exceptions_and_signaling_ids() {
        let mut d = demux();
        d.set_exception_teid(0x9000_0001, Some(1));
        assert_eq!(d.slice_of_teid(0x9000_0001), Some(1));
        d.set_exception_teid(0x9000_0001, None);
        assert_eq!(d.slice_of_teid(0x9000_0001), None);
        let m = id_with_slice(2, 0x00ab_cdef);
        assert_eq!(d.slice_of_m_tmsi(m), Some(2));
        assert_eq!(
            d.slice_of_mme_ue_id(id_with_slice(5, 1)),
            None,
            "slice 5 does not exist"
        );
        // IMSI hashing spreads evenly and honours assignments.
        let mut counts = [0usize; 4];
        for imsi in 1_010_000_000_000u64..1_010_000_004_000 {
            counts[d.slice_of_imsi(imsi)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
        d.assign_imsi(42, 3);
        assert_eq!(d.slice_of_imsi(42), 3);
    }
}
