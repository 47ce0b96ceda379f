//! Hetzner Cloud API answers: the models' deserialisation as the client does it (list pages,
//! single objects, DELETE answers with or without an action, error envelopes).
//!
//! The first byte picks the model (and the error status), the rest is the body. Properties:
//! - decoding does not depend on the route: bytes that decode straight into a model decode to
//!   the same value through a JSON tree, and wrapped as the only entry of a list page;
//! - a decoded page has exactly as many entries as the answer's list;
//! - an error envelope's code and message are kept verbatim; any other body gives a message
//!   of bounded length that names the status;
//! - an empty DELETE answer is "no action".

#![no_main]

use std::fmt::Debug;

use hcloud_api::fuzzing::{decode_optional_action, decode_page, parse_api_error};
use hcloud_api::models::{Action, Certificate, LoadBalancer, LoadBalancerType, Location, Network, Server, ServerType};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn check<T: DeserializeOwned + PartialEq + Debug>(body: &[u8], key: &str) {
    let direct = serde_json::from_slice::<T>(body);
    if let Ok(value) = &direct {
        // (A JSON tree can fail where the model did not: serde_json skips unknown fields
        // without checking their escapes, e.g. a lone surrogate `\ud800`.)
        if let Ok(tree) = serde_json::from_slice::<Value>(body) {
            match serde_json::from_value::<T>(tree) {
                Ok(again) => assert_eq!(&again, value, "through a JSON tree"),
                Err(e) => panic!("decodes from bytes but not from its JSON tree: {e}"),
            }
        }
        let mut page = format!("{{\"{key}\":[").into_bytes();
        page.extend_from_slice(body);
        page.extend_from_slice(b"]}");
        match decode_page::<T>(&page, key) {
            Ok(p) => assert_eq!(p.items.as_slice(), std::slice::from_ref(value), "as a list entry"),
            Err(e) => panic!("decodes alone but not as a list entry: {e}"),
        }
    }
    if let Ok(page) = decode_page::<T>(body, key)
        && let Ok(tree) = serde_json::from_slice::<Value>(body)
    {
        // The last of duplicate keys counts in both.
        let list = tree.get(key).and_then(Value::as_array).expect("a decoded page has its list");
        assert_eq!(list.len(), page.items.len());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    match pick % 10 {
        0 => check::<Server>(body, "servers"),
        1 => check::<LoadBalancer>(body, "load_balancers"),
        2 => check::<Network>(body, "networks"),
        3 => check::<Certificate>(body, "certificates"),
        4 => check::<Action>(body, "actions"),
        5 => check::<Location>(body, "locations"),
        6 => check::<ServerType>(body, "server_types"),
        7 => check::<LoadBalancerType>(body, "load_balancer_types"),
        8 => {
            let answer = decode_optional_action(body);
            if body.iter().all(u8::is_ascii_whitespace) {
                assert_eq!(answer, Ok(None));
            }
        }
        _ => {
            let status = 400 + u16::from(pick / 10) * 4;
            let e = parse_api_error(status, body, Some("c0ffee".to_owned()));
            assert_eq!(e.status, status);
            assert_eq!(e.correlation_id.as_deref(), Some("c0ffee"));
            // (A body that is no JSON tree may still decode: serde_json does not check the
            // strings of fields it skips.)
            let tree = serde_json::from_slice::<Value>(body).ok();
            let json = tree.is_some();
            let envelope = tree.and_then(|v| v.get("error").cloned());
            let code = envelope.as_ref().and_then(|e| e.get("code")).and_then(Value::as_str);
            let message = envelope.as_ref().and_then(|e| e.get("message")).and_then(Value::as_str);
            // The envelope verbatim, or (none the client can read) a short message naming the status.
            let verbatim = code == Some(e.code.as_str()) && e.message == message.unwrap_or_default();
            let generic = e.message.starts_with(&format!("HTTP {status}")) && e.message.chars().count() <= 220;
            assert!(verbatim || generic || !json, "{e:?} from {envelope:?}");
        }
    }
});
