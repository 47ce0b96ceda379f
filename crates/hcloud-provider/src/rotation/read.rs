//! Reading the credential files as the configuration does (content trimmed; a token must be
//! one word), each poll anew through the path: Kubernetes updates a mounted Secret by
//! swapping the symlink `..data` to a new timestamped directory (the file itself is a
//! symlink into `..data`), so opening the path again is what sees the new content. Nothing
//! keeps a file open or remembers where the symlinks led.

use std::fmt;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};

use super::decide::Read;

/// What is wrong with a token (a value of `HCLOUD_TOKEN` or the content of
/// `HCLOUD_TOKEN_FILE`, trimmed), if anything: `None` for a usable one.
pub fn token_problem(token: &str) -> Option<&'static str> {
    if token.is_empty() {
        Some("is empty")
    } else if token.chars().any(char::is_whitespace) {
        Some("contains whitespace; expected a single API token")
    } else if token.chars().any(char::is_control) {
        Some("contains control characters; expected a single API token")
    } else {
        None
    }
}

/// A credential compared by value, never shown.
#[derive(Clone)]
pub struct Token(pub SecretString);

impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        self.0.expose_secret() == other.0.expose_secret()
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token([redacted])")
    }
}

/// The Robot webservice's basic-auth pair.
#[derive(Clone)]
pub struct RobotPair {
    /// The user (not a secret: logged).
    pub user: String,
    /// The password.
    pub password: SecretString,
}

impl PartialEq for RobotPair {
    fn eq(&self, other: &RobotPair) -> bool {
        self.user == other.user && self.password.expose_secret() == other.password.expose_secret()
    }
}

impl fmt::Debug for RobotPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotPair").field("user", &self.user).field("password", &"[redacted]").finish()
    }
}

/// Where one part of a credential comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A plain environment variable: fixed for the life of the process.
    Fixed,
    /// A file (`<NAME>_FILE`), read at every poll.
    File(PathBuf),
}

/// The trimmed content of `path`, or why it cannot be read (`variable` names the setting).
fn read_trimmed(variable: &str, path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map(|content| content.trim().to_owned())
        .map_err(|e| format!("{variable}: cannot read {path:?}: {e}"))
}

/// The token in `path` (`HCLOUD_TOKEN_FILE`).
pub fn read_token(path: &Path) -> Read<Token> {
    match read_trimmed("HCLOUD_TOKEN_FILE", path) {
        Err(why) => Read::Unreadable(why),
        Ok(token) => match token_problem(&token) {
            Some(why) => Read::Invalid(format!("HCLOUD_TOKEN_FILE: the token in {path:?} {why}")),
            None => Read::Value(Token(SecretString::from(token))),
        },
    }
}

/// The Robot pair: each part from its file, or the one in use where it is `Fixed`.
pub fn read_robot(user: &Source, password: &Source, in_use: &RobotPair) -> Read<RobotPair> {
    let part = |variable: &str, source: &Source| -> Result<Option<String>, Read<RobotPair>> {
        let Source::File(path) = source else { return Ok(None) };
        match read_trimmed(variable, path) {
            Err(why) => Err(Read::Unreadable(why)),
            Ok(v) if v.is_empty() => Err(Read::Invalid(format!("{variable}: {path:?} is empty"))),
            Ok(v) => Ok(Some(v)),
        }
    };
    let user = match part("ROBOT_USER_FILE", user) {
        Ok(u) => u.unwrap_or_else(|| in_use.user.clone()),
        Err(e) => return e,
    };
    let password = match part("ROBOT_PASSWORD_FILE", password) {
        Ok(p) => p.map(SecretString::from).unwrap_or_else(|| in_use.password.clone()),
        Err(e) => return e,
    };
    Read::Value(RobotPair { user, password })
}
