//! Change detection for the shared server inventory: whether the last server list still
//! holds every Node's addresses and labels, seen in two or three requests instead of a list
//! of every server. Pure decisions; [`crate::inventory`] sends the requests.
//!
//! Hetzner records every change to what a Node is made of as an action: `create_server`,
//! `delete_server`, `attach_to_network`/`detach_from_network` (InternalIP), `change_type`
//! (instance type), `assign_primary_ip`/`unassign_primary_ip` (ExternalIP; on both
//! `GET /servers/actions` and `GET /primary_ips/actions`), and power, rebuild and the rest.
//! So the newest action of each list, looked at right before a server list (the *baseline*),
//! says later whether anything happened since: if neither newest action changed and none was
//! running then, the list is as current as a new one for addresses, types, regions and zones.
//!
//! One change to an address has no action: `DELETE /networks/{id}` detaches every server
//! attached to the network and answers `204` without an action ("Attached resources will be
//! detached automatically", Hetzner's API description). Only the configured network
//! (`HCLOUD_NETWORK`) gives Nodes an address, so when one is configured each look also reads
//! it (`GET /networks/{id}`, one more request): its attached servers, or `404` once it is
//! gone ([`NetworkMark`]); a look that finds them other than at the baseline lists every
//! server. The route controller reads the same network for its routes (on every reconcile
//! and at its 4-minute resync); those reads are reported to the inventory too
//! ([`network_changed`]), so a deletion they see is listed at the next refresh without
//! waiting for a look. The look still reads the network itself: a route read may come just
//! before the deletion, and only a read at the refresh bounds the delay by one refresh.
//!
//! Changes without an action, and why a confirmed list is still right for them:
//! - a shutdown from inside the server (status `off`): no address or label depends on the
//!   status; the lifecycle checks never take a confirmed answer (they ask for current data,
//!   and a Node whose server shut down turns NotReady, which makes them ask the API);
//! - label edits through `PUT /servers/{id}`: a server's labels are not copied to its Node;
//! - a rename through `PUT /servers/{id}`: the Node's `Hostname` address follows the server's
//!   name. This is the one address that can go stale: it shows at the next safety resync (a
//!   real list, [`resync_after`]: 2 hours at 5,000 servers) instead of within 5 minutes. No
//!   cheap request shows a rename: `PUT` records no action, the server has no update time,
//!   and `GET /servers` filters by `name`, `label_selector` and `status` and sorts by `id`,
//!   `name` and `created` only, so finding which server was renamed takes every page (100 at
//!   5,000 servers: 1,200 requests an hour at a 5-minute refresh) or a request per server.
//!   hcloud-ccm does not pay that by default (`HCLOUD_SERVER_CACHE_CHANGE_DETECTION=false`
//!   does: every refresh lists, as the official CCM); after a rename an operator can
//!   restart it (it lists at start) or make any server action (a reboot, a protection change):
//!   the next look sees the action and lists. A lookup by the new name (a Node without
//!   providerID) does not find it in a confirmed list and lists again, as today.
//!
//! Primary IPs cannot be deleted while assigned (`must_be_unassigned` since 1 May 2026), so a
//! public address cannot change without `unassign_primary_ip`.

use std::time::Duration;

use std::hash::{DefaultHasher, Hash as _, Hasher as _};

use hcloud_api::models::{Action, ActionId, ActionStatus, ServerId};

/// What one action list showed: its newest action, and whether any action was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListMark {
    /// The newest action's id, `None` when the list is empty.
    pub newest: Option<ActionId>,
    /// Whether an action was seen running (the newest, or any when asked for).
    pub running: bool,
}

impl ListMark {
    /// From the newest action, and (before a list) the newest running one.
    pub fn from_actions(newest: Option<&Action>, running: Option<&Action>) -> ListMark {
        ListMark {
            newest: newest.map(|a| a.id),
            running: newest.is_some_and(|a| a.status == ActionStatus::Running) || running.is_some(),
        }
    }
}

/// What the configured network showed (`GET /networks/{id}`): which servers are attached, or
/// that it is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMark {
    /// The network answered `404`: deleted, every server detached.
    Gone,
    /// The network exists with these servers attached.
    Attached {
        /// How many.
        servers: usize,
        /// A digest of their sorted ids (the ids themselves would make a mark as large as a
        /// page of servers; equal sets always give equal digests).
        digest: u64,
    },
}

impl NetworkMark {
    /// The mark of a network with `servers` attached, in any order.
    pub fn attached(servers: &[ServerId]) -> NetworkMark {
        let mut ids: Vec<i64> = servers.iter().map(|s| s.0).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut h = DefaultHasher::new();
        ids.hash(&mut h);
        NetworkMark::Attached { servers: ids.len(), digest: h.finish() }
    }
}

