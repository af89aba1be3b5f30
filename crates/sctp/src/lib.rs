//! S1-MME transport: kernel SCTP or userspace SCTP over UDP (RFC 6951)
