//! The thin I/O layer: GET, POST and PUT of one Lease, each bounded by a timeout, with the
//! answers leader election cares about classified. No PATCH: the usual CCM RBAC grants leases
//! `create, get, list, watch, update` only.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::record::{LeaderRecord, Snapshot};

/// How an API call ended, other than with the object.
#[derive(Debug)]
pub(crate) enum CallError {
    /// No answer within the timeout.
    Timeout(Duration),
    /// 409 on a write: the object changed since we read it.
    Conflict,
    /// 409 AlreadyExists on a create.
    AlreadyExists,
    /// 404 on a write: the Lease was deleted.
    NotFound,
    /// Nothing was sent: our copy has no `resourceVersion` to use as a precondition.
    NoPrecondition,
    /// Any other failure.
    Api(kube::Error),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Timeout(timeout) => write!(f, "no answer within {timeout:?}"),
            CallError::Conflict => f.write_str("conflict: the Lease changed since it was read"),
            CallError::AlreadyExists => f.write_str("the Lease already exists"),
            CallError::NotFound => f.write_str("the Lease does not exist"),
            CallError::NoPrecondition => f.write_str("refusing to write a Lease without a resourceVersion"),
            CallError::Api(error) => write!(f, "{error}"),
        }
    }
}

fn classify(error: kube::Error) -> CallError {
    match &error {
        kube::Error::Api(status) if status.code == 409 && status.is_already_exists() => CallError::AlreadyExists,
        kube::Error::Api(status) if status.code == 409 => CallError::Conflict,
        kube::Error::Api(status) if status.code == 404 => CallError::NotFound,
        _ => CallError::Api(error),
    }
}

async fn bounded<T>(timeout: Duration, call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(classify(error)),
        Err(_) => Err(CallError::Timeout(timeout)),
    }
}

/// The Lease API of one Lease.
#[derive(Clone)]
pub(crate) struct LeaseApi {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl LeaseApi {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> LeaseApi {
        LeaseApi { api: Api::namespaced(client, namespace), namespace: namespace.to_owned(), name: name.to_owned() }
    }

    /// GET; `None` when the Lease does not exist.
    pub async fn get(&self, timeout: Duration) -> Result<Option<Snapshot>, CallError> {
        let lease = bounded(timeout, self.api.get_opt(&self.name)).await?;
        Ok(lease.map(Snapshot::new))
    }

    /// POST a new Lease holding `record`.
    pub async fn create(&self, record: &LeaderRecord, timeout: Duration) -> Result<Snapshot, CallError> {
        let mut lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        record.write_into(&mut lease);
        let created = bounded(timeout, self.api.create(&PostParams::default(), &lease)).await?;
        Ok(Snapshot::new(created))
    }

    /// PUT `record` into the object of `current`, with `current`'s `resourceVersion` as the
    /// precondition (a 409 means someone else wrote in between).
    pub async fn replace(
        &self,
        current: &Snapshot,
        record: &LeaderRecord,
        timeout: Duration,
    ) -> Result<Snapshot, CallError> {
        if current.resource_version.is_empty() {
            return Err(CallError::NoPrecondition);
        }
        let mut lease = current.lease.clone();
        lease.metadata.resource_version = Some(current.resource_version.clone());
        // Server-maintained; not needed in a replace and only makes the request bigger.
        lease.metadata.managed_fields = None;
        record.write_into(&mut lease);
        let replaced = bounded(timeout, self.api.replace(&self.name, &PostParams::default(), &lease)).await?;
        Ok(Snapshot::new(replaced))
    }
}