/// What the server and Primary IP action lists (and the configured network) showed at one
/// moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    /// `GET /servers/actions`.
    pub servers: ListMark,
    /// `GET /primary_ips/actions`.
    pub primary_ips: ListMark,
    /// `GET /networks/{id}` of the configured network; `None` without one.
    pub network: Option<NetworkMark>,
}

impl Mark {
    fn running(&self) -> bool {
        self.servers.running || self.primary_ips.running
    }
}

/// Requests one look at both action lists costs (one more with a network: [`look_requests`]).
pub const LOOK_REQUESTS: u32 = 2;

/// Requests one look costs: both action lists, and the configured network if there is one.
pub fn look_requests(network: bool) -> u32 {
    LOOK_REQUESTS + u32::from(network)
}

/// Pages of the safety resync's server lists per hour: a confirmed list is replaced by a real
/// one after `pages × 72 s` (see [`resync_after`]), so the resyncs cost about 50 requests an
/// hour whatever the number of servers.
pub const RESYNC_PAGES_PER_HOUR: u32 = 50;

/// Below this age a safety resync would come as often as the address refresh itself, and
/// looking first would only add requests: such a project (at most 8 pages, 400 servers)
/// lists on every refresh, as before.
pub const MIN_RESYNC: Duration = Duration::from_secs(600);

/// How long a list of `pages` pages may be confirmed before a real list replaces it:
/// `pages × 3600 s / RESYNC_PAGES_PER_HOUR` (100 pages, 5,000 servers: 2 hours).
pub fn resync_after(pages: u32) -> Duration {
    Duration::from_secs(u64::from(pages) * 3600 / u64::from(RESYNC_PAGES_PER_HOUR))
}

/// What the address refresh does when its list is older than it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// List every server, as before; first look at the action lists (`with_baseline`) so
    /// that later refreshes can confirm that list instead.
    List {
        /// Look at the action lists first (4 requests: newest and newest running of each).
        with_baseline: bool,
    },
    /// Look at the action lists (2 requests); list only if they changed.
    Look,
}

/// The plan for a list of `pages` pages taken `since_list` ago, with the baseline looked at
/// right before it (if any).
pub fn plan(pages: u32, baseline: Option<&Mark>, since_list: Duration) -> Plan {
    let resync = resync_after(pages);
    if resync < MIN_RESYNC || pages <= LOOK_REQUESTS {
        return Plan::List { with_baseline: false };
    }
    match baseline {
        Some(b) if !b.running() && since_list < resync => Plan::Look,
        _ => Plan::List { with_baseline: true },
    }
}

/// Whether the action lists look as they did at the baseline: the same newest actions, and
/// nothing running then or now (an action running at the baseline may have finished after
/// the list was taken, its effect missing from it); and the network, if any, has the same
/// servers attached (or is still gone).
pub fn unchanged(baseline: &Mark, now: &Mark) -> bool {
    !baseline.running()
        && !now.running()
        && baseline.servers.newest == now.servers.newest
        && baseline.primary_ips.newest == now.primary_ips.newest
        && baseline.network == now.network
}

