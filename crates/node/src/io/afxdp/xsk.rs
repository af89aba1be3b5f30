//! AF_XDP sockets on the kernel ABI (linux/if_xdp.h), without C: a UMEM of fixed
//! frames, its fill and completion rings, and the socket's RX and TX rings. Each ring is
//! single-producer/single-consumer between us and the kernel; we keep cached copies of
//! the other side's index so the shared cache lines are read only when a ring looks
//! full or empty.

use crate::io::socket_drops::{SocketDropsProbe, SocketKind};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;

const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// TX kicks per flush at most: a full default ring at copy mode's 32 per syscall.
const MAX_KICKS: u32 = 128;

/// Bytes per UMEM frame (one packet each).
pub const FRAME_SIZE: u32 = 2048;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// The v1 layout of `struct xdp_umem_reg` (every kernel with AF_XDP accepts it).
#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// An RX/TX ring entry (`struct xdp_desc`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// The kernel's per-socket drop counters (`struct xdp_statistics`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Dropped for other reasons (e.g. a packet larger than a frame).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// The fill ring had no frame for an arriving packet.
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// One mmapped ring of `T` entries.
struct Ring<T> {
    map: *mut libc::c_void,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    size: u32,
    /// Producer rings: our next index. Consumer rings: the producer index last read.
    cached_prod: u32,
    /// Producer rings: the consumer index last read. Consumer rings: our next index.
    cached_cons: u32,
}

impl<T> Ring<T> {
    fn map(fd: RawFd, off: &RingOffset, size: u32, pgoff: libc::off_t) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: maps the ring the kernel created for this socket; checked below.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = map as *mut u8;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie inside the mapping.
        unsafe {
            Ok(Ring {
                map,
                map_len,
                producer: base.add(off.producer as usize) as *const AtomicU32,
                consumer: base.add(off.consumer as usize) as *const AtomicU32,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize) as *mut T,
                mask: size - 1,
                size,
                cached_prod: 0,
                cached_cons: 0,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping; the kernel only ever writes it atomically.
        unsafe { &*self.producer }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    /// Whether the kernel asks for a syscall to make progress on this ring.
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    // ----- as producer (fill, TX) -----

    /// Room for up to `n` entries: how many may be written from `cached_prod`.
    fn free(&mut self, n: u32) -> u32 {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < n {
            self.cached_cons = self.consumer().load(Ordering::Acquire);
            free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        }
        free.min(n)
    }

    fn write(&mut self, i: u32, v: T) {
        // SAFETY: the index is masked into the ring, and the entry belongs to us until
        // `submit` publishes it.
        unsafe {
            ptr::write_volatile(
                self.desc
                    .add((self.cached_prod.wrapping_add(i) & self.mask) as usize),
                v,
            )
        }
    }

    fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.producer().store(self.cached_prod, Ordering::Release);
    }

    // ----- as consumer (RX, completion) -----

    fn available(&mut self, n: u32) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail == 0 {
            self.cached_prod = self.producer().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        avail.min(n)
    }

    fn read(&self, i: u32) -> T {
        // SAFETY: published by the kernel (below the producer index we loaded with
        // Acquire) and not yet released.
        unsafe {
            ptr::read_volatile(
                self.desc
                    .add((self.cached_cons.wrapping_add(i) & self.mask) as usize),
            )
        }
    }

    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.consumer().store(self.cached_cons, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// How the socket was bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// The driver DMA's into our UMEM.
    ZeroCopy,
    /// The kernel copies each packet between its buffers and our UMEM.
    Copy,
}

/// What to ask for at bind time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Zero-copy where the driver allows, copy mode otherwise.
    Auto,
    On,
    Off,
}

/// Sizes of a socket's UMEM and rings.
#[derive(Debug, Clone, Copy)]
pub struct XskConfig {
    /// Frames in the UMEM; half are kept on the fill ring for RX, half serve TX.
    pub frames: u32,
    /// Entries per ring (power of two).
    pub ring_size: u32,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            frames: 8192,
            ring_size: 4096,
        }
    }
}

/// Fill, completion, RX and TX rings.
type Rings = (Ring<u64>, Ring<u64>, Ring<Desc>, Ring<Desc>);

/// An AF_XDP socket bound to one queue of one interface, with its own UMEM.
pub struct XskSocket {
    fd: OwnedFd,
    umem: *mut u8,
    umem_len: usize,
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<Desc>,
    tx: Ring<Desc>,
    /// TX frames not in flight.
    tx_free: Vec<u64>,
    mode: BindMode,
    /// The kernel's drop counts, for other threads.
    probe: SocketDropsProbe,
}

