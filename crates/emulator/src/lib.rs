//! eNB/UE emulator: plays many eNBs and UEs against any EPC over the real protocols,
//! S1AP/NAS over SCTP (userspace over UDP, or kernel) and GTP-U over UDP, with a PDN
//! side that plays the SGi peer of the EPC's UDP sink.
//!
//! - [`ue`]: sans-IO UE (USIM, NAS security, EMM/ESM procedures).
//! - [`enb`]: sans-IO eNB (S1AP procedures, handovers, tunnels).
//! - [`config`]: [`EmulatorConfig`] and [`Scenario`] (TOML).
//! - [`driver`]: the socket loop; [`run`] is the blocking entry point.
//! - [`report`]: measures and the final [`Report`].
//! - [`ran`]: the `pepc ran` command ([`RanArgs`], [`ran_main`]).
// Unsafe only in the modules marked `#[allow(unsafe_code)]` below (system calls,
// shared memory), each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod config;
pub mod driver;
pub mod enb;
#[allow(unsafe_code)]
pub mod io;
pub mod ran;
pub mod report;
pub mod ue;

pub use config::{
    EmulatorConfig, Scenario, SctpMode, SgiMode, SignalingMix, SubscriberKeys, Traffic,
    TrafficProfile,
};
pub use driver::Emulator;
pub use ran::{ran_command, ran_main, RanArgs};
pub use report::{ProcedureStats, Report};

/// Why a run could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("I/O: {0}")]
    Io(String),
    #[error("S1 setup: {0}")]
    Setup(String),
}

impl From<std::io::Error> for EmuError {
    fn from(e: std::io::Error) -> Self {
        EmuError::Io(e.to_string())
    }
}

/// Run `scenario` against the EPC of `config`; blocks until the scenario (bounded by its
/// duration, the attach/detach rates and the procedure timeout) is over.
pub fn run(config: EmulatorConfig, scenario: Scenario) -> Result<Report, EmuError> {
    Emulator::new(config, scenario)?.run()
}

/// [`run`], calling `attach_phase_done` when the attach storm has settled.
pub fn run_observed(
    config: EmulatorConfig,
    scenario: Scenario,
    attach_phase_done: &mut dyn FnMut(),
) -> Result<Report, EmuError> {
    Emulator::new(config, scenario)?.run_observed(attach_phase_done)
}

/// [`run_observed`], with the steady state lasting until `stop` is raised (not
/// `duration_s`): the UEs stay attached, with traffic and the signalling mix, until
/// then; the run then drains, detaches and reports as usual.
pub fn run_until(
    config: EmulatorConfig,
    scenario: Scenario,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    attach_phase_done: &mut dyn FnMut(),
) -> Result<Report, EmuError> {
    Emulator::new(config, scenario)?
        .until(stop)
        .run_observed(attach_phase_done)
}
