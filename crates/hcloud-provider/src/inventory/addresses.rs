//! The address refresh's server list: confirmed by a look at the action lists where that is
//! cheaper than listing every server again (see [`crate::changes`]).

use hcloud_api::models::{NetworkId, ServerId};
use hcloud_api::{ActionList, Error, LIST_ALL_PER_PAGE};
use tokio::time::Instant;
use tracing::debug;

use super::{Baseline, Inventory};
use crate::changes::{self, ListMark, Mark, NetworkMark, Plan};

impl Inventory {
    /// The inventory whose address refresh confirms its list by looks (`on`, the default) or
    /// lists every server on every refresh (`HCLOUD_SERVER_CACHE_CHANGE_DETECTION=false`).
    pub fn with_change_detection(mut self, on: bool) -> Inventory {
        self.change_detection = on;
        self
    }

    /// The inventory whose looks read `network` too (the configured network, whose private
    /// IPs are the Nodes' InternalIPs).
    pub fn with_network(mut self, network: Option<NetworkId>) -> Inventory {
        self.network = network;
        self
    }

    /// Refreshes the snapshot for addresses unless someone refreshed or confirmed it since
    /// `seen` (generation, confirmations): in a large project (`lookups` hints its size before
    /// the first list) a look at the action lists confirms it when nothing happened since the
    /// baseline; otherwise every server is listed, after a look that becomes the new baseline.
    pub(super) async fn refresh_for_addresses(&self, seen: (u64, u64), lookups: usize) -> Result<(), Error> {
        let _guard = self.refresh.lock().await;
        let (plan, baseline) = {
            let s = self.lock();
            if (s.generation, s.confirmations) != seen {
                return Ok(());
            }
            let hinted = u32::try_from(lookups).unwrap_or(u32::MAX).div_ceil(LIST_ALL_PER_PAGE);
            let pages = s.snapshot_pages.max(hinted).max(1);
            let since_list = s.snapshot.map_or(std::time::Duration::MAX, |t| t.elapsed());
            let plan = if self.change_detection {
                changes::plan(pages, s.baseline.as_ref().map(|b| &b.mark), since_list)
            } else {
                Plan::List { with_baseline: false }
            };
            (plan, s.baseline)
        };
        match (plan, baseline) {
            (Plan::List { with_baseline: false }, _) => self.list_servers(Some(None)).await,
            (Plan::Look, Some(baseline)) => {
                let started = Instant::now();
                match self.look(false).await {
                    Ok(now) if changes::unchanged(&baseline.mark, &now) => {
                        let mut s = self.lock();
                        s.confirmed = Some(started);
                        s.confirmations += 1;
                        debug!(servers = s.servers.len(), "server snapshot confirmed: no action since its list");
                        return Ok(());
                    }
                    Ok(now) => debug!(?now, was = ?baseline.mark, "actions since the server list: listing again"),
                    Err(e) => debug!(error = %e, "looking at the action lists failed: listing again"),
                }
                self.lock().confirmed = None;
                self.list_with_baseline().await
            }
            _ => self.list_with_baseline().await,
        }
    }

    /// Looks at the action lists (the baseline), then lists every server. Without a baseline
    /// (the look failed) the list is taken anyway, and the next refresh lists again.
    async fn list_with_baseline(&self) -> Result<(), Error> {
        let at = Instant::now();
        let baseline = match self.look(true).await {
            Ok(mark) => Some(Baseline { mark, at }),
            Err(e) => {
                debug!(error = %e, "looking at the action lists failed: the list gets no baseline");
                None
            }
        };
        self.list_servers(Some(baseline)).await
    }

    /// A read of `network` made elsewhere (the route controller's `GET /networks/{id}`):
    /// `attached` its servers, `None` when it answered `404`. If it is the configured network
    /// and shows a change since the baseline, the list is no longer confirmed: the next
    /// address refresh lists every server (see [`changes::network_changed`]).
    pub fn network_seen(&self, network: NetworkId, attached: Option<&[ServerId]>) {
        if self.network != Some(network) {
            return;
        }
        let seen = attached.map_or(NetworkMark::Gone, NetworkMark::attached);
        let mut s = self.lock();
        if changes::network_changed(s.baseline.as_ref().map(|b| &b.mark), seen) {
            debug!(%network, ?seen, "the network changed since the server list: the next refresh lists");
            s.baseline = None;
            s.confirmed = None;
        }
    }

    /// The configured network's mark (1 request), `None` without one.
    async fn look_at_network(&self) -> Result<Option<NetworkMark>, Error> {
        let Some(id) = self.network else { return Ok(None) };
        match self.client.networks().get(id).await {
            Ok(network) => Ok(Some(NetworkMark::attached(&network.servers))),
            Err(e) if e.is_not_found() => Ok(Some(NetworkMark::Gone)),
            Err(e) => Err(e),
        }
    }

    /// The newest server and Primary IP actions (2 requests), and with `running_too` whether
    /// any action of each is running (2 more); with a configured network, its attached
    /// servers (1 more).
    async fn look(&self, running_too: bool) -> Result<Mark, Error> {
        self.gate("GET /servers/actions")?;
        let result = async {
            let mut marks = [ListMark::default(); 2];
            for (mark, list) in marks.iter_mut().zip([ActionList::Servers, ActionList::PrimaryIps]) {
                let actions = self.client.actions();
                let newest = actions.newest(list, false).await?;
                let running = match running_too {
                    true => actions.newest(list, true).await?,
                    false => None,
                };
                *mark = ListMark::from_actions(newest.as_ref(), running.as_ref());
            }
            let [servers, primary_ips] = marks;
            let network = self.look_at_network().await?;
            Ok(Mark { servers, primary_ips, network })
        }
        .await;
        self.record(&result);
        result
    }
}
