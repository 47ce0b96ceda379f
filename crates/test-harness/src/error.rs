//! The crate's error type.

use std::time::Duration;

/// Everything that can go wrong while starting, driving or observing the test environment.
///
/// Messages are written for a person reading a failed test: they say what was being done and,
/// where it helps, carry the tail of the relevant process logs or the last observed object.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A filesystem or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The control-plane binaries (kube-apiserver, etcd, kubectl) could not be found or built.
    #[error("control-plane binaries unavailable: {0}")]
    Assets(String),

    /// A helper command (openssl, kill, the provisioning script) failed.
    #[error("command `{command}` failed: {detail}")]
    Command {
        /// The command line, for the reader.
        command: String,
        /// Exit status and output.
        detail: String,
    },

    /// etcd or kube-apiserver did not become ready; `detail` holds the tails of both logs.
    #[error("control plane did not become ready: {reason}\n{detail}")]
    ControlPlaneNotReady {
        /// Why we gave up.
        reason: String,
        /// Log tails of etcd and kube-apiserver.
        detail: String,
    },

    /// The per-binary shared control plane failed to start (the first failure is remembered and
    /// returned to every later caller, so a broken environment fails fast).
    #[error("the shared control plane failed to start: {0}")]
    SharedStart(String),

    /// A kubeconfig file could not be read or turned into a client configuration.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The kubeconfig file.
        path: String,
        /// What went wrong.
        message: String,
    },

    /// A lab of real nodes ([`crate::real_node`]) could not be set up or used.
    #[error("node lab: {step}: {detail}")]
    NodeLab {
        /// What was being done.
        step: String,
        /// Why it failed (with log tails where there are any).
        detail: String,
    },

    /// A Kubernetes API call failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: String,
        /// The client error (use [`HarnessError::status_code`] to inspect HTTP codes).
        #[source]
        source: kube::Error,
    },

    /// The shipped ClusterRole rules (`deploy/chart/hcloud-ccm/files/clusterrole-rules.json`)
    /// are not a JSON list of RBAC PolicyRules.
    #[error("the shipped ClusterRole rules {path} do not parse: {message}")]
    RbacRules {
        /// The rules file, relative to the repository.
        path: &'static str,
        /// The parser's message.
        message: String,
    },

    /// The API server answered, but not as the harness relies on (e.g. it dropped the status a
    /// Node was created with).
    #[error("unexpected API server behaviour: {0}")]
    Unexpected(String),

    /// A condition did not hold before its deadline.
    #[error("timed out after {timeout:?} waiting for {description}\n{last_state}")]
    Timeout {
        /// What was awaited, as given by the caller.
        description: String,
        /// How long we waited.
        timeout: Duration,
        /// The last observed state (object as pretty JSON, or the last error), for diagnosis.
        last_state: String,
    },
}

impl HarnessError {
    /// The HTTP status code of a failed Kubernetes API call, if this is one
    /// (e.g. `Some(409)` for a conflict, `Some(403)` for forbidden).
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Kube { source: kube::Error::Api(status), .. } => Some(status.code),
            _ => None,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }

    pub(crate) fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube { context: context.into(), source }
    }
}
