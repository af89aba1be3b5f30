//! Receiving coalesced datagrams on a [`UdpPort`](super::UdpPort) (UDP GRO, the
//! `UDP_GRO` socket option, Linux 5.0+).
//!
//! With GRO on, the kernel hands the socket consecutive datagrams of one flow and one
//! length as one message (up to 64 of them), with their length in a control message:
//! one skb dequeued, one message header and one copy to user space for the lot, where
//! each datagram otherwise costs all three (on this VM the receive path was most of the
//! data thread's kernel time). A NIC's GRO builds such messages from an eNB's GTP-U
//! burst; on veth and loopback a sender's GSO message arrives whole.
//!
//! Messages land in the port's own staging area (a datagram's size is not known before
//! it arrives, so they cannot land in the batch's buffers) and are cut into the batch's
//! buffers, one copy per datagram. What does not fit in the batch waits, in order, for
//! the next call, which hands it out before it asks the kernel for more.

use super::sys::{self, errno, from_sockaddr, no_packets_or_error};
use super::udp::UdpStats;
use pepc_wire::{Batch, Verdict};
use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;

/// `SOL_UDP` level option: deliver coalesced datagrams with their segment size.
pub(super) const UDP_GRO: libc::c_int = 104;
/// Room for one message: the largest UDP payload, which bounds an aggregate too.
const AREA: usize = 65_536;
/// Messages' areas one cache line further apart than their size, so that the first
/// lines of successive areas (a batch of single datagrams) do not all fall into one
/// cache set, as they would 64 KiB apart.
const STRIDE: usize = AREA + 64;
/// Most messages per call: bounds the staging area (~4 MiB) whatever the port's
/// capacity; a batch holds 32 packets.
const MAX_MESSAGES: usize = 64;

/// Room for the control messages of one received message (UDP_GRO's int needs 20
/// bytes; the kernel adds nothing else unless other options ask for it).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u64; 8]);

/// One received message: `segs` datagrams of `seg` bytes (the last may be shorter).
#[derive(Clone, Copy)]
struct Msg {
    len: u32,
    seg: u32,
    segs: u32,
    peer: SocketAddrV4,
}

const NO_MSG: Msg = Msg {
    len: 0,
    seg: 0,
    segs: 0,
    peer: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
};

/// A port's receive side with GRO on: staging area, and the messages not yet cut.
pub(super) struct GroRx {
    area: Box<[u8]>,
    control: Box<[Control]>,
    msgs: Box<[Msg]>,
    /// Messages the last call received.
    count: usize,
    /// The message being cut, and its next datagram.
    next: usize,
    seg: u32,
    /// When the last call returned: every datagram it brought carries it.
    rx_ns: u64,
}

impl GroRx {
    /// Room for `messages` messages per call (at most [`MAX_MESSAGES`], 64 KiB of
    /// staging each).
    pub(super) fn new(messages: usize) -> GroRx {
        let messages = messages.clamp(1, MAX_MESSAGES);
        GroRx {
            area: vec![0u8; messages * STRIDE].into_boxed_slice(),
            control: vec![Control([0; 8]); messages].into_boxed_slice(),
            msgs: vec![NO_MSG; messages].into_boxed_slice(),
            count: 0,
            next: 0,
            seg: 0,
            rx_ns: 0,
        }
    }

    /// Whether datagrams of earlier messages wait to be handed out.
    fn pending(&mut self) -> bool {
        while self.next < self.count && self.seg >= self.msgs[self.next].segs {
            self.next += 1;
            self.seg = 0;
        }
        self.next < self.count
    }

