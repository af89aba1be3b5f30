//! Messages between a slice's control thread and its data thread. Control state reaches
//! the data thread only as these updates, applied between packet batches; the data
//! thread asks the control thread for things only through [`DpRequest`].

use crate::context::{DpBearerRecord, DpUeRecord};
use crate::counters::Usage;
use crate::pcef::RuleSet;
use std::net::Ipv4Addr;

/// Control → data.
#[derive(Debug)]
pub enum DpUpdate {
    /// Install or replace a UE in the primary table (promotion, or a change to it).
    Ue {
        slot: u32,
        rec: DpUeRecord,
    },
    /// Install or replace a bearer in the primary table. If the eNB tunnel changed,
    /// the data thread sends an End Marker on the old path (TS 29.281 §7.3.2).
    Bearer {
        slot: u32,
        rec: DpBearerRecord,
    },
    /// Remove from the primary table; the UE stays in the control thread's secondary.
    EvictUe {
        slot: u32,
    },
    EvictBearer {
        slot: u32,
    },
    /// Secondary index kept by the data thread: this bearer slot now exists with this
    /// uplink TEID (`None`: deleted). Lets a primary miss tell "evicted, promote it"
    /// from "unknown, send Error Indication" without asking the control thread.
    BearerExists {
        slot: u32,
        teid: Option<u32>,
    },
    /// This UE slot exists with PDN connections in the PDN pools of bitmask `pdns`
    /// (bit k: pool k, see [`crate::ids`]); 0: the UE is gone. A downlink miss on an
    /// evicted UE is buffered only if its destination's PDN is in the mask.
    UeExists {
        slot: u32,
        pdns: u8,
    },
    /// Install (or replace) PCEF rule set `id`.
    RuleSet {
        id: u16,
        rules: Box<RuleSet>,
    },
    /// Downlink tunnel of a stateless-IoT device (pool index).
    IotTunnel {
        index: u32,
        enb_teid: u32,
        enb_addr: u32,
    },
    /// Set a bearer's usage counters (a restored UE keeps what it used); sent right
    /// after the `BearerExists` that reset them. The data thread writes them, keeping
    /// the counters single-writer.
    BearerUsage {
        slot: u32,
        usage: Usage,
    },
    /// Identifiers that do not follow the layout (e.g. after migration).
    ExceptionTeid {
        teid: u32,
        slot: Option<u32>,
    },
    ExceptionIp {
        ip: u32,
        slot: Option<u32>,
    },
    /// The control thread will not promote this UE: discard what was buffered for it.
    PromotionRefused {
        ue_slot: u32,
    },
}

/// Data → control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DpRequest {
    /// An uplink packet hit an evicted bearer: promote its UE.
    PromoteBearer { slot: u32, teid: u32 },
    /// A downlink packet hit an evicted UE, or one with no eNB tunnel (idle): promote it,
    /// paging first if it is in ECM-IDLE.
    DownlinkData { ue_slot: u32 },
    /// The eNB reported an Error Indication for one of our downlink tunnels.
    ErrorIndication { enb_teid: u32, enb_addr: Ipv4Addr },
}
