//! Configuration parsing: the node's TOML config (parse, then validate) and the whole
//! `pepc` file (its own sections split off, the rest handed to the node's parser).
//! Errors are expected; panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Configs are text; the TOML parser rejects invalid UTF-8 before us anyway.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = pepc_node::config::NodeConfig::parse(text) {
        let _ = c.validate();
    }
    let _ = pepc::epc::EpcConfig::parse(text);
});
