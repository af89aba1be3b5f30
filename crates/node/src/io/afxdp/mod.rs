//! AF_XDP packet I/O (`[s1u] io = "afxdp"`, `[sgi] io = "afxdp"`): an XDP program
//! steers only our traffic (GTP-U to our address, packets to the UE pools) into an
//! AF_XDP socket per port and passes everything else to the kernel. Built on the
//! kernel ABI directly (`xsk`, `bpf`), with next hops from the kernel's tables (`neigh`).

pub mod bpf;
pub mod neigh;
mod port;
pub mod xsk;

pub use bpf::XdpMode;
pub use port::{parse_frame, AfXdpConfig, AfXdpPort, AfXdpStats, Role};
pub use xsk::{XskConfig, ZeroCopy};
