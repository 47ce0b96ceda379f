//! Whether a new token belongs to this cluster's Hetzner Cloud project. Any valid token passes
//! `GET /locations`; another project's token is valid too, but every server of this cluster is
//! a real `404` for it (ids are global, a token sees its own project only). Put in use, it would
//! have the lifecycle delete the next NotReady Node as "confirmed gone" and create Load
//! Balancers in the other project. So a new token must see what the token in use sees:
//!
//! ```text
//!  the anchor: HCLOUD_NETWORK's network ─ else ─► the server of a Node the token in use found
//!              (its providerID hcloud://<id> or its name) ─ else ─► none known yet
//!  new token:  GET /networks/{id}        │        GET /servers/{id}      │ GET /locations
//!    found ──────► same project: accepted                                │ valid, project unproven:
//!    401/403 ────► rejected (refused by the API)                         │ check_failed, again later
//!    404 ────────► token in use, same GET (past the fence):
//!                    found ──► rejected: another project (a Warning)
//!                    404 ────► the anchor is gone (a server: forgotten): check_failed
//!                    else ───► cannot tell: check_failed
//!    else ───────► check_failed
//! ```
//!
//! One request when the token is accepted or refused by the API, two when it is another
//! project's. [`ProjectWitness`] keeps the anchor: the network (fixed at start-up) and the
//! servers the instances found for Nodes (most recent first; no request of its own). The
//! decisions ([`after_new`], [`after_in_use`]) are pure.

use std::collections::VecDeque;
use std::sync::Mutex;

use cloud_provider::events::EventObject;
use hcloud_api::models::{NetworkId, ServerId};
use sync_lock::Unpoison as _;

/// The reason of the Warning about a token of another project.
pub const TOKEN_FROM_OTHER_PROJECT: &str = "TokenFromOtherProject";

/// How many Nodes' servers are remembered.
const REMEMBERED: usize = 4;

/// What proves a project: the configured network, else servers Nodes of this cluster name.
#[derive(Debug, Default)]
pub struct ProjectWitness {
    network: Option<NetworkId>,
    /// Servers the token in use found for Nodes, most recent first, with their Node.
    servers: Mutex<VecDeque<(ServerId, EventObject)>>,
}

/// What a new token is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    /// `HCLOUD_NETWORK`'s network (`GET /networks/{id}`).
    Network(NetworkId),
    /// The server of a Node (`GET /servers/{id}`).
    Server(ServerId, String),
    /// Nothing known yet: only the token's validity can be checked (`GET /locations`).
    Unknown,
}

impl ProjectWitness {
    /// A witness of the network `network` (`HCLOUD_NETWORK`, resolved with the token in use).
    pub fn new(network: Option<NetworkId>) -> ProjectWitness {
        ProjectWitness { network, servers: Mutex::default() }
    }

    /// The token in use found server `id` for `node`.
    pub fn found(&self, id: ServerId, node: EventObject) {
        let mut servers = self.servers.lock_unpoisoned();
        if servers.front().is_some_and(|(s, _)| *s == id) {
            return;
        }
        servers.retain(|(s, _)| *s != id);
        servers.push_front((id, node));
        servers.truncate(REMEMBERED);
    }

    /// Server `id` is gone (confirmed by the token in use).
    pub fn gone(&self, id: ServerId) {
        self.servers.lock_unpoisoned().retain(|(s, _)| *s != id);
    }

    /// What the next new token is asked about.
    pub fn anchor(&self) -> Anchor {
        if let Some(n) = self.network {
            return Anchor::Network(n);
        }
        match self.servers.lock_unpoisoned().front() {
            Some((id, node)) => Anchor::Server(*id, node.name.clone()),
            None => Anchor::Unknown,
        }
    }

    /// The Node a Warning goes on: the one whose server was found last, if any.
    pub fn node(&self) -> Option<EventObject> {
        self.servers.lock_unpoisoned().front().map(|(_, node)| node.clone())
    }
}

/// What one GET answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200.
    Found,
    /// The API's `404 not_found`.
    NotFound,
    /// 401/403: the token is refused.
    Refused(String),
    /// Anything else (unreachable, 5xx, rate-limited, a proxy's page).
    Failed(String),
}

/// How the check of a new token ends, or what it asks next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The token sees this project.
    SameProject,
    /// The API refused the token (401/403).
    Refused(String),
    /// The token is valid but sees another project.
    OtherProject(String),
    /// Cannot tell now; check again later.
    Unproven(String),
    /// Ask the token in use the same question ([`after_in_use`]).
    AskTokenInUse,
}

