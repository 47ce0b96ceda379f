//! The shared server inventory: every server lookup of every controller goes through here, so
//! the number of Hetzner API requests stays small.
//!
//! Modes (`HCLOUD_SERVER_CACHE_MODE`, same names as the official CCM):
//! - `all` (default): one paginated `GET /servers` (a *snapshot*) serves every lookup while it
//!   is younger than the caller's max age. Rules, in order:
//!   1. a cached entry younger than the max age answers;
//!   2. a snapshot younger than the max age that lacks the server answers "absent" without a
//!      request — so a missing server cannot cause a re-list storm;
//!   3. an unknown server (new, or cold cache) triggers a snapshot refresh; concurrent
//!      refreshes are coalesced into one list (single flight);
//!   4. a known server whose entry went stale is refreshed alone (`GET /servers/{id}` or
//!      `?name=`), which is cheaper than a list for the odd node the lifecycle checks —
//!      unless a list is under way (its answer is as current: wait for it).
//!
//!   Bulk callers (the periodic address refresh, a burst of initializations) announce
//!   themselves with [`Inventory::prefetch`]; if enough of their servers are stale for a list
//!   to be cheaper than one request each, the snapshot is refreshed up front. The announced
//!   servers are *pinned*: the next lookup of each is answered from that bulk fetch (once),
//!   as long as the answer is within the lookup's max age — so a burst of node
//!   initializations paced by the Kubernetes client's rate limit costs one list per max age,
//!   not one request per node. When a pin has aged past its lookup's max age (the burst
//!   outlasted it), that lookup and the others whose pins aged alike are announced again, so
//!   the burst's next stretch is one list too, not one request per node until the next
//!   announcement.
//!
//!   The address refresh and node initialization ask for *addresses* ([`Inventory::prefetch_addresses`],
//!   [`Inventory::get_addresses`]): for them a list older than their max age is first
//!   *confirmed* with one look at the newest server and Primary IP actions (two requests, see
//!   [`crate::changes`]); only when something happened since the look taken before the list,
//!   or at the safety resync, is every server listed again. Lifecycle checks and every other
//!   caller never take a confirmed answer: status (a shutdown from inside a server) changes
//!   without an action.
//!
//!   Callers that need current answers for a few servers (nodes that just turned NotReady)
//!   use [`Inventory::recheck`]: each is fetched now (one request each, or one list when that
//!   is cheaper) and pinned for the next lookup.
//! - `one`: every lookup is answered per server (`GET /servers/{id}` or `?name=`), cached per
//!   server for the max age.
//! - `off`: every lookup is a request.
//!
//! In every mode, a transient API failure (5xx, 429, timeout, broken connection) starts a
//! cooldown (1 s, doubling per consecutive failure, at most 30 s) during which lookups fail
//! fast without a request: an outage or an exhausted rate limit is not made worse by every
//! controller retrying on its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use hcloud_api::models::{NetworkId, Server, ServerId, ServerListParams};
use hcloud_api::{Client, Error, LIST_ALL_PER_PAGE};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::changes::Mark;
use crate::config::CacheMode;
pub use crate::metrics::InventoryStats;

mod addresses;
mod cooldown;

use cooldown::Cooldown;

/// How to find a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// By id (from the node's providerID).
    Id(ServerId),
    /// By name (the node's name, when it has no providerID).
    Name(String),
}

/// Every server the inventory knows, as of one list.
#[derive(Debug, Clone)]
pub struct AllServers {
    /// Every server of the project, as the list returned them.
    pub servers: Vec<Arc<Server>>,
    /// When the list was taken.
    pub as_of: Instant,
    /// True if this call listed (a request), false if a snapshot answered.
    pub listed: bool,
}

struct Entry {
    server: Arc<Server>,
    fetched: Instant,
}

/// What a lookup needs its answer for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Everything current, status included: a list or request younger than the max age.
    Current,
    /// Addresses, type, region and zone: a list confirmed by the action lists within the max
    /// age will do (see [`crate::changes`]).
    Addresses,
}

