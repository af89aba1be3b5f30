//! Slice steering in the kernel, for `node.demux = "queues"` on kernel sockets: each
//! slice's data thread has a socket of its own (S1-U and the SGi UDP sink: UDP sockets
//! in one `SO_REUSEPORT` group; SGi on TUN: a queue of a multi-queue device), and a
//! small program makes the kernel pick the socket of the slice that owns the packet by
//! the slice bits of its TEID or UE address (see `pepc_slice::ids`).
//!
//! The program only saves a hand-off; it decides nothing. What it cannot tell (Echo,
//! Error Indication, pool-space TEIDs, addresses outside the pools, short packets)
//! lands on some slice's socket all the same, and that slice's
//! [`crate::queues::QueuePort`] hands it on by the demux tables.

use super::ebpf::{self, insn, AND32_K, EXIT, LD_ABS_W, MOV64_X, RSH32_K};
use pepc_slice::ids::IdLayout;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;

/// Where a slice number sits in a 32-bit field: `(x >> shift) & mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceField {
    pub shift: u32,
    pub mask: u32,
}

impl SliceField {
    /// The slice bits of a structured uplink TEID.
    pub fn of_teid(l: &IdLayout) -> SliceField {
        let (shift, mask) = l.teid_slice_field();
        SliceField { shift, mask }
    }

    /// The slice bits of a UE address (any PDN pool).
    pub fn of_ue_addr(l: &IdLayout) -> SliceField {
        let (shift, mask) = l.ip_slice_field();
        SliceField { shift, mask }
    }
}

/// What a reuseport group's datagrams carry, so the program knows where to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// GTP-U (S1-U): a G-PDU's structured TEID names the slice; everything else (Echo,
    /// Error Indication, pool-space TEIDs) goes to slice 0, as the demux sends it.
    GtpU,
    /// An IPv4 packet (the SGi UDP sink): the destination UE address names the slice.
    Ipv4,
}

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = 0x20;
const LD_B_ABS: u16 = 0x30;
const ALU_RSH_K: u16 = 0x74;
const ALU_AND_K: u16 = 0x54;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_A: u16 = 0x16;
const RET_K: u16 = 0x06;

fn cbpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The classic BPF program choosing a reuseport group's socket: the kernel runs it
/// with the datagram's payload at offset 0 and takes its result as the index of the
/// socket in the group (an index past the group falls back to the kernel's hash). A
/// load past the end returns 0.
fn reuseport_program(payload: Payload, f: SliceField) -> Vec<libc::sock_filter> {
    match payload {
        Payload::GtpU => vec![
            cbpf(LD_B_ABS, 0, 0, 1), // message type
            cbpf(JEQ_K, 0, 5, 255),  // not a G-PDU → slice 0
            cbpf(LD_W_ABS, 0, 0, 4), // TEID
            cbpf(JSET_K, 3, 0, pepc_slice::ids::POOL_BIT),
            cbpf(ALU_RSH_K, 0, 0, f.shift),
            cbpf(ALU_AND_K, 0, 0, f.mask),
            cbpf(RET_A, 0, 0, 0),
            cbpf(RET_K, 0, 0, 0),
        ],
        Payload::Ipv4 => vec![
            cbpf(LD_W_ABS, 0, 0, 16), // destination address
            cbpf(ALU_RSH_K, 0, 0, f.shift),
            cbpf(ALU_AND_K, 0, 0, f.mask),
            cbpf(RET_A, 0, 0, 0),
        ],
    }
}

/// Make the reuseport group of socket `fd` pick each datagram's socket by its slice:
/// the group's k-th bound socket gets slice k's packets.
pub fn attach_reuseport(fd: &impl AsRawFd, payload: Payload, f: SliceField) -> io::Result<()> {
    let mut prog = reuseport_program(payload, f);
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: passes a live sock_fprog whose filter array outlives the call (the
    // kernel copies it) and the struct's exact size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("attaching the slice steering program to the reuseport group: {e}"),
        ));
    }
    Ok(())
}

