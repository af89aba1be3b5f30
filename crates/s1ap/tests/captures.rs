//! Every S1AP message in the shared real captures decodes, re-encodes to the same
//! octets, and decodes into our typed messages; the procedure codes agree with tshark.

mod common;
use common::captures::*;
use pepc_s1ap::msg::S1apMessage;

fn tshark_codes(path: &std::path::Path) -> Option<Vec<u8>> {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-Y", "s1ap", "-T", "fields", "-e", "s1ap.procedureCode"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split(['\n', ','])
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse().expect("procedure code"))
            .collect(),
    )
}

#[test]
fn every_s1ap_message_in_captures_roundtrips() {
    let mut total = 0;
    for path in capture_files() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let payloads = s1ap_payloads(&path);
        let mut codes = Vec::new();
        for p in &payloads {
            let pdu = pepc_s1ap::decode(&p.bytes)
                .unwrap_or_else(|e| panic!("{name} frame {}: {e}: {}", p.frame, hex(&p.bytes)));
            codes.push(pdu.procedure_code());
            let again = pepc_s1ap::encode(&pdu).expect("re-encode");
            if again != p.bytes {
                // Non-canonical PER in the capture: the value must still be equal.
                let pdu2 = pepc_s1ap::decode(&again).expect("decode re-encoded");
                assert_eq!(pdu, pdu2, "{name} frame {}", p.frame);
            }
            let typed = S1apMessage::decode(&p.bytes).unwrap_or_else(|e| {
                panic!("{name} frame {} ({}): {e}", p.frame, pdu.procedure_name())
            });
            // Our typed view re-encodes to a PDU that decodes to the same typed value.
            let enc = typed.encode().expect("typed encode");
            let back = S1apMessage::decode(&enc).expect("typed decode of our encoding");
            assert_eq!(typed, back, "{name} frame {}", p.frame);
        }
        if let Some(expected) = tshark_codes(&path) {
            assert_eq!(
                codes, expected,
                "{name}: procedure codes differ from tshark's"
            );
        }
        eprintln!("{name}: {} S1AP messages", payloads.len());
        if name.starts_with("testattach")
            || name.starts_with("srsenb")
            || name.starts_with("magma")
            || name.starts_with("volte")
        {
            assert!(!payloads.is_empty(), "{name} carries S1AP");
        }
        total += payloads.len();
    }
    assert!(total > 200);
}