/// Whether a read of the configured network made elsewhere (the route controller's) shows a
/// change since the baseline: then the list is no longer confirmed. Without a baseline, or
/// one taken without the network, there is nothing to compare (the next refresh lists, or
/// looks at the network itself).
pub fn network_changed(baseline: Option<&Mark>, seen: NetworkMark) -> bool {
    baseline.and_then(|b| b.network).is_some_and(|at_baseline| at_baseline != seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(servers: Option<i64>, primary_ips: Option<i64>) -> Mark {
        Mark {
            servers: ListMark { newest: servers.map(ActionId), running: false },
            primary_ips: ListMark { newest: primary_ips.map(ActionId), running: false },
            network: None,
        }
    }

    fn ids(ids: &[i64]) -> Vec<ServerId> {
        ids.iter().copied().map(ServerId).collect()
    }

    fn action(id: i64, status: &str) -> Action {
        serde_json::from_value(serde_json::json!({"id": id, "command": "attach_to_network", "status": status,
            "progress": 0, "started": "2026-11-28T00:00:00Z", "finished": null, "resources": [], "error": null}))
        .expect("action")
    }

    #[test]
    fn the_resync_costs_about_50_pages_an_hour_whatever_the_size() {
        assert_eq!(resync_after(100), Duration::from_secs(7200));
        assert_eq!(resync_after(20), Duration::from_secs(1440));
        assert_eq!(resync_after(9), Duration::from_secs(648));
        for pages in [9, 20, 100, 1000] {
            let per_hour = f64::from(pages) * 3600.0 / resync_after(pages).as_secs_f64();
            assert!((per_hour - 50.0).abs() < 1.0, "{pages}: {per_hour}");
        }
    }

    #[test]
    fn small_projects_list_as_before_without_looking() {
        for pages in [1, 2, 3, 8] {
            assert_eq!(plan(pages, Some(&mark(Some(1), None)), Duration::ZERO), Plan::List { with_baseline: false });
        }
    }

    #[test]
    fn large_projects_look_once_they_have_a_quiet_baseline() {
        assert_eq!(plan(100, None, Duration::ZERO), Plan::List { with_baseline: true });
        let quiet = mark(Some(7), Some(3));
        assert_eq!(plan(100, Some(&quiet), Duration::from_secs(300)), Plan::Look);
        assert_eq!(plan(9, Some(&quiet), Duration::from_secs(300)), Plan::Look);
        // The safety resync.
        assert_eq!(plan(100, Some(&quiet), Duration::from_secs(7200)), Plan::List { with_baseline: true });
        assert_eq!(plan(20, Some(&quiet), Duration::from_secs(1440)), Plan::List { with_baseline: true });
        assert_eq!(plan(20, Some(&quiet), Duration::from_secs(1439)), Plan::Look);
        // An action running at the baseline may have finished after the list: list again.
        let mut busy = quiet;
        busy.primary_ips.running = true;
        assert_eq!(plan(100, Some(&busy), Duration::from_secs(300)), Plan::List { with_baseline: true });
    }

    #[test]
    fn any_new_or_running_action_is_a_change() {
        let base = mark(Some(7), Some(3));
        assert!(unchanged(&base, &mark(Some(7), Some(3))));
        assert!(!unchanged(&base, &mark(Some(8), Some(3))), "a server action");
        assert!(!unchanged(&base, &mark(Some(7), Some(4))), "a Primary IP action");
        // The newest went (pruned): something changed the list; look again by listing.
        assert!(!unchanged(&base, &mark(Some(6), Some(3))));
        assert!(!unchanged(&base, &mark(None, Some(3))));
        assert!(unchanged(&mark(None, None), &mark(None, None)), "no action ever");
        let mut running_now = base;
        running_now.servers.running = true;
        assert!(!unchanged(&base, &running_now));
        assert!(!unchanged(&running_now, &base));
    }

    #[test]
    fn marks_from_actions() {
        let done = action(5, "success");
        let running = action(4, "running");
        assert_eq!(ListMark::from_actions(None, None), ListMark { newest: None, running: false });
        assert_eq!(ListMark::from_actions(Some(&done), None), ListMark { newest: Some(ActionId(5)), running: false });
        assert_eq!(
            ListMark::from_actions(Some(&done), Some(&running)),
            ListMark { newest: Some(ActionId(5)), running: true }
        );
        let newest_running = action(6, "running");
        assert_eq!(
            ListMark::from_actions(Some(&newest_running), None),
            ListMark { newest: Some(ActionId(6)), running: true }
        );
    }

    #[test]
    fn network_marks_are_the_set_of_attached_servers() {
        assert_eq!(NetworkMark::attached(&ids(&[3, 1, 2])), NetworkMark::attached(&ids(&[1, 2, 3, 3])));
        assert_ne!(NetworkMark::attached(&ids(&[1, 2, 3])), NetworkMark::attached(&ids(&[1, 2])));
        assert_ne!(NetworkMark::attached(&ids(&[1, 2, 3])), NetworkMark::attached(&ids(&[1, 2, 4])));
        assert_ne!(NetworkMark::attached(&[]), NetworkMark::Gone, "no server attached is not gone");
        assert!(matches!(NetworkMark::attached(&ids(&[9, 5])), NetworkMark::Attached { servers: 2, .. }));
        assert_eq!(look_requests(false), 2);
        assert_eq!(look_requests(true), 3);
    }

    #[test]
    fn a_deleted_or_changed_network_is_a_change() {
        let attached = NetworkMark::attached(&ids(&[1, 2, 3]));
        let base = Mark { network: Some(attached), ..mark(Some(7), Some(3)) };
        assert!(unchanged(&base, &base), "the same servers attached");
        // Deleted with its servers attached: no action, only the network shows it.
        assert!(!unchanged(&base, &Mark { network: Some(NetworkMark::Gone), ..base }));
        // One server fewer (a detach also has an action; either shows it).
        assert!(!unchanged(&base, &Mark { network: Some(NetworkMark::attached(&ids(&[1, 2]))), ..base }));
        // Gone at the baseline and still gone: nothing to list again for.
        let gone = Mark { network: Some(NetworkMark::Gone), ..base };
        assert!(unchanged(&gone, &gone));
        // A network read elsewhere (the route controller's).
        assert!(!network_changed(Some(&base), attached));
        assert!(network_changed(Some(&base), NetworkMark::Gone));
        assert!(network_changed(Some(&base), NetworkMark::attached(&ids(&[1, 2, 3, 4]))));
        assert!(!network_changed(None, NetworkMark::Gone), "no baseline: the next refresh lists anyway");
        assert!(!network_changed(Some(&mark(Some(7), Some(3))), NetworkMark::Gone), "a baseline without network");
    }
}
