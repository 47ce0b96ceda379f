//! Projects, as on Hetzner: every resource belongs to one project, and a token sees only the
//! resources of its own project. Another project's server is `404 not_found`, exactly like a
//! server that does not exist; a resource created with a token belongs to that token's
//! project.
//!
//! ```text
//!  bearer token ──► registered for a project (POST /_fake/projects)? ──► that project's state
//!                   └─ otherwise (every token of a single-project fake) ──► the default project
//! ```
//!
//! - The **default project** (`default`) is the fake as it always was: every token the
//!   [`TokenPolicy`](crate::TokenPolicy) accepts and no project claims belongs to it, and
//!   whatever the control surface seeds (without naming a project) lands in it.
//! - **Another project** is added with its tokens ([`FakeHandle::add_project`],
//!   `POST /_fake/projects`); it starts empty. A token registered for it is accepted unless the
//!   token policy denies it by name (an allow list names the default project's tokens). The
//!   handle [`FakeHandle::add_project`] returns (or [`FakeHandle::project`]) seeds and reads
//!   that project; over HTTP `/_fake/projects/{name}/seed` and `/_fake/projects/{name}/state`.
//! - Each project has a state of its own: its resources, actions, locks and injected action
//!   failures. Ids stay unique across projects (each project counts from its own range, one
//!   [`PROJECT_ID_STRIDE`] apart) and so do public addresses (a slice of the pool each).
//! - Shared by all projects: the rate-limit bucket (Hetzner's is per project), faults, the
//!   request counters and log, the Robot part and the settings (action delay and retention,
//!   route limit: a change applies to every project). The Load Balancer data plane carries
//!   the default project's Load Balancers only.
//! - [`FakeHandle::reset`] removes every project but the default one.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::control::token_fingerprint;
use crate::error::ApiError;
use crate::state::State;

pub use crate::state::PROJECT_ID_STRIDE;

/// The name of the default project.
pub const DEFAULT_PROJECT: &str = "default";

/// A project to add (`POST /_fake/projects`): `{"name": "other", "tokens": ["..."]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedProject {
    /// Its name (unique; not `default`).
    pub name: String,
    /// Its API tokens: a request with one of them sees this project.
    #[serde(default)]
    pub tokens: Vec<String>,
}

impl SeedProject {
    /// A project `name` with `tokens`.
    pub fn new<I, S>(name: &str, tokens: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self { name: name.to_owned(), tokens: tokens.into_iter().map(Into::into).collect() }
    }
}

/// A project as `GET /_fake/projects` shows it: its name and its tokens' fingerprints (never
/// the tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectInfo {
    /// The name.
    pub name: String,
    /// [`token_fingerprint`] of each registered token (none for the default project, which
    /// has every other accepted token).
    pub token_fingerprints: Vec<String>,
}

struct Project {
    name: Arc<str>,
    tokens: BTreeSet<String>,
    state: State,
}

impl std::fmt::Debug for Project {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tokens are secrets of a kind even in a fake: only their count.
        f.debug_struct("Project").field("name", &self.name).field("tokens", &self.tokens.len()).finish_non_exhaustive()
    }
}

/// Every project's state; the first is the default project.
#[derive(Debug)]
pub(crate) struct Projects {
    list: Vec<Project>,
}

impl Projects {
    /// Only the default project, with `state`.
    pub fn new(state: State) -> Self {
        Self { list: vec![Project { name: Arc::from(DEFAULT_PROJECT), tokens: BTreeSet::new(), state }] }
    }

    /// The project `token` belongs to: the one it is registered for, else the default one.
    pub fn of_token(&self, token: &str) -> Arc<str> {
        self.list
            .iter()
            .find(|p| p.tokens.contains(token))
            .map_or_else(|| self.list[0].name.clone(), |p| p.name.clone())
    }

    /// Whether `token` is registered for a project other than the default one.
    pub fn is_registered(&self, token: &str) -> bool {
        self.list.iter().any(|p| p.tokens.contains(token))
    }

    /// The state of project `name`. A project that no longer exists (removed by a reset while a
    /// handle to it was kept) is added again, empty and without tokens.
    pub fn state(&mut self, name: &str) -> &mut State {
        let index = match self.list.iter().position(|p| &*p.name == name) {
            Some(i) => i,
            None => {
                let state = self.new_state(self.list.len());
                self.list.push(Project { name: Arc::from(name), tokens: BTreeSet::new(), state });
                self.list.len() - 1
            }
        };
        &mut self.list[index].state
    }

    /// The default project's state.
    pub fn default_state(&mut self) -> &mut State {
        &mut self.list[0].state
    }

    /// Every project's state.
    pub fn states(&mut self) -> impl Iterator<Item = &mut State> {
        self.list.iter_mut().map(|p| &mut p.state)
    }

    /// An empty state for the `index`-th project, with the default project's settings.
    fn new_state(&self, index: usize) -> State {
        let d = &self.list[0].state;
        let mut state = State::of_project(d.action_delay, d.action_retention, index as u64);
        state.max_routes = d.max_routes;
        state
    }

    /// Adds project `seed`; its name in the answer.
    pub fn add(&mut self, seed: &SeedProject) -> Result<Arc<str>, ApiError> {
        if seed.name.is_empty() || seed.name == DEFAULT_PROJECT {
            return Err(ApiError::invalid_input("name", format!("a project cannot be named {:?}", seed.name)));
        }
        if self.list.iter().any(|p| *p.name == *seed.name) {
            return Err(ApiError::new("uniqueness_error", format!("project {:?} exists", seed.name)));
        }
        if let Some(t) = seed.tokens.iter().find(|t| t.is_empty() || self.is_registered(t)) {
            let why = if t.is_empty() { "an empty token" } else { "a token of another project" };
            return Err(ApiError::invalid_input("tokens", format!("project {:?}: {why}", seed.name)));
        }
        let state = self.new_state(self.list.len());
        let name: Arc<str> = Arc::from(seed.name.as_str());
        self.list.push(Project { name: name.clone(), tokens: seed.tokens.iter().cloned().collect(), state });
        Ok(name)
    }

    /// Every project, the default one first.
    pub fn list(&self) -> Vec<ProjectInfo> {
        self.list
            .iter()
            .map(|p| ProjectInfo {
                name: p.name.to_string(),
                token_fingerprints: p.tokens.iter().map(|t| token_fingerprint(t)).collect(),
            })
            .collect()
    }

    /// Whether project `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.list.iter().any(|p| &*p.name == name)
    }
}