    /// Fill `batch` with the waiting datagrams or, when none wait, with what one
    /// recvmmsg on `fd` brings. `hdrs`, `iov` and `addrs` are the port's syscall
    /// arrays (at least as long as each other), rewritten here.
    pub(super) fn recv(
        &mut self,
        fd: RawFd,
        (hdrs, iov, addrs): (
            &mut [libc::mmsghdr],
            &mut [libc::iovec],
            &mut [libc::sockaddr_in],
        ),
        stats: &mut UdpStats,
        batch: &mut Batch,
    ) -> io::Result<usize> {
        batch.len = 0;
        if batch.capacity() == 0 {
            return Ok(0);
        }
        if self.pending() {
            return Ok(self.cut(batch, stats));
        }
        let n = hdrs.len().min(self.msgs.len()).min(batch.capacity());
        for (k, h) in hdrs[..n].iter_mut().enumerate() {
            iov[k] = libc::iovec {
                iov_base: self.area[k * STRIDE..].as_mut_ptr().cast(),
                iov_len: AREA,
            };
            let m = &mut h.msg_hdr;
            m.msg_name = (&mut addrs[k] as *mut libc::sockaddr_in).cast();
            m.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            m.msg_iov = &mut iov[k];
            m.msg_iovlen = 1;
            m.msg_control = (&mut self.control[k] as *mut Control).cast();
            m.msg_controllen = size_of::<Control>();
            m.msg_flags = 0;
            h.msg_len = 0;
        }
        stats.rx_syscalls += 1;
        // SAFETY: headers 0..n point at the port's iovecs (into our `area`, AREA
        // bytes each, inside the slice by construction of STRIDE) and addresses, and
        // at our control buffers, all alive and unmoved for the call.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return no_packets_or_error(errno());
        }
        self.rx_ns = sys::now_ns();
        for (k, h) in hdrs[..r as usize].iter().enumerate() {
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                stats.rx_truncated += 1;
                self.msgs[k] = NO_MSG;
                continue;
            }
            let len = h.msg_len;
            let seg = segment_size(&h.msg_hdr)
                .filter(|&s| s > 0 && s < len)
                .unwrap_or(len);
            // An empty datagram is one packet too (the data path counts it malformed).
            let segs = if len == 0 { 1 } else { len.div_ceil(seg) };
            stats.rx_gro_messages += u64::from(segs > 1);
            self.msgs[k] = Msg {
                len,
                seg,
                segs,
                peer: from_sockaddr(&addrs[k]),
            };
        }
        self.count = r as usize;
        self.next = 0;
        self.seg = 0;
        Ok(self.cut(batch, stats))
    }

    /// Copy waiting datagrams, in order, into `batch` until it is full.
    fn cut(&mut self, batch: &mut Batch, stats: &mut UdpStats) -> usize {
        let mut w = 0;
        while w < batch.capacity() && self.pending() {
            let m = self.msgs[self.next];
            let start = (self.seg * m.seg) as usize;
            let len = (m.len as usize - start).min(m.seg as usize);
            self.seg += 1;
            let b = &mut batch.bufs[w];
            let dst = b.rx_area();
            if len > dst.len() {
                // Longer than a buffer: discarded whole, never cut short.
                stats.rx_truncated += 1;
                continue;
            }
            let at = self.next * STRIDE + start;
            dst[..len].copy_from_slice(&self.area[at..at + len]);
            b.set_received(len);
            b.meta.peer = m.peer;
            b.meta.rx_ns = self.rx_ns;
            b.meta.verdict = Verdict::Drop;
            stats.rx_bytes += len as u64;
            w += 1;
        }
        stats.rx_packets += w as u64;
        batch.len = w;
        w
    }
}

