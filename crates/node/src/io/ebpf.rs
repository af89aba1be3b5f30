//! BPF bytecode built by hand and loaded with bpf(2): the few programs the node needs
//! (the AF_XDP port's XDP program, the TUN queue steering of [`super::steer`]) are a
//! few dozen instructions each, so neither a compiler nor libbpf is needed.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

pub(crate) const BPF_MAP_CREATE: libc::c_long = 0;
pub(crate) const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub(crate) const BPF_PROG_LOAD: libc::c_long = 5;
pub(crate) const BPF_LINK_CREATE: libc::c_long = 28;

/// One BPF instruction (`struct bpf_insn`).
#[derive(Clone, Copy)]
pub(crate) struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

pub(crate) fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

// Opcodes (linux/bpf_common.h, linux/bpf.h).
pub(crate) const LDXW: u8 = 0x61;
pub(crate) const LDXH: u8 = 0x69;
pub(crate) const LDXB: u8 = 0x71;
/// Legacy packet load (socket filters): r0 = ntohl(*(u32 *)(skb->data + imm)); the
/// program returns 0 when the packet is shorter. Needs the context in r6.
pub(crate) const LD_ABS_W: u8 = 0x20;
pub(crate) const MOV64_X: u8 = 0xbf;
pub(crate) const MOV64_K: u8 = 0xb7;
pub(crate) const ADD64_K: u8 = 0x07;
pub(crate) const AND32_K: u8 = 0x54;
pub(crate) const RSH32_K: u8 = 0x74;
pub(crate) const JGT_X: u8 = 0x2d;
pub(crate) const JNE32_K: u8 = 0x56;
pub(crate) const JEQ32_K: u8 = 0x16;
pub(crate) const JA: u8 = 0x05;
pub(crate) const CALL: u8 = 0x85;
pub(crate) const EXIT: u8 = 0x95;
pub(crate) const LD_IMM64: u8 = 0x18;

/// bpf(2) with a zero-padded attribute union of 144 bytes.
pub(crate) fn bpf(cmd: libc::c_long, attr: &mut [u64; 18]) -> io::Result<libc::c_long> {
    // SAFETY: the attribute buffer is live, writable and as long as we say.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr) as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(crate) fn fd_from(r: libc::c_long) -> OwnedFd {
    // SAFETY: bpf(2) returned a fresh descriptor we own.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// Load `insns` as a program of `prog_type`; the error carries the verifier's log and
/// names `what` was loaded.
pub(crate) fn load(prog_type: u32, insns: &[Insn], what: &str) -> io::Result<OwnedFd> {
    let raw: Vec<u64> = insns
        .iter()
        .map(|i| {
            i.code as u64
                | (i.regs as u64) << 8
                | ((i.off as u16) as u64) << 16
                | ((i.imm as u32) as u64) << 32
        })
        .collect();
    let license = CString::new("Dual MIT/GPL").expect("no NUL");
    let mut log = vec![0u8; 16 << 10];
    let mut a = [0u64; 18];
    a[0] = prog_type as u64 | ((raw.len() as u64) << 32);
    a[1] = raw.as_ptr() as u64;
    a[2] = license.as_ptr() as u64;
    a[3] = 1 | ((log.len() as u64) << 32); // log_level 1, log_size
    a[4] = log.as_mut_ptr() as u64;
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => Ok(fd_from(fd)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let msg = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                e.kind(),
                format!("loading {what}: {e}; verifier: {}", msg.trim()),
            ))
        }
    }
}

/// Every jump of `p` lands inside it (for the programs' tests).
#[cfg(test)]
pub(crate) fn assert_jumps_inside(p: &[Insn]) {
    for (i, x) in p.iter().enumerate() {
        if (x.code & 0x07 == 0x05 || x.code & 0x07 == 0x06) && x.code != CALL && x.code != EXIT {
            let t = i as i64 + 1 + x.off as i64;
            assert!(t > i as i64 && (t as usize) < p.len(), "jump {i} -> {t}");
        }
    }
    assert_eq!(p.last().map(|x| x.code), Some(EXIT));
}