/// The action lists as seen right before a server list: what later looks compare with.
#[derive(Debug, Clone, Copy)]
struct Baseline {
    mark: Mark,
    /// When the look started: entries fetched after it are covered by its confirmations.
    at: Instant,
}

/// A prefetched answer waiting for its lookup.
struct Pin {
    server: Option<Arc<Server>>,
    source: Source,
    /// What it may answer: a pin for addresses never answers a lookup needing current data.
    need: Need,
    at: Instant,
    /// When its lookup was first announced: a burst is announced again (see
    /// [`Inventory::reannounce_stale_pins`]) only within [`PIN_TTL`] of that, so pins of
    /// lookups that never come do not renew themselves forever.
    announced: Instant,
}

#[derive(Default)]
struct State {
    /// Answers prefetched for announced lookups, consumed by the next lookup of each.
    pinned: HashMap<Lookup, Pin>,
    snapshot: Option<Instant>,
    snapshot_pages: u32,
    generation: u64,
    servers: HashMap<ServerId, Entry>,
    names: HashMap<String, ServerId>,
    /// The action lists as seen right before the list that set it (large projects only).
    baseline: Option<Baseline>,
    /// When a look last found the action lists as at the baseline (its start).
    confirmed: Option<Instant>,
    /// Confirmations so far (lets coalesced address refreshes see one happened).
    confirmations: u64,
}

impl State {
    fn find(&self, lookup: &Lookup) -> Option<&Entry> {
        let id = match lookup {
            Lookup::Id(id) => *id,
            Lookup::Name(name) => *self.names.get(name)?,
        };
        self.servers.get(&id)
    }

    fn insert(&mut self, server: Server, fetched: Instant) -> Arc<Server> {
        let server = Arc::new(server);
        if let Some(old) = self.servers.get(&server.id)
            && old.server.name != server.name
        {
            self.names.remove(&old.server.name);
        }
        self.names.insert(server.name.clone(), server.id);
        self.servers.insert(server.id, Entry { server: server.clone(), fetched });
        server
    }

    fn remove(&mut self, lookup: &Lookup) {
        let id = match lookup {
            Lookup::Id(id) => Some(*id),
            Lookup::Name(name) => self.names.remove(name),
        };
        if let Some(id) = id
            && let Some(e) = self.servers.remove(&id)
        {
            self.names.remove(&e.server.name);
        }
    }

    /// As of when the entry's data holds for `need`: when it was fetched, or for addresses
    /// when a look last confirmed it (if it was fetched after the baseline's look).
    fn as_of(&self, e: &Entry, need: Need) -> Instant {
        match (need, self.baseline, self.confirmed) {
            (Need::Addresses, Some(b), Some(c)) if e.fetched >= b.at => c.max(e.fetched),
            _ => e.fetched,
        }
    }

    /// Whether the entry's data holds for `need` within `max_age`.
    fn fresh(&self, e: &Entry, need: Need, max_age: Duration) -> bool {
        self.as_of(e, need).elapsed() <= max_age
    }

    fn snapshot_fresh(&self, max_age: Duration) -> bool {
        self.snapshot.is_some_and(|t| t.elapsed() <= max_age)
    }

    /// Evicts per-server entries older than an hour (mode `one`).
    fn evict_older_than(&mut self, age: Duration) {
        let stale: Vec<ServerId> =
            self.servers.iter().filter(|(_, e)| e.fetched.elapsed() > age).map(|(id, _)| *id).collect();
        for id in stale {
            if let Some(e) = self.servers.remove(&id) {
                self.names.remove(&e.server.name);
            }
        }
    }
}

/// Longest a prefetched answer is kept for its lookup (each lookup also applies its own max
/// age, usually far shorter).
pub const PIN_TTL: Duration = Duration::from_secs(180);

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Cached data, a pin, or a list.
    Cached,
    /// A single-server request made for this lookup.
    Direct,
}

