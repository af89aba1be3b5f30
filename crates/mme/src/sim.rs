//! placeholder
pub struct AttachBenchResult;
pub fn run_inprocess_attaches(_n: usize) -> AttachBenchResult { AttachBenchResult }
