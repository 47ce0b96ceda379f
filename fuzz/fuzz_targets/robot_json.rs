//! Robot webservice answers (`GET /server`, `GET /server/{n}`, `GET /reset/{n}`) and its error
//! envelope, decoded as the Robot client does.
//!
//! The first byte picks the endpoint and the status, the rest is the body. Properties: a
//! server list has as many servers as the answer; one server decodes to the same server as
//! the only entry of a list; an error envelope's code is kept verbatim, and `SERVER_NOT_FOUND`
//! is an empty list / no server (not an error) for those two.

#![no_main]

use hcloud_api::fuzzing::{robot_reset, robot_server, robot_servers};
use hcloud_api::robot::{RobotError, RobotErrorCode};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let status = [200, 200, 200, 404, 403, 401, 500, 503][usize::from(pick >> 5) % 8];
    // (A body that is no JSON tree may still decode: serde_json does not check the strings
    // of fields it skips.)
    let tree = serde_json::from_slice::<Value>(body).ok();
    let json = tree.is_some();
    let envelope = tree.and_then(|v| v.get("error").cloned());
    let code = envelope.as_ref().and_then(|e| e.get("code")).and_then(Value::as_str).map(str::to_owned);
    // An API error keeps the envelope's code verbatim, or (no usable envelope) has none.
    let check_error = |e: &RobotError, not_found_is_none: bool| {
        if let RobotError::Api { code: got, message, .. } = e {
            assert_ne!(status, 200, "a 2xx answer is never an API error: {e}");
            if not_found_is_none {
                assert_ne!(got, &RobotErrorCode::ServerNotFound, "SERVER_NOT_FOUND is no server, not an error");
            }
            let generic = got.as_str().is_empty() && message.ends_with("without an error envelope");
            // An envelope without a code has the empty one.
            let verbatim = code.as_deref().unwrap_or_default() == got.as_str();
            assert!(generic || verbatim || !json, "{e:?} from {code:?}");
        }
    };
    match pick % 3 {
        0 => match robot_servers(status, body) {
            Ok(list) if status == 200 => {
                if let Ok(tree) = serde_json::from_slice::<Value>(body) {
                    assert_eq!(tree.as_array().map(Vec::len), Some(list.len()));
                }
            }
            Ok(list) => {
                assert!(list.is_empty());
                assert!(!json || code.as_deref() == Some("SERVER_NOT_FOUND"), "{code:?}");
            }
            Err(e) => check_error(&e, true),
        },
        1 => match robot_server(status, body) {
            Ok(Some(server)) => {
                let mut list = b"[".to_vec();
                list.extend_from_slice(body);
                list.push(b']');
                assert_eq!(robot_servers(200, &list).ok(), Some(vec![server]));
            }
            Ok(None) => assert!(!json || code.as_deref() == Some("SERVER_NOT_FOUND"), "{code:?}"),
            Err(e) => check_error(&e, true),
        },
        _ => {
            if let Err(e) = robot_reset(status, body) {
                check_error(&e, false);
            }
        }
    }
});