/// The eBPF program choosing a multi-queue TUN device's queue: the kernel runs it with
/// the IP header at offset 0 and takes its result modulo the queues (a packet too short
/// to load from returns 0).
fn tun_program(f: SliceField) -> Vec<ebpf::Insn> {
    vec![
        insn(MOV64_X, 6, 1, 0, 0),   // r6 = skb, as LD_ABS wants it
        insn(LD_ABS_W, 0, 0, 0, 16), // r0 = destination address
        insn(RSH32_K, 0, 0, 0, f.shift as i32),
        insn(AND32_K, 0, 0, 0, f.mask as i32),
        insn(EXIT, 0, 0, 0, 0),
    ]
}

/// Make the multi-queue TUN device of queue descriptor `fd` queue each packet for the
/// reader of its destination's slice: the device's k-th attached queue gets slice k's
/// packets. The device keeps its own reference to the program.
pub fn steer_tun(fd: RawFd, f: SliceField) -> io::Result<()> {
    let prog = ebpf::load(
        BPF_PROG_TYPE_SOCKET_FILTER,
        &tun_program(f),
        "the TUN steering program",
    )?;
    let pfd: libc::c_int = prog.as_raw_fd();
    // SAFETY: TUNSETSTEERINGEBPF reads one int (the program's descriptor) from the
    // pointer, which is live for the call.
    if unsafe { libc::ioctl(fd, libc::TUNSETSTEERINGEBPF, &pfd as *const libc::c_int) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("TUNSETSTEERINGEBPF: {e}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{PacketIo, TunPort, UdpPort};
    use pepc_slice::packets::{gpdu, ipv4_udp};
    use pepc_wire::Batch;
    use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
    use std::time::{Duration, Instant};

    fn layout(slices: usize) -> IdLayout {
        IdLayout::new(slices, Ipv4Addr::new(10, 254, 248, 0), 24).unwrap()
    }

    #[test]
    fn the_tun_program_jumps_nowhere_and_ends() {
        ebpf::assert_jumps_inside(&tun_program(SliceField::of_ue_addr(&layout(4))));
    }

    /// A reuseport group of `n` sockets on one loopback address, steered by `field`
    /// of `payload`: the ports, and the address they share.
    fn steered_group(
        n: usize,
        payload: Payload,
        field: SliceField,
    ) -> (Vec<Box<dyn PacketIo>>, SocketAddrV4) {
        let group = UdpPort::bind_group(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), n).unwrap();
        let to = group[0].local_addr();
        assert!(group.iter().all(|p| p.local_addr() == to));
        attach_reuseport(&group[0], payload, field).unwrap();
        let ports = group
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn PacketIo>)
            .collect();
        (ports, to)
    }

    /// Receive from every port until `want` packets came or 3 s passed.
    fn drain(ports: &mut [Box<dyn PacketIo>], want: usize) -> Vec<Vec<Vec<u8>>> {
        let mut got: Vec<Vec<Vec<u8>>> = ports.iter().map(|_| Vec::new()).collect();
        let mut b = Batch::new(32);
        let deadline = Instant::now() + Duration::from_secs(3);
        while got.iter().map(Vec::len).sum::<usize>() < want && Instant::now() < deadline {
            for (k, p) in ports.iter_mut().enumerate() {
                p.recv_batch(&mut b).unwrap();
                got[k].extend(b.packets().iter().map(|x| x.as_slice().to_vec()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }

    #[test]
    fn a_reuseport_group_gives_each_slice_its_own_teids() {
        let l = layout(3);
        let (mut ports, to) = steered_group(3, Payload::GtpU, SliceField::of_teid(&l));
        let enb = UdpSocket::bind("127.0.0.1:0").unwrap();
        let inner = ipv4_udp(l.ue_ip(0, 1), Ipv4Addr::new(198, 51, 100, 1), 1000, 80, 40);
        // Every slice's TEIDs, from one eNB (one 4-tuple: the kernel's hash alone
        // would put them all on one socket).
        let mut sent = Vec::new();
        for s in 0..3u32 {
            for slot in [1u32, 77, (l.max_bearer_slots() - 1) as u32] {
                let teid = l.teid(s, slot, 5);
                enb.send_to(&gpdu(teid, &inner), to).unwrap();
                sent.push((s as usize, teid));
            }
        }
        // Echo Request, a pool-space TEID and a runt: slice 0.
        let echo = [0x32u8, 1, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0];
        enb.send_to(&echo, to).unwrap();
        enb.send_to(&gpdu(0x8000_0042, &inner), to).unwrap();
        enb.send_to(&[0x30], to).unwrap();
        let got = drain(&mut ports, sent.len() + 3);
        for (s, teid) in sent {
            let on: Vec<usize> = (0..3)
                .filter(|&k| {
                    got[k]
                        .iter()
                        .any(|p| p.len() > 8 && p[4..8] == teid.to_be_bytes())
                })
                .collect();
            assert_eq!(on, vec![s], "TEID {teid:#x} of slice {s}");
        }
        assert_eq!(
            got[0].len(),
            3 + 3,
            "slice 0: its own three, Echo, pool, runt"
        );
        assert!(got[0].iter().any(|p| p[1] == 1));
        assert!(got[0].iter().any(|p| p.len() == 1));
    }

    #[test]
    fn a_sink_group_steers_by_the_inner_destination() {
        let l = layout(4);
        let (mut ports, to) = steered_group(4, Payload::Ipv4, SliceField::of_ue_addr(&l));
        let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
        let server = Ipv4Addr::new(198, 51, 100, 1);
        for s in 0..4u32 {
            for slot in 1..5u32 {
                let p = ipv4_udp(server, l.ue_ip(s, slot), 80, 1000, 40);
                pdn.send_to(&p, to).unwrap();
            }
        }
        let got = drain(&mut ports, 16);
        for (s, g) in got.iter().enumerate() {
            assert_eq!(g.len(), 4, "slice {s}");
            for p in g {
                let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
                assert_eq!(l.split_ue_ip(dst).unwrap().0, s as u32);
            }
        }
    }

    #[test]
    fn a_multi_queue_tun_queues_each_packet_for_its_slice() {
        let l = layout(4);
        let addr = Ipv4Addr::new(10, 254, 248, 254);
        let queues = match TunPort::open_queues("pepcq%d", addr, 24, 4) {
            Ok(q) => q,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound
                ) =>
            {
                eprintln!("SKIPPED: a TUN device cannot be made here: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(queues.len(), 4);
        steer_tun(queues[0].as_raw_fd(), SliceField::of_ue_addr(&l)).unwrap();
        let mut ports: Vec<Box<dyn PacketIo>> = queues
            .into_iter()
            .map(|p| Box::new(p) as Box<dyn PacketIo>)
            .collect();
        let sock = UdpSocket::bind(SocketAddrV4::new(addr, 0)).unwrap();
        for s in 0..4u32 {
            for slot in 1..5u32 {
                sock.send_to(b"dl", SocketAddrV4::new(l.ue_ip(s, slot), 9))
                    .unwrap();
            }
        }
        // The device may carry IPv6 router solicitations too: count our UDP only.
        let got = drain(&mut ports, 16);
        for (s, g) in got.iter().enumerate() {
            let ours: Vec<&Vec<u8>> = g.iter().filter(|p| p.len() >= 20 && p[0] == 0x45).collect();
            assert_eq!(ours.len(), 4, "queue {s}");
            for p in ours {
                let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
                assert_eq!(l.split_ue_ip(dst).unwrap().0, s as u32);
            }
        }
    }
}
