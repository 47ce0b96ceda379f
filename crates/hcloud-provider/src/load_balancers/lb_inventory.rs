//! The shared Load Balancer inventory: one paginated list of the project's Load Balancers
//! serves every lookup (by the Service-UID label, by name) of every Service, instead of two
//! requests per Service and reconcile.
//!
//! Why a cached answer is safe here:
//! - only this process (while it leads) creates Load Balancers with the identity label, and it
//!   records each one it creates; a create whose answer was lost marks the UID *uncertain*, and
//!   the next lookup for that UID asks the API (`label_selector`) before anything is created
//!   (the mark goes with a successful create, a find, or the Service);
//! - a Load Balancer created by someone else after the list (for adoption by name) makes the
//!   create fail with `uniqueness_error`; the caller then re-lists ([`LbInventory::relist`]);
//! - after every accepted change the entry is updated with the change's effect (write-through),
//!   so a plan never works from data older than its own changes; an entry whose change failed
//!   or whose action failed is marked stale and read again (`GET /load_balancers/{id}`) before
//!   it is used;
//! - the whole list is read again when older than the max age
//!   (`HCLOUD_LOAD_BALANCERS_CACHE_MAX_AGE`, default 5 min), so changes made outside the CCM
//!   are seen within that time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use sync_lock::Unpoison as _;

use hcloud_api::models::{LoadBalancer, LoadBalancerId, LoadBalancerListParams};
use hcloud_api::{Client, Error};
use tokio::time::Instant;
use tracing::debug;

use super::annotations::LABEL_SERVICE_UID;

#[derive(Debug, Clone)]
struct Entry {
    lb: Arc<LoadBalancer>,
    stale: bool,
    touched: Instant,
}

#[derive(Debug, Default)]
struct Snapshot {
    listed_at: Option<Instant>,
    entries: BTreeMap<LoadBalancerId, Entry>,
    /// Removed locally (deleted by us): kept out of a list that was taken before.
    removed: HashMap<LoadBalancerId, Instant>,
    /// Service UIDs whose create may have happened without us recording it.
    uncertain: HashSet<String>,
}

/// What a lookup found.
#[derive(Debug, Clone)]
pub enum Found {
    /// Nothing: neither by label nor by name.
    None,
    /// The Load Balancer carrying the Service's UID label.
    ByLabel(Arc<LoadBalancer>),
    /// A Load Balancer with the Service's Load Balancer name but without its UID label, as the
    /// list holds it: adopted only if it carries no identity label at all, decided on a fresh
    /// read of it ([`super::plan::decide_adoption`]).
    ByName(Arc<LoadBalancer>),
}

impl Found {
    /// The Load Balancer found, by label or by name.
    pub fn into_option(self) -> Option<Arc<LoadBalancer>> {
        match self {
            Found::None => None,
            Found::ByLabel(lb) | Found::ByName(lb) => Some(lb),
        }
    }
}

/// Lookup failures.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// More than one Load Balancer carries the Service's UID label: never guessed.
    #[error(
        "{} Load Balancers carry the label {LABEL_SERVICE_UID}={uid} ({}); a Service owns exactly one — delete or relabel the extra ones",
        ids.len(), ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    NotUnique {
        /// The Service UID.
        uid: String,
        /// The Load Balancers.
        ids: Vec<LoadBalancerId>,
    },
    /// The API failed.
    #[error("{0}")]
    Api(#[from] Error),
}

/// The shared inventory. Cheap to share (`Arc`).
pub struct LbInventory {
    client: Client,
    max_age: Duration,
    state: Mutex<Snapshot>,
    listing: tokio::sync::Mutex<()>,
}

impl LbInventory {
    /// An empty inventory reading through `client`; lists older than `max_age` are re-read.
    pub fn new(client: Client, max_age: Duration) -> LbInventory {
        LbInventory { client, max_age, state: Mutex::default(), listing: tokio::sync::Mutex::new(()) }
    }

