//! Credentials that rotate without a restart: `HCLOUD_TOKEN_FILE`, `ROBOT_USER_FILE` and
//! `ROBOT_PASSWORD_FILE` are read again every [`POLL_INTERVAL`]; a new credential is checked
//! once with one cheap request and, if the API accepts it, used from the next request on.
//!
//! ```text
//!  every 5 s ──► read the file(s) through their path (a mounted Secret's symlink swap is seen)
//!                  │ decide::Watch: same as in use? failed before and not due? a new problem?
//!                  ▼ a new credential
//!                check it, past the leader fence (standbys rotate too):
//!                  token: does it see this cluster's project? GET /networks/{id} of
//!                         HCLOUD_NETWORK, else GET /servers/{id} of a Node's server, with it
//!                         (a 404 is asked of the token in use too: see `project`)
//!                  Robot: GET /server with it (the request the Robot inventory makes anyway)
//!                  ├─ accepted ──► Client::set_token / RobotClient::set_credentials: every
//!                  │               clone sends it from its next request on; logged with the
//!                  │               token's fingerprint (Robot: the user), never the secret
//!                  ├─ rejected (401/403; Robot 401; a token of another project, which also
//!                  │               gets a Warning on a Node) ──► not used, the old one stays;
//!                  │               checked again when the file changes or after 5 min
//!                  └─ not asked (unreachable, 5xx, rate-limited) ──► the old one stays;
//!                                  checked again after 15 s, doubling up to 5 min
//!  each outcome: a log line and hcloud_ccm_credential_rotations_total{credential,result}
//!
//!  a 401 of the credential in use (any request of the running client; a check's own 401s
//!  do not count) ──► read the file(s) now, a refused or unchecked credential is due at once;
//!                    at most once per 30 s (decide::REFUSED_IN_USE_RECHECK)
//! ```
//!
//! Polling rather than inotify: a mounted Secret changes at most about once a kubelet sync
//! period (a minute or so), reading a file of a few dozen bytes every 5 s costs nothing
//! measurable, and a path read anew each time cannot miss the symlink swap, which watches on
//! the file itself do (they follow the old, deleted directory). No new dependency.
//!
//! A credential from a plain variable (`HCLOUD_TOKEN`, `ROBOT_USER`, `ROBOT_PASSWORD`)
//! cannot change; only the parts that came from files are watched.

mod decide;
pub mod project;
pub(crate) mod read;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cloud_provider::events::{EventSink, ProviderEvent};
use hcloud_api::robot::{RobotClient, RobotError};
use hcloud_api::{Client, ErrorCode, RequestEvent, RequestObserver, RequestStart, token_fingerprint};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{info, warn};

pub use decide::{Checked, FAILED_RECHECK_FIRST, REFUSED_IN_USE_RECHECK, REJECTED_RECHECK, recheck_after};
use decide::{Step, Watch};
use project::{Anchor, Answer, ProjectWitness, TOKEN_FROM_OTHER_PROJECT, Verdict};
pub use read::{RobotPair, Source, Token, token_problem};

/// Where the rotation's Warnings go once the program set it (until then they are only
/// logged).
pub type EventSlot = Arc<OnceLock<Arc<dyn EventSink>>>;

use crate::metrics::HcloudMetrics;

/// How often the credential files are read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Which credential an outcome is about (the metric's `credential` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// `HCLOUD_TOKEN_FILE` (`hcloud_token`).
    HcloudToken,
    /// `ROBOT_USER_FILE` / `ROBOT_PASSWORD_FILE` (`robot`).
    Robot,
}

impl Credential {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Credential::HcloudToken => "hcloud_token",
            Credential::Robot => "robot",
        }
    }
}

/// What became of a new credential, or of the file (the metric's `result` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Checked and in use.
    Accepted,
    /// Refused by the API; not used.
    Rejected,
    /// The API could not be asked; checked again later.
    CheckFailed,
    /// The file holds no usable credential.
    Invalid,
    /// The file cannot be read.
    Unreadable,
}

impl Outcome {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Rejected => "rejected",
            Outcome::CheckFailed => "check_failed",
            Outcome::Invalid => "invalid",
            Outcome::Unreadable => "unreadable",
        }
    }
}

/// Where the clients report that the credential in use was refused (a 401 of a request that
/// sent it), for the rotation to act at once. Built before the clients: their observers
/// ([`Refusals::token_observer`], [`Refusals::robot_observer`]) signal it.
#[derive(Debug, Clone, Default)]
pub struct Refusals {
    token: Arc<Notify>,
    robot: Arc<Notify>,
}

