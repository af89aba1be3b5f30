//! Benchmarks reproducing the PEPC paper's figures
