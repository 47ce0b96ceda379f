//! Change detection for the shared server inventory: whether the last server list still
//! holds every Node's addresses and labels, seen in two requests instead of a list of every
//! server. Pure decisions; [`crate::inventory`] sends the requests.
//!
//! Hetzner records every change to what a Node is made of as an action: `create_server`,
//! `delete_server`, `attach_to_network`/`detach_from_network` (InternalIP), `change_type`
//! (instance type), `assign_primary_ip`/`unassign_primary_ip` (ExternalIP; on both
//! `GET /servers/actions` and `GET /primary_ips/actions`), and power, rebuild and the rest.
//! So the newest action of each list, looked at right before a server list (the *baseline*),
//! says later whether anything happened since: if neither newest action changed and none was
//! running then, the list is as current as a new one for addresses, types, regions and zones.
//!
//! Changes without an action, and why a confirmed list is still right for them:
//! - a shutdown from inside the server (status `off`): no address or label depends on the
//!   status; the lifecycle checks never take a confirmed answer (they ask for current data,
//!   and a Node whose server shut down turns NotReady, which makes them ask the API);
//! - label edits through `PUT /servers/{id}`: a server's labels are not copied to its Node;
//! - a rename through `PUT /servers/{id}`: the Node's `Hostname` address follows the server's
//!   name. This is the one address that can go stale: it shows at the next safety resync (a
//!   real list, [`resync_after`]) instead of within 5 minutes. A lookup by the new name (a
//!   Node without providerID) does not find it in a confirmed list and lists again, as today;
//! - a network deleted with servers attached (`DELETE /networks/{id}` detaches them without
//!   a server action): the InternalIP of that network goes at the next safety resync, like a
//!   rename (the route controller's own network read reports the network gone meanwhile).
//!
//! Primary IPs cannot be deleted while assigned (`must_be_unassigned` since 1 May 2026), so a
//! public address cannot change without `unassign_primary_ip`.

use std::time::Duration;

use hcloud_api::models::{Action, ActionId, ActionStatus};

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

/// What the server and Primary IP action lists showed at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    /// `GET /servers/actions`.
    pub servers: ListMark,
    /// `GET /primary_ips/actions`.
    pub primary_ips: ListMark,
}

impl Mark {
    fn running(&self) -> bool {
        self.servers.running || self.primary_ips.running
    }
}

/// Requests one look at both action lists costs.
pub const LOOK_REQUESTS: u32 = 2;

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
/// the list was taken, its effect missing from it).
pub fn unchanged(baseline: &Mark, now: &Mark) -> bool {
    !baseline.running()
        && !now.running()
        && baseline.servers.newest == now.servers.newest
        && baseline.primary_ips.newest == now.primary_ips.newest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(servers: Option<i64>, primary_ips: Option<i64>) -> Mark {
        Mark {
            servers: ListMark { newest: servers.map(ActionId), running: false },
            primary_ips: ListMark { newest: primary_ips.map(ActionId), running: false },
        }
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
}
