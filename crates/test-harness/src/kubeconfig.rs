//! The kubeconfig files [`crate::ControlPlane`] writes: one token identity each, trusting the API
//! server's self-signed CA (given inline as `certificate-authority-data`).

/// A kubeconfig (YAML) for one token identity that trusts the API server's self-signed CA.
pub(crate) fn kubeconfig(server: &str, ca_data: &str, user: &str, token: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: test-harness
  cluster:
    server: "{server}"
    certificate-authority-data: "{ca_data}"
users:
- name: "{user}"
  user:
    token: "{token}"
contexts:
- name: test-harness
  context:
    cluster: test-harness
    user: "{user}"
    namespace: default
current-context: test-harness
"#
    )
}

/// Standard base64 with padding (for `certificate-authority-data`).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                let index = ((n >> shift) & 63) as usize;
                out.push(char::from(ALPHABET.get(index).copied().unwrap_or(b'=')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use kube::config::Kubeconfig;

    use super::*;
    use crate::rbac;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in cases {
            assert_eq!(base64(input.as_bytes()), expected, "input {input:?}");
        }
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }

    #[test]
    fn kubeconfig_parses() {
        let text = kubeconfig("https://127.0.0.1:6443", "Zm9v", rbac::CCM_USER, "tok");
        let parsed = Kubeconfig::from_yaml(&text);
        assert!(parsed.is_ok(), "{parsed:?}");
        let parsed = parsed.unwrap_or_default();
        assert_eq!(parsed.current_context.as_deref(), Some("test-harness"));
        assert_eq!(parsed.auth_infos[0].name, rbac::CCM_USER);
    }
}