    fn lock(&self) -> MutexGuard<'_, Snapshot> {
        // Every update replaces whole entries; a poisoned snapshot is still consistent.
        self.state.lock_unpoisoned()
    }

    fn fresh(&self) -> bool {
        self.lock().listed_at.is_some_and(|t| t.elapsed() < self.max_age)
    }

    /// Reads the list if it is missing or older than the max age (one list at a time; callers
    /// arriving meanwhile use its result).
    async fn ensure_listed(&self) -> Result<(), Error> {
        if self.fresh() {
            return Ok(());
        }
        let _one = self.listing.lock().await;
        if self.fresh() {
            return Ok(());
        }
        self.list().await
    }

    /// Reads the list if it is older than the max age (as a lookup would).
    pub async fn refresh(&self) -> Result<(), Error> {
        self.ensure_listed().await
    }

    /// The Load Balancer `id` as held, without any request (even if marked stale).
    pub fn cached(&self, id: LoadBalancerId) -> Option<Arc<LoadBalancer>> {
        self.lock().entries.get(&id).map(|e| e.lb.clone())
    }

    /// Reads the list again now (e.g. after a create met `uniqueness_error`).
    pub async fn relist(&self) -> Result<(), Error> {
        let _one = self.listing.lock().await;
        self.list().await
    }

    async fn list(&self) -> Result<(), Error> {
        let started = Instant::now();
        let listed = self.client.load_balancers().list_all(&LoadBalancerListParams::default()).await?;
        let mut s = self.lock();
        let mut entries = BTreeMap::new();
        for lb in listed {
            let id = lb.id;
            if s.removed.get(&id).is_some_and(|at| *at >= started) {
                continue;
            }
            match s.entries.get(&id) {
                // Changed by us while the list was being read: ours is newer.
                Some(e) if e.touched >= started => entries.insert(id, e.clone()),
                _ => entries.insert(id, Entry { lb: Arc::new(lb), stale: false, touched: started }),
            };
        }
        for (id, e) in &s.entries {
            if e.touched >= started && !entries.contains_key(id) {
                entries.insert(*id, e.clone());
            }
        }
        s.entries = entries;
        s.removed.retain(|_, at| *at >= started);
        s.listed_at = Some(started);
        debug!(load_balancers = s.entries.len(), "listed the project's Load Balancers");
        Ok(())
    }

    /// The Load Balancer of the Service with `uid`: by its UID label, else (if `name` is
    /// given) by name. Stale entries are read again first.
    pub async fn find(&self, uid: &str, name: Option<&str>) -> Result<Found, LookupError> {
        self.ensure_listed().await?;
        let uncertain = self.lock().uncertain.contains(uid);
        if uncertain {
            let labels = [(LABEL_SERVICE_UID.to_owned(), uid.to_owned())].into_iter().collect();
            let found = self.client.load_balancers().list_by_labels(&labels).await?;
            let mut s = self.lock();
            // Still uncertain while nothing is found: the next lookup asks again, until a
            // create succeeds ([`LbInventory::insert_created`]).
            if !found.is_empty() {
                s.uncertain.remove(uid);
            }
            for lb in found {
                let id = lb.id;
                s.entries.insert(id, Entry { lb: Arc::new(lb), stale: false, touched: Instant::now() });
            }
        }
        let (by_label, by_name) = {
            let s = self.lock();
            let by_label: Vec<LoadBalancerId> = s
                .entries
                .iter()
                .filter(|(_, e)| e.lb.labels.get(LABEL_SERVICE_UID).map(String::as_str) == Some(uid))
                .map(|(id, _)| *id)
                .collect();
            let by_name = name.and_then(|n| s.entries.iter().find(|(_, e)| e.lb.name == n).map(|(id, _)| *id));
            (by_label, by_name)
        };
        match by_label.as_slice() {
            [] => {}
            [id] => {
                if let Some(lb) = self.current(*id).await? {
                    return Ok(Found::ByLabel(lb));
                }
            }
            _ => return Err(LookupError::NotUnique { uid: uid.to_owned(), ids: by_label }),
        }
        if let Some(id) = by_name
            && let Some(lb) = self.current(id).await?
        {
            return Ok(Found::ByName(lb));
        }
        Ok(Found::None)
    }

    /// The Load Balancer with the Service-UID label only (no name fallback).
    pub async fn find_by_label(&self, uid: &str) -> Result<Option<Arc<LoadBalancer>>, LookupError> {
        match self.find(uid, None).await? {
            Found::ByLabel(lb) => Ok(Some(lb)),
            _ => Ok(None),
        }
    }

    /// Every Load Balancer of the list for which `pred` holds (stale ones read again first,
    /// gone ones left out).
    pub async fn matching(&self, pred: impl Fn(&LoadBalancer) -> bool) -> Result<Vec<Arc<LoadBalancer>>, Error> {
        self.ensure_listed().await?;
        let ids: Vec<LoadBalancerId> =
            self.lock().entries.iter().filter(|(_, e)| pred(&e.lb)).map(|(id, _)| *id).collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(lb) = self.current(id).await?.filter(|lb| pred(lb)) {
                out.push(lb);
            }
        }
        Ok(out)
    }

    /// The Load Balancer `id`, read again if stale; `None` if it is gone.
    pub async fn get(&self, id: LoadBalancerId) -> Result<Option<Arc<LoadBalancer>>, Error> {
        self.current(id).await
    }

    /// The entry, read again if stale; `None` if it is gone.
    async fn current(&self, id: LoadBalancerId) -> Result<Option<Arc<LoadBalancer>>, Error> {
        let cached = self.lock().entries.get(&id).cloned();
        match cached {
            Some(e) if !e.stale => Ok(Some(e.lb)),
            _ => self.reload(id).await,
        }
    }

    /// Reads one Load Balancer again (`None` and removed if it is gone).
    pub async fn reload(&self, id: LoadBalancerId) -> Result<Option<Arc<LoadBalancer>>, Error> {
        match self.client.load_balancers().get(id).await {
            Ok(lb) => Ok(Some(self.insert(lb))),
            Err(e) if e.is_not_found() => {
                self.remove(id);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Records a Load Balancer (created or read by us).
    pub fn insert(&self, lb: LoadBalancer) -> Arc<LoadBalancer> {
        let lb = Arc::new(lb);
        self.lock().entries.insert(lb.id, Entry { lb: lb.clone(), stale: false, touched: Instant::now() });
        lb
    }

    /// Records a Load Balancer this process created for the Service `uid`.
    pub fn insert_created(&self, uid: &str, lb: LoadBalancer) -> Arc<LoadBalancer> {
        self.lock().uncertain.remove(uid);
        self.insert(lb)
    }

    /// Applies an accepted change to the entry; returns the new state.
    pub fn modify(&self, id: LoadBalancerId, f: impl FnOnce(&mut LoadBalancer)) -> Option<Arc<LoadBalancer>> {
        let mut s = self.lock();
        let e = s.entries.get_mut(&id)?;
        let mut lb = (*e.lb).clone();
        f(&mut lb);
        e.lb = Arc::new(lb);
        e.touched = Instant::now();
        Some(e.lb.clone())
    }

    /// Marks an entry to be read again before its next use.
    pub fn mark_stale(&self, id: LoadBalancerId) {
        if let Some(e) = self.lock().entries.get_mut(&id) {
            e.stale = true;
            e.touched = Instant::now();
        }
    }

    /// Forgets a deleted Load Balancer.
    pub fn remove(&self, id: LoadBalancerId) {
        let mut s = self.lock();
        s.entries.remove(&id);
        s.removed.insert(id, Instant::now());
    }

    /// Notes that a create for `uid` may have happened unseen: the next lookup asks the API.
    pub fn mark_uncertain(&self, uid: &str) {
        self.lock().uncertain.insert(uid.to_owned());
    }

    /// How many Load Balancers the inventory holds (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Forgets the uncertain mark of `uid` (its Service is gone: nothing will be created for it).
    pub fn forget_uncertain(&self, uid: &str) {
        self.lock().uncertain.remove(uid);
    }

    /// Whether the inventory holds the Load Balancer `id`.
    pub fn contains(&self, id: LoadBalancerId) -> bool {
        self.lock().entries.contains_key(&id)
    }

    /// How many Service UIDs are marked uncertain (for tests and metrics).
    pub fn uncertain_len(&self) -> usize {
        self.lock().uncertain.len()
    }

    /// Whether the inventory holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
