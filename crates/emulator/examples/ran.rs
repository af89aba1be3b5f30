//! The emulator as its own program (what `pepc ran` runs):
//! `cargo run --release -p pepc-emulator --example ran -- --help`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "ran", about = "eNB/UE emulator against any EPC")]
struct Cli {
    #[command(flatten)]
    ran: pepc_emulator::RanArgs,
}

fn main() -> std::process::ExitCode {
    match pepc_emulator::ran_command(&Cli::parse().ran) {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ran: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
