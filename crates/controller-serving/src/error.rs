//! Start-up errors of the servers.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The flag naming the serving certificate file.
pub const CERT_FILE_FLAG: &str = "--tls-cert-file";
/// The flag naming the serving key file.
pub const KEY_FILE_FLAG: &str = "--tls-private-key-file";

/// Why a server could not start. Every variant names the setting to fix.
///
/// An underlying error is the [`source`](std::error::Error::source) and is not repeated in the
/// message, so a report that prints the chain of causes (anyhow's `{:#}`) names it once.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listening socket could not be bound (address in use, address not local, ...).
    #[error("cannot listen on {addr} ({setting})")]
    Bind {
        /// The address that was tried.
        addr: SocketAddr,
        /// The setting(s) the address came from, e.g. `--bind-address/--secure-port`.
        setting: String,
        /// The operating system's error (the source, not part of the message).
        #[source]
        source: io::Error,
    },
    /// Only one of the certificate and key files was given.
    #[error("{given} is set but {missing} is not: give both, or neither to use a generated self-signed certificate")]
    IncompletePair {
        /// The flag that was given.
        given: &'static str,
        /// The flag that is missing.
        missing: &'static str,
    },
    /// The certificate file could not be read or holds no usable certificate.
    #[error("{CERT_FILE_FLAG} {}: {reason}", path.display())]
    CertFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The key file could not be read or holds no usable private key.
    #[error("{KEY_FILE_FLAG} {}: {reason}", path.display())]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The key does not belong to the certificate (or the pair is otherwise unusable for TLS).
    #[error("{CERT_FILE_FLAG} {} and {KEY_FILE_FLAG} {} do not form a usable pair: {reason}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Generating the in-memory self-signed certificate failed.
    #[error("generating the self-signed serving certificate failed: {0}")]
    SelfSigned(String),
    /// The TLS parameters (`--tls-min-version`, `--tls-cipher-suites`, `--tls-curve-preferences`)
    /// leave nothing to negotiate with.
    #[error("the TLS settings (--tls-min-version, --tls-cipher-suites, --tls-curve-preferences) are unusable: {0}")]
    TlsParams(String),
    /// An `--authorization-always-allow-paths` pattern with a `*` other than at its end.
    #[error("--authorization-always-allow-paths: only a trailing * is allowed, not {pattern:?}")]
    AlwaysAllowPath {
        /// The refused pattern.
        pattern: String,
    },
    /// A client CA bundle (`--client-ca-file`, `--requestheader-client-ca-file`) is unusable.
    #[error("{flag} {origin}: {reason}")]
    ClientCa {
        /// The flag naming the file.
        flag: &'static str,
        /// The file, or where the PEM text came from.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
}
