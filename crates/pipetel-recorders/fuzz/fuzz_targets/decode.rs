//! Feeds arbitrary bytes to the envelope decoder: it must return an error or an envelope that
//! re-encodes to bytes decoding to the same envelope, and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipetel_recorders::codec;

fuzz_target!(|data: &[u8]| {
    if let Ok(envelope) = codec::decode(data) {
        let again = codec::encode(&envelope);
        assert_eq!(codec::decode(&again).ok(), Some(envelope));
    }
});