impl Anchor {
    /// How the anchor is named in messages.
    fn describe(&self) -> String {
        match self {
            Anchor::Network(id) => format!("network {id} (HCLOUD_NETWORK)"),
            Anchor::Server(id, node) => format!("server {id} of Node {node}"),
            Anchor::Unknown => "nothing of this cluster".to_owned(),
        }
    }
}

/// What the new token's answer about `anchor` means.
pub fn after_new(anchor: &Anchor, answer: Answer) -> Verdict {
    match (anchor, answer) {
        (_, Answer::Refused(e)) => Verdict::Refused(e),
        (_, Answer::Failed(e)) => Verdict::Unproven(e),
        (Anchor::Unknown, _) => Verdict::Unproven(
            "the token is valid, but its project cannot be proven yet: no HCLOUD_NETWORK, and the token in use has \
             not found the server of any Node yet"
                .to_owned(),
        ),
        (_, Answer::Found) => Verdict::SameProject,
        (_, Answer::NotFound) => Verdict::AskTokenInUse,
    }
}

/// What the token in use's answer about `anchor` means, after the new token did not find it.
pub fn after_in_use(anchor: &Anchor, answer: Answer) -> Verdict {
    let what = anchor.describe();
    match answer {
        Answer::Found => Verdict::OtherProject(format!(
            "the new token cannot see {what}, which the token in use sees: it belongs to another Hetzner Cloud project"
        )),
        Answer::NotFound => Verdict::Unproven(format!("{what} is gone for the token in use too; asking again later")),
        Answer::Refused(e) | Answer::Failed(e) => Verdict::Unproven(format!(
            "the new token cannot see {what}, and the token in use cannot be asked about it ({e})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> EventObject {
        EventObject { kind: "Node", api_version: "v1", namespace: None, name: name.to_owned(), uid: None }
    }

    #[test]
    fn the_network_wins_else_the_server_found_last() {
        let w = ProjectWitness::new(None);
        assert_eq!(w.anchor(), Anchor::Unknown);
        w.found(ServerId(1), node("a"));
        w.found(ServerId(2), node("b"));
        assert_eq!(w.anchor(), Anchor::Server(ServerId(2), "b".into()));
        w.found(ServerId(1), node("a"));
        assert_eq!(w.anchor(), Anchor::Server(ServerId(1), "a".into()), "found again: most recent");
        w.gone(ServerId(1));
        assert_eq!(w.anchor(), Anchor::Server(ServerId(2), "b".into()));
        for i in 10..20 {
            w.found(ServerId(i), node("n"));
        }
        assert_eq!(w.servers.lock_unpoisoned().len(), REMEMBERED);
        let with_network = ProjectWitness::new(Some(NetworkId(7)));
        with_network.found(ServerId(1), node("a"));
        assert_eq!(with_network.anchor(), Anchor::Network(NetworkId(7)));
        assert_eq!(with_network.node().map(|n| n.name), Some("a".into()), "the Warning still goes on a Node");
    }

    #[test]
    fn only_an_anchor_the_token_in_use_sees_and_the_new_one_does_not_is_another_project() {
        let server = Anchor::Server(ServerId(5), "n".into());
        let network = Anchor::Network(NetworkId(7));
        assert_eq!(after_new(&server, Answer::Found), Verdict::SameProject);
        assert_eq!(after_new(&network, Answer::Found), Verdict::SameProject);
        assert_eq!(after_new(&server, Answer::Refused("401".into())), Verdict::Refused("401".into()));
        assert_eq!(after_new(&server, Answer::Failed("503".into())), Verdict::Unproven("503".into()));
        assert_eq!(after_new(&server, Answer::NotFound), Verdict::AskTokenInUse);
        assert!(matches!(after_new(&Anchor::Unknown, Answer::Found), Verdict::Unproven(_)), "valid is not enough");
        assert_eq!(after_new(&Anchor::Unknown, Answer::Refused("401".into())), Verdict::Refused("401".into()));

        let Verdict::OtherProject(why) = after_in_use(&server, Answer::Found) else { panic!("another project") };
        assert!(why.contains("server 5 of Node n") && why.contains("another Hetzner Cloud project"), "{why}");
        let Verdict::OtherProject(why) = after_in_use(&network, Answer::Found) else { panic!("another project") };
        assert!(why.contains("network 7 (HCLOUD_NETWORK)"), "{why}");
        assert!(matches!(after_in_use(&server, Answer::NotFound), Verdict::Unproven(_)), "gone for both: no proof");
        assert!(matches!(after_in_use(&server, Answer::Refused("401".into())), Verdict::Unproven(_)));
        assert!(matches!(after_in_use(&server, Answer::Failed("503".into())), Verdict::Unproven(_)));
    }
}
