//! providerIDs (`hcloud://<id>`, `hrobot://<n>`, `hcloud://bm-<n>`): a Node's `spec.providerID`.
//!
//! Properties: a parsed ID prints as a string that parses back to it; an input that is
//! already canonical (no leading zeros) prints as itself; an unknown prefix is never one of
//! ours, and our prefixes never give "unknown prefix".

#![no_main]

use hcloud_provider::provider_id::{CLOUD_PREFIX, ProviderId, ProviderIdError, ROBOT_PREFIX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    match ProviderId::parse(s) {
        Ok(id) => {
            let printed = id.to_string();
            assert_eq!(ProviderId::parse(&printed), Ok(id), "{s:?} printed as {printed:?}");
            // The number is all that can differ: leading zeros are accepted and dropped.
            if !s.contains("://0") && !s.contains("bm-0") {
                assert_eq!(printed, s);
            }
        }
        Err(ProviderIdError::UnknownPrefix(_)) => {
            assert!(!s.starts_with(CLOUD_PREFIX) && !s.starts_with(ROBOT_PREFIX), "{s:?}");
        }
        Err(ProviderIdError::InvalidId(got)) => assert_eq!(got, s),
    }
});