/// The shared server inventory.
pub struct Inventory {
    client: Client,
    mode: CacheMode,
    cooldown: Cooldown,
    state: Mutex<State>,
    refresh: tokio::sync::Mutex<()>,
    stats: InventoryStats,
    /// The configured network (`HCLOUD_NETWORK`): its deletion changes addresses without an
    /// action, so looks read it too (see [`crate::changes`]).
    network: Option<NetworkId>,
    /// `HCLOUD_SERVER_CACHE_CHANGE_DETECTION`: false lists every server on every address
    /// refresh, whatever the project's size.
    change_detection: bool,
}

impl Inventory {
    /// An empty inventory.
    pub fn new(client: Client, mode: CacheMode) -> Inventory {
        Self::with_stats(client, mode, InventoryStats::default())
    }

    /// An empty inventory counting into `stats`.
    pub fn with_stats(client: Client, mode: CacheMode, stats: InventoryStats) -> Inventory {
        Inventory {
            client,
            mode,
            cooldown: Cooldown::default(),
            state: Mutex::new(State::default()),
            refresh: tokio::sync::Mutex::new(()),
            stats,
            network: None,
            change_detection: true,
        }
    }

    /// The cache mode.
    pub fn mode(&self) -> CacheMode {
        self.mode
    }

    /// What the inventory did so far.
    pub fn stats(&self) -> &InventoryStats {
        &self.stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every mutation is a complete map update; a panic cannot leave a half-written state.
        self.state.lock_unpoisoned()
    }

    /// The server, or `None` if it does not exist, as of data at most `max_age` old (possibly
    /// pinned for this lookup by [`Inventory::prefetch`] or [`Inventory::recheck`]).
    pub async fn get(&self, lookup: &Lookup, max_age: Duration) -> Result<Option<Arc<Server>>, Error> {
        Ok(self.answer(lookup, max_age, Need::Current).await?.0)
    }

    /// [`Inventory::get`] for the server's addresses, type, region and zone only: a list
    /// confirmed by the action lists within `max_age` answers too (see [`crate::changes`]);
    /// its status may be older. Pinned by [`Inventory::prefetch_addresses`].
    pub async fn get_addresses(&self, lookup: &Lookup, max_age: Duration) -> Result<Option<Arc<Server>>, Error> {
        Ok(self.answer(lookup, max_age, Need::Addresses).await?.0)
    }

    /// Whether the server exists. `false` only on a direct lookup's answer: an absence seen
    /// in cached data or a list is confirmed with `GET /servers/{id}` (or `?name=`) first, so
    /// nothing destructive ever happens on stale data.
    pub async fn exists(&self, lookup: &Lookup, max_age: Duration) -> Result<bool, Error> {
        match self.answer(lookup, max_age, Need::Current).await? {
            (Some(_), _) => Ok(true),
            (None, Source::Direct) => Ok(false),
            (None, Source::Cached) => Ok(self.fetch_single_and_store(lookup).await?.is_some()),
        }
    }

    /// The server from a single-server request now (`GET /servers/{id}` or `?name=`), never
    /// from cached data; the answer is stored. `None` only on the API's `not_found`.
    pub async fn fetch(&self, lookup: &Lookup) -> Result<Option<Arc<Server>>, Error> {
        self.stats.misses.inc();
        self.fetch_single_and_store(lookup).await
    }

    /// The answer and whether it came from a direct single-server lookup just now.
    async fn answer(
        &self,
        lookup: &Lookup,
        max_age: Duration,
        need: Need,
    ) -> Result<(Option<Arc<Server>>, Source), Error> {
        if let Some(pin) = self.take_pin(lookup, need)
            && pin.at.elapsed() <= max_age.min(PIN_TTL)
        {
            self.stats.hits.inc();
            return Ok((pin.server, pin.source));
        }
        // Stale data while a burst's pins aged out alike (a burst of initializations outlasting
        // the max age): refresh them as a bulk again, as the announcement would have, instead
        // of one request each until the next announcement.
        if self.reannounce_stale_pins(lookup, max_age, need).await
            && let Some(pin) = self.take_pin(lookup, need)
            && pin.at.elapsed() <= max_age.min(PIN_TTL)
        {
            self.stats.hits.inc();
            return Ok((pin.server, pin.source));
        }
        match self.mode {
            CacheMode::Off => {
                self.stats.misses.inc();
                Ok((self.single(lookup).await?.map(Arc::new), Source::Direct))
            }
            CacheMode::One => {
                if let Some(e) = self.lock().find(lookup).filter(|e| e.fetched.elapsed() <= max_age) {
                    self.stats.hits.inc();
                    return Ok((Some(e.server.clone()), Source::Cached));
                }
                self.stats.misses.inc();
                Ok((self.fetch_single_and_store(lookup).await?, Source::Direct))
            }
            CacheMode::All => self.get_all_mode(lookup, max_age, need).await,
        }
    }

