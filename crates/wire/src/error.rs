use core::fmt;

/// What was wrong with a packet. Every decoder in this crate returns these; none panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer is shorter than the header or length field says it must be.
    Truncated { need: usize, have: usize },
    /// Unsupported protocol version (e.g. GTP version != 1, IP version != 4).
    BadVersion(u8),
    /// GTP' (protocol type bit 0) is not GTP-U.
    NotGtpu,
    /// A length field disagrees with the buffer or with itself.
    BadLength { field: &'static str, value: usize },
    /// An extension header type we cannot skip (comprehension required).
    UnknownExtension(u8),
    /// A header checksum does not verify.
    BadChecksum,
    /// A field holds a value the protocol forbids.
    BadField { field: &'static str, value: u32 },
    /// Not enough headroom/tailroom in the buffer to build the packet.
    NoRoom { need: usize, have: usize },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WireError::Truncated { need, have } => {
                write!(f, "truncated: need {need} bytes, have {have}")
            }
            WireError::BadVersion(v) => write!(f, "unsupported version {v}"),
            WireError::NotGtpu => write!(f, "protocol type bit says GTP', not GTP-U"),
            WireError::BadLength { field, value } => write!(f, "bad length in {field}: {value}"),
            WireError::UnknownExtension(t) => {
                write!(
                    f,
                    "unknown comprehension-required extension header 0x{t:02x}"
                )
            }
            WireError::BadChecksum => write!(f, "bad checksum"),
            WireError::BadField { field, value } => write!(f, "bad value {value:#x} in {field}"),
            WireError::NoRoom { need, have } => write!(f, "no room: need {need}, have {have}"),
        }
    }
}

impl std::error::Error for WireError {}