/// The segment size a received message's UDP_GRO control message gives, if any.
fn segment_size(m: &libc::msghdr) -> Option<u32> {
    // SAFETY: `m` is a header the kernel filled: msg_control/msg_controllen describe
    // our own aligned buffer, which the CMSG macros walk within its bounds.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP
                && (*c).cmsg_type == UDP_GRO
                && (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize
            {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return u32::try_from(v).ok();
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::udp::{setsockopt_int, UdpPort};
    use super::super::PacketIo;
    use pepc_wire::Batch;
    use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    /// `SOL_UDP` option: the kernel cuts every send into datagrams of this size
    /// (GSO), so one send is one message on the wire and, at a GRO socket, one
    /// message received.
    const UDP_SEGMENT: libc::c_int = 103;

    fn gso_sender(segment: u16) -> (UdpSocket, SocketAddrV4) {
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        assert!(setsockopt_int(
            s.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            segment.into()
        ));
        let SocketAddr::V4(a) = s.local_addr().unwrap() else {
            panic!("v6")
        };
        (s, a)
    }

    /// Receive `want` packets (or for 5 s) through batches of `cap`.
    fn recv(
        port: &mut UdpPort,
        cap: usize,
        want: usize,
    ) -> (Vec<(Vec<u8>, SocketAddrV4)>, Vec<usize>) {
        let mut batch = Batch::new(cap);
        let (mut got, mut sizes) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < want && Instant::now() < deadline {
            if port.recv_batch(&mut batch).unwrap() == 0 {
                port.wait_readable(Duration::from_millis(100)).unwrap();
                continue;
            }
            sizes.push(batch.len);
            got.extend(
                batch
                    .packets()
                    .iter()
                    .map(|p| (p.as_slice().to_vec(), p.meta.peer)),
            );
        }
        (got, sizes)
    }

    /// A sender's GSO message (11 datagrams: 10 of 100 bytes and one of 50) then a
    /// lone datagram. With GRO the port receives the message whole in one syscall
    /// and hands out its datagrams in order over three batches of 4; without, the
    /// kernel cuts it first. Either way the same 12 packets, in the same order.
    #[test]
    fn a_gso_message_is_received_whole_and_cut_in_order() {
        for gro in [true, false] {
            let mut port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
            assert!(port.gro, "the kernel refused UDP_GRO");
            if !gro {
                // As a port made with PEPC_NO_UDP_GRO=1: the socket option off too.
                assert!(setsockopt_int(
                    port.as_raw_fd(),
                    libc::SOL_UDP,
                    super::UDP_GRO,
                    0
                ));
                port.gro = false;
            }
            let (s, from) = gso_sender(100);
            let msg: Vec<u8> = (0..1050u32).map(|i| (i * 7 + i / 100) as u8).collect();
            assert_eq!(s.send_to(&msg, port.local_addr()).unwrap(), 1050);
            let lone = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
            lone.send_to(b"tail", port.local_addr()).unwrap();
            let SocketAddr::V4(lone_addr) = lone.local_addr().unwrap() else {
                panic!("v6")
            };
            let (got, sizes) = recv(&mut port, 4, 12);
            let mut want: Vec<(Vec<u8>, SocketAddrV4)> =
                msg.chunks(100).map(|c| (c.to_vec(), from)).collect();
            want.push((b"tail".to_vec(), lone_addr));
            assert_eq!(got, want, "gro {gro}");
            assert!(sizes.iter().all(|&n| n <= 4), "{sizes:?}");
            let st = port.stats();
            assert_eq!(st.rx_packets, 12);
            assert_eq!(st.rx_bytes, 1054);
            if gro {
                assert_eq!(st.rx_gro_messages, 1, "{st:?}");
                // Both messages came in the first call; the rest was cut from them.
                assert_eq!(sizes, vec![4, 4, 4]);
                assert_eq!(st.rx_syscalls, 1, "{st:?}");
            } else {
                assert_eq!(st.rx_gro_messages, 0, "{st:?}");
            }
        }
    }

    /// GRO is the socket's option, shared by a port's clones (a data thread's sender):
    /// making a clone leaves it as the port set it, and the clone receives alike.
    #[test]
    fn a_clone_keeps_the_ports_choice() {
        for gro in [false, true] {
            let mut port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
            assert_eq!(port.set_gro(gro), gro);
            let mut clone = port.try_clone().unwrap();
            assert_eq!(clone.gro(), gro);
            let (s, from) = gso_sender(100);
            s.send_to(&[3u8; 300], port.local_addr()).unwrap();
            let (a, _) = recv(&mut port, 32, 3);
            s.send_to(&[4u8; 300], port.local_addr()).unwrap();
            let (b, _) = recv(&mut clone, 32, 3);
            let want = |v: u8| vec![(vec![v; 100], from); 3];
            assert_eq!((a, b), (want(3), want(4)), "gro {gro}");
            assert_eq!(port.stats().rx_gro_messages, u64::from(gro));
        }
    }

    /// Datagrams longer than a buffer's receive area are dropped whole and counted,
    /// coalesced or not; what follows them still arrives.
    #[test]
    fn segments_longer_than_a_buffer_are_discarded_whole() {
        let mut port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let (s, from) = gso_sender(1950);
        assert_eq!(s.send_to(&[9u8; 3900], port.local_addr()).unwrap(), 3900);
        s.send_to(&[5u8; 30], port.local_addr()).unwrap();
        let (got, _) = recv(&mut port, 32, 1);
        assert_eq!(got, vec![(vec![5u8; 30], from)]);
        let st = port.stats();
        assert_eq!((st.rx_truncated, st.rx_packets), (2, 1), "{st:?}");
    }

    /// A message of only an empty datagram is one (empty) packet, as without GRO.
    #[test]
    fn an_empty_datagram_is_one_empty_packet() {
        let mut port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        s.send_to(&[], port.local_addr()).unwrap();
        s.send_to(b"x", port.local_addr()).unwrap();
        let (got, _) = recv(&mut port, 32, 2);
        let lens: Vec<usize> = got.iter().map(|(d, _)| d.len()).collect();
        assert_eq!(lens, vec![0, 1]);
    }
}