    /// The lookup's pin, taken, if it may answer `need`.
    fn take_pin(&self, lookup: &Lookup, need: Need) -> Option<Pin> {
        let mut s = self.lock();
        let usable = s.pinned.get(lookup).is_some_and(|p| p.need == Need::Current || need == Need::Addresses);
        if usable { s.pinned.remove(lookup) } else { None }
    }

    async fn get_all_mode(
        &self,
        lookup: &Lookup,
        max_age: Duration,
        need: Need,
    ) -> Result<(Option<Arc<Server>>, Source), Error> {
        let (known, generation) = {
            let s = self.lock();
            let entry = s.find(lookup);
            if let Some(e) = entry.filter(|e| s.fresh(e, need, max_age)) {
                self.stats.hits.inc();
                return Ok((Some(e.server.clone()), Source::Cached));
            }
            if entry.is_none() && s.snapshot_fresh(max_age) {
                self.stats.hits.inc();
                return Ok((None, Source::Cached));
            }
            (entry.is_some(), s.generation)
        };
        self.stats.misses.inc();
        if known {
            if self.refresh.try_lock().is_err() {
                // A list is under way: its answer is as current as a single request's.
                self.refresh_snapshot(generation).await?;
                return Ok((self.lock().find(lookup).map(|e| e.server.clone()), Source::Cached));
            }
            return Ok((self.fetch_single_and_store(lookup).await?, Source::Direct));
        }
        self.refresh_snapshot(generation).await?;
        // Answer from the snapshot just taken (or the one a concurrent refresh took).
        Ok((self.lock().find(lookup).map(|e| e.server.clone()), Source::Cached))
    }

    /// Every server, from a list at most `max_age` old: the current snapshot if it is young
    /// enough, else one paginated list (shared with concurrent refreshes), in every mode —
    /// questions like "which server holds this private IP" have no per-server request.
    pub async fn all(&self, max_age: Duration) -> Result<AllServers, Error> {
        let generation = {
            let s = self.lock();
            if let Some(as_of) = s.snapshot.filter(|_| s.snapshot_fresh(max_age)) {
                let servers = s.servers.values().map(|e| e.server.clone()).collect();
                return Ok(AllServers { servers, as_of, listed: false });
            }
            s.generation
        };
        self.refresh_snapshot(generation).await?;
        let s = self.lock();
        let servers = s.servers.values().map(|e| e.server.clone()).collect();
        Ok(AllServers { servers, as_of: s.snapshot.unwrap_or_else(Instant::now), listed: true })
    }

    /// Announces lookups of all `lookups` within `max_age`. In mode `all`, refreshes the
    /// snapshot now if that is cheaper than refreshing the stale ones one by one, and pins
    /// the answers so the announced lookups are served from it.
    pub async fn prefetch(&self, lookups: &[Lookup], max_age: Duration) {
        self.prefetch_announced(lookups, max_age, Instant::now(), Need::Current).await;
    }

    /// [`Inventory::prefetch`] for lookups through [`Inventory::get_addresses`] (the address
    /// refresh, initialization): in a large project, a stale list is first confirmed with a
    /// look at the action lists, and listed again only when they changed (see
    /// [`crate::changes`]).
    pub async fn prefetch_addresses(&self, lookups: &[Lookup], max_age: Duration) {
        self.prefetch_announced(lookups, max_age, Instant::now(), Need::Addresses).await;
    }

