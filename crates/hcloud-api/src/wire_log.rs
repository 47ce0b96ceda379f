//! The debug wire log (`HCLOUD_DEBUG`): request and response bodies at debug level, target
//! `hcloud_api::wire`, with secrets redacted. The token is never part of a body; the private
//! key of an uploaded certificate is, and is replaced by `[redacted]` before logging.

use tracing::debug;

/// JSON object keys whose values are never logged.
const SECRET_KEYS: &[&str] = &["private_key", "password", "token", "root_password"];

const REDACTED: &str = "[redacted]";

/// A body as it may be logged: JSON with secret values replaced, anything else as text.
pub(crate) fn loggable(body: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut v) => {
            redact(&mut v);
            v.to_string()
        }
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            // A body that is not JSON cannot be redacted field by field; refuse to log one
            // that mentions a secret key at all.
            if SECRET_KEYS.iter().any(|k| text.contains(k)) {
                format!("[{} bytes, not JSON, withheld: may contain a secret]", body.len())
            } else {
                text.into_owned()
            }
        }
    }
}

fn redact(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if SECRET_KEYS.contains(&k.as_str()) {
                    *val = serde_json::Value::String(REDACTED.to_owned());
                } else {
                    redact(val);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// Logs a request body.
pub(crate) fn request(request: &str, body: &[u8]) {
    debug!(target: "hcloud_api::wire", request = %request, body = %loggable(body), "request");
}

/// Logs a response body.
pub(crate) fn response(request: &str, status: u16, body: &[u8]) {
    debug!(target: "hcloud_api::wire", request = %request, status, body = %loggable(body), "response");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let body = br#"{"name":"tls","type":"uploaded","certificate":"-----BEGIN CERTIFICATE-----",
            "private_key":"-----BEGIN PRIVATE KEY-----\nMIIEv","nested":[{"private_key":"k2"}]}"#;
        let out = loggable(body);
        assert!(!out.contains("BEGIN PRIVATE KEY") && !out.contains("k2"), "{out}");
        assert!(out.contains("BEGIN CERTIFICATE") && out.contains(r#""private_key":"[redacted]""#), "{out}");
    }

    #[test]
    fn non_json_is_logged_unless_it_mentions_a_secret() {
        assert_eq!(loggable(b"<html>502 Bad Gateway</html>"), "<html>502 Bad Gateway</html>");
        let out = loggable(b"{broken \"private_key\": \"abc");
        assert!(!out.contains("abc"), "{out}");
    }
}
