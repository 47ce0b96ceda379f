//! A name for a token that can be logged: `tok-` and the first 8 hex digits of its SHA-256.

/// A short, stable, non-reversible name for an API token, e.g. `tok-1a2b3c4d`: the first 32
/// bits of its SHA-256 (the same as the test fake's request log shows, so a log line and a
/// recorded request can be matched). Safe to log for API tokens, which are long and random;
/// not meant for guessable secrets such as passwords, whose short hash prefix a dictionary
/// search could match.
pub fn token_fingerprint(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let prefix: String = digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("tok-{prefix}")
}

#[cfg(test)]
mod tests {
    use super::token_fingerprint;

    #[test]
    fn the_fingerprint_is_the_sha256_prefix() {
        // SHA-256("abc") = ba7816bf 8f01cfea ... (FIPS 180-2, appendix B.1).
        assert_eq!(token_fingerprint("abc"), "tok-ba7816bf");
        assert_eq!(token_fingerprint(""), "tok-e3b0c442");
    }
}
