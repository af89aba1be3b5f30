//! PEPC node: slices, demux, scheduler, packet I/O.

pub mod io;
