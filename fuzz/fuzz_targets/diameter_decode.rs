//! Diameter (RFC 6733) decode, the S6a answers' parsers included: every view over the
//! bytes (message header, AVPs, grouped AVPs read as every type), then the E-UTRAN
//! vector and Subscription-Data parsers of an AIA / ULA / IDR. Errors are fine; a
//! panic or a hang is not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pepc_diameter::codec::MessageView;
use pepc_diameter::s6a;

fuzz_target!(|data: &[u8]| {
    pepc_diameter::fuzz_decode(data);
    if let Ok(m) = MessageView::new_checked(data) {
        let _ = s6a::parse_vector_of(&m);
        let _ = s6a::parse_subscription_data_of(&m);
    }
});
