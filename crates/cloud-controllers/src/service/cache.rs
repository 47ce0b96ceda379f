//! The controller's memory of the Services it synced (upstream `serviceCache`): the last state
//! of each synced Service, so a Service that vanished without the cleanup finalizer still has
//! its load balancer deleted, a Service re-created under the same name (new UID) first loses
//! the old load balancer, and node changes reach every load balancer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use sync_lock::Unpoison as _;

use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::ObjectRef;

/// One cached Service (upstream `cachedService`); `state` is `None` until it is set.
#[derive(Debug, Clone, Default)]
pub struct CachedService {
    /// The Service as last synced.
    pub state: Option<Arc<Service>>,
}

/// Service → last synced state. Cheap to share behind an `Arc`; all methods lock.
#[derive(Debug, Default)]
pub struct ServiceCache {
    map: Mutex<HashMap<ObjectRef<Service>, CachedService>>,
}

impl ServiceCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<Service>, CachedService>> {
        // Whole-entry inserts and removes only; a poisoned map is still consistent.
        self.map.lock_unpoisoned()
    }

    /// The Services remembered (upstream `ListKeys`).
    pub fn list_keys(&self) -> Vec<ObjectRef<Service>> {
        self.lock().keys().cloned().collect()
    }

    /// The entry under `key`, if any (upstream `GetByKey`).
    pub fn get_by_key(&self, key: &ObjectRef<Service>) -> Option<CachedService> {
        self.get(key)
    }

    /// Every entry's state, `None` for entries not set yet (upstream `allServices`).
    pub fn all_services(&self) -> Vec<Option<Arc<Service>>> {
        self.lock().values().map(|c| c.state.clone()).collect()
    }

    /// The entry under `key`, if any.
    pub fn get(&self, key: &ObjectRef<Service>) -> Option<CachedService> {
        self.lock().get(key).cloned()
    }

    /// The entry under `key`, created empty if missing.
    pub fn get_or_create(&self, key: &ObjectRef<Service>) -> CachedService {
        self.lock().entry(key.clone()).or_default().clone()
    }

    /// Stores `service` under `key`.
    pub fn set(&self, key: &ObjectRef<Service>, service: CachedService) {
        self.lock().insert(key.clone(), service);
    }

    /// Removes `key`.
    pub fn delete(&self, key: &ObjectRef<Service>) {
        self.lock().remove(key);
    }

    /// Number of Services remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True if no Service is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