impl Refusals {
    /// The Cloud API client's observer: `inner` (the metrics), and a signal on every 401 that
    /// is not a check's.
    pub fn token_observer(&self, inner: Arc<dyn RequestObserver>) -> Arc<dyn RequestObserver> {
        Arc::new(SignalRefusals { inner, refused: self.token.clone() })
    }

    /// The Robot client's observer, likewise.
    pub fn robot_observer(&self, inner: Arc<dyn RequestObserver>) -> Arc<dyn RequestObserver> {
        Arc::new(SignalRefusals { inner, refused: self.robot.clone() })
    }
}

/// Passes every exchange to `inner` and signals `refused` on a 401 of the credential in use.
struct SignalRefusals {
    inner: Arc<dyn RequestObserver>,
    refused: Arc<Notify>,
}

impl RequestObserver for SignalRefusals {
    fn started(&self, request: &RequestStart<'_>) {
        self.inner.started(request);
    }

    fn observe(&self, event: &RequestEvent<'_>) {
        self.inner.observe(event);
        if event.status == Some(401) && !event.trial {
            // Stores one wake-up at most: a flood of 401s is one signal until it is taken.
            self.refused.notify_one();
        }
    }
}

struct TokenWatch {
    file: PathBuf,
    client: Client,
    in_use: Token,
    watch: Watch<Token>,
    witness: Arc<ProjectWitness>,
    events: EventSlot,
}

struct RobotWatch {
    user: Source,
    password: Source,
    client: RobotClient,
    in_use: RobotPair,
    watch: Watch<RobotPair>,
}

/// The watcher of the credential files. Built by the provider at start-up
/// ([`crate::HcloudCloud::take_credential_rotation`]); [`CredentialRotation::run`] polls until
/// dropped or aborted.
pub struct CredentialRotation {
    token: Option<TokenWatch>,
    robot: Option<RobotWatch>,
    metrics: HcloudMetrics,
    refusals: Refusals,
}

impl std::fmt::Debug for CredentialRotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialRotation")
            .field("token_file", &self.token.as_ref().map(|t| &t.file))
            .field("robot", &self.robot.as_ref().map(|r| (&r.user, &r.password)))
            .finish_non_exhaustive()
    }
}

impl CredentialRotation {
    /// A watcher of nothing yet, counting in `metrics`, told by `refusals` when a credential
    /// in use is refused.
    pub fn new(metrics: HcloudMetrics, refusals: Refusals) -> CredentialRotation {
        CredentialRotation { token: None, robot: None, metrics, refusals }
    }

    /// Watches `file` (`HCLOUD_TOKEN_FILE`) for the token of `client`, which now is `in_use`;
    /// a new token must see what `witness` holds (this cluster's project), and a Warning about
    /// one that does not goes to `events`.
    pub fn watch_token(
        mut self,
        file: PathBuf,
        client: Client,
        in_use: SecretString,
        witness: Arc<ProjectWitness>,
        events: EventSlot,
    ) -> Self {
        let in_use = Token(in_use);
        self.token = Some(TokenWatch { file, client, in_use, watch: Watch::default(), witness, events });
        self
    }

    /// Watches the Robot credentials of `client` (now `in_use`): the parts whose source is a
    /// file. Nothing is watched when neither is.
    pub fn watch_robot(mut self, user: Source, password: Source, client: RobotClient, in_use: RobotPair) -> Self {
        if user != Source::Fixed || password != Source::Fixed {
            self.robot = Some(RobotWatch { user, password, client, in_use, watch: Watch::default() });
        }
        self
    }

    /// Whether any file is watched.
    pub fn is_watching(&self) -> bool {
        self.token.is_some() || self.robot.is_some()
    }

