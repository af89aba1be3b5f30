//! `pepc ran` arguments: scenario file plus overrides, EPC-side flags, OP -> OPc, and
//! keys never shown in Debug output or errors.

use clap::Parser;
use pepc_emulator::config::{SctpMode, SgiMode, TrafficProfile};
use pepc_emulator::RanArgs;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    ran: RanArgs,
}

fn parse(args: &[&str]) -> RanArgs {
    Cli::try_parse_from(std::iter::once("ran").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{e}"))
        .ran
}

const K: &str = "000102030405060708090A0B0C0D0E0F";
const OP: &str = "CDC202D5123E20F62B6D676AC72CB318";
#[test]
fn scenario_file_then_flag_overrides() {
    let dir = std::env::temp_dir().join(format!("pepc-ran-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    std::fs::write(
        &f,
        "ues = 7\nattach_rate = 50.0\nevent_rate = 3.0\n[traffic]\nprofile = \"pepc\"\nrate_pps = 10.0\n",
    )
    .unwrap();
    let a = parse(&[
        "--scenario",
        f.to_str().unwrap(),
        "--ues",
        "9",
        "--traffic",
        "table-iv",
        "--iot-share",
        "0.25",
        "--mme",
        "10.0.0.1:36412",
        "--sctp",
        "kernel",
        "--gtpu-local",
        "127.0.0.9:2152",
        "--plmn",
        "310410",
        "--tac",
        "7",
        "--imsi-start",
        "310410000000100",
        "--apn",
        "ims",
        "--sgi",
        "tun",
        "--json",
    ]);
    let (cfg, scen) = a.to_config().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(scen.ues, 9, "flag overrides the file");
    assert_eq!(scen.attach_rate, 50.0, "file value kept");
    assert_eq!(scen.event_rate, 3.0);
    assert_eq!(scen.traffic.profile, TrafficProfile::TableIv);
    assert_eq!(scen.traffic.rate_pps, 10.0);
    assert_eq!(scen.iot_share, 0.25);
    assert_eq!(cfg.sctp, SctpMode::Kernel);
    assert_eq!(cfg.mme_ip.to_string(), "10.0.0.1");
    assert_eq!(cfg.mme_sctp_port, 36412);
    assert_eq!(cfg.gtpu_addr.to_string(), "127.0.0.9:2152");
    assert_eq!((cfg.mcc.as_str(), cfg.mnc.as_str()), ("310", "410"));
    assert_eq!(cfg.tac, 7);
    assert_eq!(cfg.subscribers.imsi(1).as_deref(), Some("310410000000101"));
    assert_eq!(cfg.apn.as_deref(), Some("ims"));
    assert_eq!(cfg.sgi, SgiMode::Tun);
    assert!(!cfg.progress, "--json keeps stderr quiet");
}

#[test]
fn udp_transport_uses_the_port_as_encapsulation_port() {
    let (cfg, scen) = parse(&["--mme", "127.0.0.1:9999"]).to_config().unwrap();
    assert_eq!(cfg.sctp, SctpMode::Udp);
    assert_eq!(cfg.mme_udp_port, 9999);
    assert_eq!(cfg.mme_sctp_port, 36412);
    assert_eq!(scen, pepc_emulator::Scenario::default());
}

#[test]
fn op_gives_opc_and_keys_stay_hidden() {
    let a = parse(&["--k", K, "--op", OP]);
    let dbg = format!("{a:?}");
    assert!(!dbg.contains(K) && !dbg.contains(OP), "{dbg}");
    let (cfg, _) = a.to_config().unwrap();
    let dbg = format!("{cfg:?}");
    assert!(
        !dbg.contains(K) && !dbg.contains(&cfg.subscribers.opc),
        "{dbg}"
    );
    // OPc = AES_K(OP) xor OP, as Milenage derives it.
    let m = pepc_security::Milenage::new_with_op(&pepc_security::Key128::from_hex(K).unwrap(), {
        let mut op = [0u8; 16];
        for i in 0..16 {
            op[i] = u8::from_str_radix(&OP[2 * i..2 * i + 2], 16).unwrap();
        }
        op
    });
    let want: String = m
        .opc()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(cfg.subscribers.opc, want);
    assert_ne!(cfg.subscribers.opc, OP);
    // --op and --opc together are refused by the parser.
    assert!(Cli::try_parse_from(["ran", "--op", OP, "--opc", OP]).is_err());
}

#[test]
fn bad_values_are_named_without_echoing_keys() {
    let secret = "ZZ0102030405060708090A0B0C0D0E0F";
    let e = parse(&["--k", secret]).to_config().unwrap_err().to_string();
    assert!(e.contains("--k") && !e.contains(secret), "{e}");
    let e = parse(&["--opc", "0011"])
        .to_config()
        .unwrap_err()
        .to_string();
    assert!(e.contains("--opc") && !e.contains("0011"), "{e}");
    let e = parse(&["--plmn", "0010"])
        .to_config()
        .unwrap_err()
        .to_string();
    assert!(e.contains("--plmn"), "{e}");
    let e = parse(&["--iot-share", "2"])
        .to_config()
        .unwrap_err()
        .to_string();
    assert!(e.contains("iot_share"), "{e}");
    let e = parse(&["--imsi-start", "99999999999999999"])
        .to_config()
        .unwrap_err()
        .to_string();
    assert!(e.contains("--imsi-start"), "{e}");
}