// SAFETY: the socket owns its mappings; the raw pointers are used only through
// `&mut self`, from whichever single thread owns the socket.
unsafe impl Send for XskSocket {}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: a pointer to a live value and its exact size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T: Default>(fd: RawFd, name: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: a pointer to a live, writable value and its size.
    let r = unsafe { libc::getsockopt(fd, SOL_XDP, name, (&mut v as *mut T).cast(), &mut len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

/// The kernel's counters of the AF_XDP socket `fd`.
pub(crate) fn statistics_of(fd: RawFd) -> io::Result<XdpStatistics> {
    getsockopt(fd, XDP_STATISTICS)
}

fn ctx(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("AF_XDP {what}: {e}"))
}

impl XskSocket {
    /// Create a socket with a fresh UMEM and bind it to `ifindex`/`queue`.
    pub fn open(ifindex: u32, queue: u32, zc: ZeroCopy, cfg: XskConfig) -> io::Result<XskSocket> {
        let ring = cfg.ring_size;
        if !ring.is_power_of_two() || cfg.frames < 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "AF_XDP: ring size {ring} must be a power of two and frames ({}) at least 64",
                    cfg.frames
                ),
            ));
        }
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(ctx("socket", io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = cfg.frames as usize * FRAME_SIZE as usize;
        // SAFETY: an anonymous private mapping, checked below.
        let umem = unsafe {
            libc::mmap(
                ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(ctx("UMEM mmap", io::Error::last_os_error()));
        }
        let unmap = |e| {
            // SAFETY: the mapping made just above.
            unsafe { libc::munmap(umem, umem_len) };
            e
        };
        let reg = UmemReg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
        };
        let setup = || -> io::Result<Rings> {
            let f = fd.as_raw_fd();
            setsockopt(f, XDP_UMEM_REG, &reg).map_err(|e| ctx("UMEM_REG", e))?;
            setsockopt(f, XDP_UMEM_FILL_RING, &ring).map_err(|e| ctx("fill ring", e))?;
            setsockopt(f, XDP_UMEM_COMPLETION_RING, &ring)
                .map_err(|e| ctx("completion ring", e))?;
            setsockopt(f, XDP_RX_RING, &ring).map_err(|e| ctx("RX ring", e))?;
            setsockopt(f, XDP_TX_RING, &ring).map_err(|e| ctx("TX ring", e))?;
            let off: MmapOffsets =
                getsockopt(f, XDP_MMAP_OFFSETS).map_err(|e| ctx("MMAP_OFFSETS", e))?;
            Ok((
                Ring::map(f, &off.fr, ring, XDP_UMEM_PGOFF_FILL_RING)
                    .map_err(|e| ctx("fill mmap", e))?,
                Ring::map(f, &off.cr, ring, XDP_UMEM_PGOFF_COMPLETION_RING)
                    .map_err(|e| ctx("completion mmap", e))?,
                Ring::map(f, &off.rx, ring, XDP_PGOFF_RX_RING).map_err(|e| ctx("RX mmap", e))?,
                Ring::map(f, &off.tx, ring, XDP_PGOFF_TX_RING).map_err(|e| ctx("TX mmap", e))?,
            ))
        };
        let (mut fill, comp, rx, tx) = setup().map_err(unmap)?;

        // Half the frames wait on the fill ring for RX, the other half serve TX.
        let rx_frames = (cfg.frames / 2).min(ring);
        let n = fill.free(rx_frames);
        for i in 0..n {
            fill.write(i, i as u64 * FRAME_SIZE as u64);
        }
        fill.submit(n);
        let tx_free: Vec<u64> = (rx_frames..cfg.frames)
            .map(|i| i as u64 * FRAME_SIZE as u64)
            .collect();

        let bind = |flags: u16| -> io::Result<()> {
            let sa = SockaddrXdp {
                family: AF_XDP as u16,
                flags: flags | XDP_USE_NEED_WAKEUP,
                ifindex,
                queue_id: queue,
                shared_umem_fd: 0,
            };
            // SAFETY: a valid sockaddr_xdp and its size.
            let r = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&sa as *const SockaddrXdp).cast(),
                    size_of::<SockaddrXdp>() as libc::socklen_t,
                )
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let mode = match zc {
            ZeroCopy::On => bind(XDP_ZEROCOPY)
                .map(|_| BindMode::ZeroCopy)
                .map_err(|e| ctx("bind (zero-copy)", e)),
            ZeroCopy::Off => bind(XDP_COPY)
                .map(|_| BindMode::Copy)
                .map_err(|e| ctx("bind (copy)", e)),
            ZeroCopy::Auto => bind(XDP_ZEROCOPY).map(|_| BindMode::ZeroCopy).or_else(|_| {
                bind(XDP_COPY)
                    .map(|_| BindMode::Copy)
                    .map_err(|e| ctx("bind", e))
            }),
        }
        .map_err(unmap)?;
        Ok(XskSocket {
            fd,
            umem: umem as *mut u8,
            umem_len,
            fill,
            comp,
            rx,
            tx,
            tx_free,
            mode,
            probe: SocketDropsProbe::new(raw, SocketKind::Xsk),
        })
    }

    pub fn mode(&self) -> BindMode {
        self.mode
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A reader of this socket's kernel drops for another thread.
    pub fn drops_probe(&self) -> SocketDropsProbe {
        self.probe.clone()
    }

    fn frame(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let end = addr as usize + len;
        (end <= self.umem_len).then(|| {
            // SAFETY: inside the UMEM; the kernel handed this frame to us.
            unsafe { std::slice::from_raw_parts(self.umem.add(addr as usize), len) }
        })
    }

    /// Hand each received packet (up to `max`) to `f`, then give their frames back to
    /// the fill ring. Returns how many were received.
    pub fn recv(&mut self, max: u32, mut f: impl FnMut(&[u8])) -> u32 {
        let n = self.rx.available(max);
        if n == 0 {
            // In copy mode the kernel fills from softirq context; with need-wakeup set
            // on the fill ring it waits for a syscall.
            if self.fill.needs_wakeup() {
                self.kick_rx();
            }
            // Idle: send what the kernel left on the TX ring when it pushed back, so
            // the end of a burst does not wait for the next packet.
            self.flush_tx();
            return 0;
        }
        for i in 0..n {
            let d = self.rx.read(i);
            if let Some(bytes) = self.frame(d.addr, d.len as usize) {
                f(bytes);
            }
        }
        // Every RX frame goes back to the fill ring (the fill ring is as large as the
        // RX frames we own, so there is always room).
        let room = self.fill.free(n);
        for i in 0..room {
            let d = self.rx.read(i);
            self.fill.write(i, d.addr & !(FRAME_SIZE as u64 - 1));
        }
        self.fill.submit(room);
        self.rx.release(n);
        n
    }

    /// Take completed TX frames back.
    fn reclaim(&mut self) {
        let n = self.comp.available(self.comp.size);
        for i in 0..n {
            let a = self.comp.read(i);
            self.tx_free.push(a);
        }
        self.comp.release(n);
    }

    /// Queue up to `count` packets for transmit: `build(i, frame)` writes packet `i`
    /// into a frame and returns its length (0 skips it). Returns how many were queued;
    /// the rest found no frame or no room on the TX ring.
    pub fn send(
        &mut self,
        count: usize,
        mut build: impl FnMut(usize, &mut [u8]) -> usize,
    ) -> usize {
        if self.tx_free.len() < count {
            self.reclaim();
        }
        let room = self.tx.free(count as u32).min(self.tx_free.len() as u32);
        let mut queued = 0u32;
        for i in 0..count {
            if queued == room {
                break;
            }
            let Some(&addr) = self.tx_free.last() else {
                break;
            };
            // SAFETY: a free TX frame of FRAME_SIZE bytes inside the UMEM.
            let frame = unsafe {
                std::slice::from_raw_parts_mut(self.umem.add(addr as usize), FRAME_SIZE as usize)
            };
            let len = build(i, frame);
            if len == 0 {
                continue;
            }
            self.tx_free.pop();
            self.tx.write(
                queued,
                Desc {
                    addr,
                    len: len as u32,
                    options: 0,
                },
            );
            queued += 1;
        }
        if queued > 0 {
            self.tx.submit(queued);
            self.flush_tx();
        }
        queued as usize
    }

    /// Descriptors on the TX ring the kernel has not taken yet.
    pub fn tx_queued(&self) -> u32 {
        self.tx
            .cached_prod
            .wrapping_sub(self.tx.consumer().load(Ordering::Acquire))
    }

    /// Where the kernel sends only when asked (copy mode; a zero-copy driver that
    /// wants a wakeup), ask until it has taken every queued TX descriptor or stops
    /// taking them. Copy mode takes at most 32 per syscall, and none while the
    /// device pushes back; what is left goes at the next send or idle receive.
    /// Returns how many are still queued.
    pub fn flush_tx(&mut self) -> u32 {
        let mut left = self.tx_queued();
        let mut kicks = 0;
        while left > 0 && self.tx.needs_wakeup() && kicks < MAX_KICKS {
            self.kick_tx();
            kicks += 1;
            let now = self.tx_queued();
            if now >= left {
                break;
            }
            left = now;
        }
        left
    }

    fn kick_tx(&self) {
        // SAFETY: a zero-length send on our socket asks the kernel to process TX.
        unsafe {
            libc::sendto(
                self.fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
    }

    fn kick_rx(&self) {
        // SAFETY: a zero-length, non-blocking receive wakes the kernel's RX processing.
        unsafe {
            libc::recvfrom(
                self.fd(),
                ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
    }
}

impl Drop for XskSocket {
    fn drop(&mut self) {
        self.probe.close();
        // The rings unmap themselves; the UMEM is ours. The socket closes after this
        // (field drop), which is when the kernel stops using the UMEM: unmapping first
        // is safe because the kernel pinned its pages at UMEM_REG.
        // SAFETY: the mapping made in `open`.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}