    /// Polls every [`POLL_INTERVAL`], and when a credential in use is refused, forever (stop
    /// it by dropping or aborting its task).
    pub async fn run(mut self) {
        let mut ticks = tokio::time::interval(POLL_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is immediate; the files were just read
        let refusals = self.refusals.clone();
        loop {
            tokio::select! {
                _ = ticks.tick() => {
                    self.poll_once().await;
                }
                () = refusals.token.notified() => {
                    self.in_use_refused(Credential::HcloudToken).await;
                }
                () = refusals.robot.notified() => {
                    self.in_use_refused(Credential::Robot).await;
                }
            }
        }
    }

    /// Reads the files once and acts on what changed; returns what happened (nothing when
    /// nothing changed).
    pub async fn poll_once(&mut self) -> Vec<(Credential, Outcome)> {
        self.poll(true, true).await
    }

    /// The `credential` in use was refused (a 401): unless that happened within
    /// [`REFUSED_IN_USE_RECHECK`] already, reads its file(s) now and checks a credential that
    /// waits for its recheck at once; returns what happened.
    pub async fn in_use_refused(&mut self, credential: Credential) -> Vec<(Credential, Outcome)> {
        let now = Instant::now();
        let due = match credential {
            Credential::HcloudToken => self.token.as_mut().is_some_and(|t| t.watch.in_use_refused(now)),
            Credential::Robot => self.robot.as_mut().is_some_and(|r| r.watch.in_use_refused(now)),
        };
        if !due {
            return Vec::new();
        }
        info!(
            credential = credential.label(),
            "the credential in use was refused (401): reading its file now and checking a waiting credential at once"
        );
        self.poll(credential == Credential::HcloudToken, credential == Credential::Robot).await
    }

    /// Reads the token's file (`token`) and/or the Robot files (`robot`) and acts on what
    /// changed.
    async fn poll(&mut self, token: bool, robot: bool) -> Vec<(Credential, Outcome)> {
        let mut outcomes = Vec::new();
        if let Some(t) = self.token.as_mut().filter(|_| token) {
            outcomes.extend(t.poll().await.map(|o| (Credential::HcloudToken, o)));
        }
        if let Some(r) = self.robot.as_mut().filter(|_| robot) {
            outcomes.extend(r.poll().await.map(|o| (Credential::Robot, o)));
        }
        for (credential, outcome) in &outcomes {
            self.metrics.credential_rotation(credential.label(), outcome.label());
        }
        outcomes
    }
}

/// Logs a file problem; its outcome.
fn problem(variable: &str, unreadable: bool, message: &str) -> Outcome {
    warn!(problem = %message, "{variable}: no usable credential in the file; keeping the one in use");
    if unreadable { Outcome::Unreadable } else { Outcome::Invalid }
}

impl TokenWatch {
    async fn poll(&mut self) -> Option<Outcome> {
        let new = match self.watch.poll(&self.in_use, read::read_token(&self.file), Instant::now()) {
            Step::Wait => return None,
            Step::Problem { unreadable, message } => return Some(problem("HCLOUD_TOKEN_FILE", unreadable, &message)),
            Step::Check(new) => new,
        };
        let fingerprint = token_fingerprint(new.0.expose_secret());
        let previous = token_fingerprint(self.in_use.0.expose_secret());
        let (anchor, verdict) = check_token(&self.client, &self.witness, &self.in_use.0, &new.0).await;
        let checked = match &verdict {
            Verdict::SameProject => match self.client.set_token(new.0.clone()) {
                Ok(()) => Checked::Accepted,
                Err(e) => Checked::Rejected(e.to_string()),
            },
            Verdict::Refused(e) | Verdict::OtherProject(e) => Checked::Rejected(e.clone()),
            Verdict::Unproven(e) => Checked::Failed(e.clone()),
            // `check_token` asks the token in use before it returns; never seen here.
            Verdict::AskTokenInUse => Checked::Failed("the check of the token did not finish".to_owned()),
        };
        let recheck = self.watch.checked(new.clone(), &checked, Instant::now());
        let asked = match &anchor {
            Anchor::Network(_) => "GET /networks/{id}",
            Anchor::Server(..) => "GET /servers/{id}",
            Anchor::Unknown => "GET /locations",
        };
        Some(match (checked, verdict) {
            (Checked::Accepted, _) => {
                info!(
                    fingerprint,
                    previous,
                    check = asked,
                    "HCLOUD_TOKEN_FILE: new token accepted: it sees this cluster's project; in use from the next request on"
                );
                self.in_use = new;
                Outcome::Accepted
            }
            (Checked::Rejected(error), Verdict::OtherProject(_)) => {
                let message = format!(
                    "HCLOUD_TOKEN_FILE: the new token {fingerprint} is not used, the token in use {previous} stays: \
                     {error}. Put a token of this cluster's project in the file."
                );
                warn!(fingerprint, previous, %error, recheck_after = ?recheck, reason = TOKEN_FROM_OTHER_PROJECT,
                    "HCLOUD_TOKEN_FILE: the new token belongs to another Hetzner Cloud project; it is not used, the token in use stays");
                self.warn(message);
                Outcome::Rejected
            }
            (Checked::Rejected(error), _) => {
                warn!(fingerprint, %error, recheck_after = ?recheck,
                    "HCLOUD_TOKEN_FILE: the API refused the new token; it is not used, the token in use stays");
                Outcome::Rejected
            }
            (Checked::Failed(error), _) => {
                warn!(fingerprint, %error, recheck_after = ?recheck,
                    "HCLOUD_TOKEN_FILE: cannot check the new token; the token in use stays until it is checked");
                Outcome::CheckFailed
            }
        })
    }