    /// [`Inventory::prefetch`] of lookups first announced at `announced`.
    async fn prefetch_announced(&self, lookups: &[Lookup], max_age: Duration, announced: Instant, need: Need) {
        if self.mode != CacheMode::All || lookups.is_empty() {
            return;
        }
        let (stale, pages, seen) = {
            let mut s = self.lock();
            s.pinned.retain(|_, pin| pin.at.elapsed() <= max_age.min(PIN_TTL));
            let fresh = s.snapshot_fresh(max_age);
            let stale = lookups
                .iter()
                .filter(|l| !s.pinned.get(*l).is_some_and(|p| p.need == Need::Current || need == Need::Addresses))
                .filter(|l| s.find(l).is_none_or(|e| !s.fresh(e, need, max_age)))
                .filter(|l| !(fresh && s.find(l).is_none()))
                .count();
            // A look at the action lists (with a baseline to compare with) is cheaper still.
            let cost = match (need, s.baseline) {
                (Need::Addresses, Some(_)) => (crate::changes::look_requests(self.network.is_some()) as usize)
                    .min(s.snapshot_pages.max(1) as usize),
                _ => s.snapshot_pages.max(1) as usize,
            };
            (stale, cost, (s.generation, s.confirmations))
        };
        if stale > 0 && stale >= pages {
            debug!(stale, pages, ?need, "prefetch: refreshing the server snapshot");
            let refreshed = match need {
                Need::Current => self.refresh_snapshot(seen.0).await,
                Need::Addresses => self.refresh_for_addresses(seen, lookups.len()).await,
            };
            if let Err(e) = refreshed {
                warn!(error = %e, "prefetch of the server list failed; lookups will retry");
                return;
            }
        }
        let mut s = self.lock();
        let pins: Vec<(Lookup, Arc<Server>, Instant)> = lookups
            .iter()
            .filter(|l| !s.pinned.contains_key(*l))
            .filter_map(|l| {
                s.find(l).filter(|e| s.fresh(e, need, max_age)).map(|e| (l.clone(), e.server.clone(), s.as_of(e, need)))
            })
            .collect();
        for (lookup, server, at) in pins {
            s.pinned.insert(lookup, Pin { server: Some(server), source: Source::Cached, need, at, announced });
        }
    }

    /// When `lookup` has no answer within `max_age` and other pins aged past `max_age` (their
    /// lookups announced within [`PIN_TTL`]): announces them all again (see
    /// [`Inventory::prefetch`]): one list when they are at least as many as its pages, else
    /// nothing (each is then looked up alone). True if it announced.
    async fn reannounce_stale_pins(&self, lookup: &Lookup, max_age: Duration, need: Need) -> bool {
        if self.mode != CacheMode::All {
            return false;
        }
        let (mut stale, announced) = {
            let s = self.lock();
            if s.find(lookup).is_some_and(|e| s.fresh(e, need, max_age)) {
                return false;
            }
            let stale: Vec<(&Lookup, Instant)> = s
                .pinned
                .iter()
                .filter(|(_, pin)| pin.need == need)
                .filter(|(_, pin)| pin.at.elapsed() > max_age && pin.announced.elapsed() <= PIN_TTL)
                .map(|(l, pin)| (l, pin.announced))
                .collect();
            let Some(announced) = stale.iter().map(|(_, at)| *at).min() else { return false };
            (stale.into_iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(), announced)
        };
        stale.push(lookup.clone());
        self.prefetch_announced(&stale, max_age, announced, need).await;
        true
    }

