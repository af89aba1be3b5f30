//! Shared code of the fuzz targets: the recorded-stream format of `mme_flow`, the
//! recorder that makes its seeds from whole harness flows, and the replay.

pub mod flow;