    /// A Warning about the new token on the Node whose server the token in use found last
    /// (the CCM has no object of its own); only logged without one, or before the program set
    /// the event sink.
    fn warn(&self, message: String) {
        if let (Some(node), Some(sink)) = (self.witness.node(), self.events.get()) {
            sink.publish(ProviderEvent::warning(node, TOKEN_FROM_OTHER_PROJECT, message));
        }
    }
}

/// Checks whether `new` sees this cluster's project (see [`project`]), past the client's gate;
/// what it was asked about and the verdict. One request, two when the new token does not find
/// the anchor (then the token in use, `in_use`, is asked the same).
async fn check_token(
    client: &Client,
    witness: &ProjectWitness,
    in_use: &SecretString,
    new: &SecretString,
) -> (Anchor, Verdict) {
    let anchor = witness.anchor();
    let trial = match client.with_token(new.clone()) {
        Ok(trial) => trial,
        Err(e) => return (anchor, Verdict::Refused(e.to_string())),
    };
    let verdict = project::after_new(&anchor, ask(&trial, &anchor).await);
    if verdict != Verdict::AskTokenInUse {
        return (anchor, verdict);
    }
    let answer = match client.with_token(in_use.clone()) {
        Ok(current) => ask(&current, &anchor).await,
        Err(e) => Answer::Failed(e.to_string()),
    };
    if let (Answer::NotFound, Anchor::Server(id, _)) = (&answer, &anchor) {
        witness.gone(*id);
    }
    let verdict = project::after_in_use(&anchor, answer);
    (anchor, verdict)
}

/// What `client` answers about `anchor`: one request.
async fn ask(client: &Client, anchor: &Anchor) -> Answer {
    let result = match anchor {
        Anchor::Network(id) => client.networks().get(*id).await.map(drop),
        Anchor::Server(id, _) => client.servers().get(*id).await.map(drop),
        Anchor::Unknown => client.locations().list_all().await.map(drop),
    };
    match result {
        Ok(()) => Answer::Found,
        Err(e) if e.is_not_found() => Answer::NotFound,
        Err(e) if matches!(e.code(), Some(ErrorCode::Unauthorized | ErrorCode::Forbidden)) => {
            Answer::Refused(e.to_string())
        }
        Err(e) => Answer::Failed(e.to_string()),
    }
}

impl RobotWatch {
    async fn poll(&mut self) -> Option<Outcome> {
        let read = read::read_robot(&self.user, &self.password, &self.in_use);
        let new = match self.watch.poll(&self.in_use, read, Instant::now()) {
            Step::Wait => return None,
            Step::Problem { unreadable, message } => {
                return Some(problem("ROBOT_USER_FILE/ROBOT_PASSWORD_FILE", unreadable, &message));
            }
            Step::Check(new) => new,
        };
        let checked = check_robot(&self.client, &new).await;
        let recheck = self.watch.checked(new.clone(), &checked, Instant::now());
        // The user is logged (as at start-up); of the password not even a fingerprint: a short
        // hash of a chosen password could be matched by a dictionary search.
        Some(match checked {
            Checked::Accepted => {
                info!(user = %new.user, previous_user = %self.in_use.user,
                    "Robot: new credentials accepted by the webservice (GET /server); in use from the next request on");
                self.in_use = new;
                Outcome::Accepted
            }
            Checked::Rejected(error) => {
                warn!(user = %new.user, %error, recheck_after = ?recheck,
                    "Robot: the webservice refused the new credentials; they are not used, the ones in use stay");
                Outcome::Rejected
            }
            Checked::Failed(error) => {
                warn!(user = %new.user, %error, recheck_after = ?recheck,
                    "Robot: cannot check the new credentials; the ones in use stay until they are checked");
                Outcome::CheckFailed
            }
        })
    }
}

/// Checks `pair` with `GET /server` (past the client's gate; an account without servers
/// answers `SERVER_NOT_FOUND`, which proves the credentials too) and puts it in use if the
/// webservice accepts it. 401 is a refusal; a 403 is the webservice's rate limit.
async fn check_robot(client: &RobotClient, pair: &RobotPair) -> Checked {
    match client.with_credentials(&pair.user, pair.password.clone()).servers().await {
        Ok(_) => {
            client.set_credentials(&pair.user, pair.password.clone());
            Checked::Accepted
        }
        Err(e @ RobotError::Api { status: 401, .. }) => Checked::Rejected(e.to_string()),
        Err(e) => Checked::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