    /// Fetches the servers of `lookups` now and pins the answers for their next lookup:
    /// one request each, or (mode `all`) one list when that is cheaper. A server found absent
    /// by a single-server request is pinned as confirmed absent; one missing from a list is
    /// not pinned (a paginated list can miss an item while the set changes), so its next
    /// existence check confirms it with a direct lookup.
    pub async fn recheck(&self, lookups: &[Lookup]) {
        if lookups.is_empty() {
            return;
        }
        let (pages, generation) = {
            let s = self.lock();
            (s.snapshot_pages.max(1) as usize, s.generation)
        };
        if self.mode == CacheMode::All && lookups.len() >= pages {
            debug!(servers = lookups.len(), pages, "recheck: refreshing the server snapshot");
            if let Err(e) = self.refresh_snapshot(generation).await {
                warn!(error = %e, "recheck of the server list failed; lookups will retry");
                return;
            }
            let mut s = self.lock();
            let pins: Vec<(Lookup, Arc<Server>, Instant)> =
                lookups.iter().filter_map(|l| s.find(l).map(|e| (l.clone(), e.server.clone(), e.fetched))).collect();
            for (lookup, server, at) in pins {
                s.pinned.insert(
                    lookup,
                    Pin { server: Some(server), source: Source::Cached, need: Need::Current, at, announced: at },
                );
            }
            return;
        }
        for lookup in lookups {
            let at = Instant::now();
            match self.fetch_single_and_store(lookup).await {
                Ok(server) => {
                    self.lock().pinned.insert(
                        lookup.clone(),
                        Pin { server, source: Source::Direct, need: Need::Current, at, announced: at },
                    );
                }
                Err(e) => {
                    warn!(?lookup, error = %e, "recheck failed; the next lookup will retry");
                    return;
                }
            }
        }
    }

    /// Fails fast while a cooldown after transient failures runs.
    fn gate(&self, request: &str) -> Result<(), Error> {
        self.cooldown.gate(request)
    }

    /// Starts or ends the cooldown after an answer.
    fn record<T>(&self, result: &Result<T, Error>) {
        if self.cooldown.record(result) {
            self.stats.cooldowns.inc();
        }
    }

    async fn refresh_snapshot(&self, seen_generation: u64) -> Result<(), Error> {
        let _guard = self.refresh.lock().await;
        if self.lock().generation != seen_generation {
            // Someone refreshed while we waited: use theirs.
            return Ok(());
        }
        self.list_servers(None).await
    }

    /// Lists every server into the snapshot (the caller holds the refresh lock). With
    /// `baseline` (`Some(None)`: none) it replaces the baseline and its confirmations; a list
    /// without one keeps them (it was taken after the baseline's look).
    async fn list_servers(&self, baseline: Option<Option<Baseline>>) -> Result<(), Error> {
        self.gate("GET /servers")?;
        let started = Instant::now();
        let result = self.client.servers().list_all(&ServerListParams::default()).await;
        self.record(&result);
        let servers = result?;
        self.stats.lists.inc();
        let mut s = self.lock();
        s.servers.clear();
        s.names.clear();
        s.snapshot_pages = (servers.len() as u32).div_ceil(LIST_ALL_PER_PAGE).max(1);
        for server in servers {
            s.insert(server, started);
        }
        s.snapshot = Some(started);
        s.generation += 1;
        if let Some(baseline) = baseline {
            s.baseline = baseline;
            s.confirmed = None;
        }
        debug!(servers = s.servers.len(), pages = s.snapshot_pages, "server snapshot refreshed");
        Ok(())
    }

    async fn single(&self, lookup: &Lookup) -> Result<Option<Server>, Error> {
        self.gate(match lookup {
            Lookup::Id(_) => "GET /servers/{id}",
            Lookup::Name(_) => "GET /servers?name=",
        })?;
        self.stats.singles.inc();
        let result = match lookup {
            Lookup::Id(id) => self.client.servers().find(*id).await,
            Lookup::Name(name) => self.client.servers().get_by_name(name).await,
        };
        self.record(&result);
        result
    }

    async fn fetch_single_and_store(&self, lookup: &Lookup) -> Result<Option<Arc<Server>>, Error> {
        let fetched = Instant::now();
        let result = self.single(lookup).await?;
        let mut s = self.lock();
        if self.mode == CacheMode::One {
            s.evict_older_than(Duration::from_secs(3600));
        }
        Ok(match result {
            Some(server) => Some(s.insert(server, fetched)),
            None => {
                s.remove(lookup);
                None
            }
        })
    }
}
