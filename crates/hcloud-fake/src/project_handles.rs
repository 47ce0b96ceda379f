//! The [`FakeHandle`]'s side of [`crate::projects`]: adding projects, and handles that work on
//! one of them.

use std::sync::Arc;

use sync_lock::Unpoison as _;

use crate::error::FakeError;
use crate::handle::FakeHandle;
use crate::projects::{ProjectInfo, SeedProject};

impl FakeHandle {
    /// Adds a project with its tokens (see [`crate::projects`]); returns a handle to it: its
    /// `seed_*`, `snapshot` and other state methods work on that project.
    pub fn add_project(&self, project: &SeedProject) -> Result<FakeHandle, FakeError> {
        let name = self.shared.projects.lock_unpoisoned().add(project)?;
        Ok(self.in_project(name))
    }

    /// A handle to project `name`, if it exists.
    pub fn project(&self, name: &str) -> Option<FakeHandle> {
        let exists = self.shared.projects.lock_unpoisoned().contains(name);
        exists.then(|| self.in_project(Arc::from(name)))
    }

    /// The project this handle works on ([`DEFAULT_PROJECT`](crate::projects::DEFAULT_PROJECT) unless it came from
    /// [`FakeHandle::add_project`] or [`FakeHandle::project`]).
    pub fn project_name(&self) -> &str {
        &self.project
    }

    /// Every project, the default one first.
    pub fn projects(&self) -> Vec<ProjectInfo> {
        self.shared.projects.lock_unpoisoned().list()
    }

    /// The project `token` sees.
    pub(crate) fn project_of(&self, token: &str) -> Arc<str> {
        self.shared.projects.lock_unpoisoned().of_token(token)
    }

    /// Whether `token` is registered for a project (accepted unless the policy denies it by
    /// name).
    pub(crate) fn is_project_token(&self, token: &str) -> bool {
        self.shared.projects.lock_unpoisoned().is_registered(token)
    }

    /// This handle, working on project `name`.
    pub(crate) fn in_project(&self, name: Arc<str>) -> FakeHandle {
        FakeHandle { shared: self.shared.clone(), project: name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeConfig;
    use crate::control::{SeedNetwork, SeedServer};
    use crate::projects::{DEFAULT_PROJECT, PROJECT_ID_STRIDE};

    #[test]
    fn each_project_has_its_own_resources_and_id_range() {
        let h = FakeHandle::new(FakeConfig::default());
        let mine = h.seed_server(&SeedServer::new("a")).unwrap_or_else(|e| panic!("{e}"));
        let other = h.add_project(&SeedProject::new("other", ["tok-b"])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(other.project_name(), "other");
        let theirs = other.seed_server(&SeedServer::new("a")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(theirs, mine + PROJECT_ID_STRIDE, "ids are unique across projects");
        assert!(h.server(theirs).is_none() && other.server(mine).is_none(), "neither sees the other's");
        let (a, b) = (h.server(mine), other.server(theirs));
        let ip = |s: Option<crate::wire::Server>| s.and_then(|s| s.public_net.ipv4).map(|v| v.ip);
        assert_ne!(ip(a), ip(b), "public addresses too");
        other.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8")).unwrap_or_else(|e| panic!("{e}"));
        assert!(h.snapshot().networks.is_empty());
        assert_eq!(h.project_of("tok-b").as_ref(), "other");
        assert_eq!(h.project_of("anything-else").as_ref(), DEFAULT_PROJECT);
        assert!(h.add_project(&SeedProject::new("other", ["tok-c"])).is_err(), "names are unique");
        assert!(h.add_project(&SeedProject::new("third", ["tok-b"])).is_err(), "a token has one project");
        assert!(h.add_project(&SeedProject::new(DEFAULT_PROJECT, ["tok-d"])).is_err());
        let names: Vec<String> = h.projects().into_iter().map(|p| p.name).collect();
        assert_eq!(names, vec![DEFAULT_PROJECT, "other"]);
        h.reset();
        assert_eq!(h.projects().len(), 1, "a reset removes the other projects");
        assert_eq!(h.project_of("tok-b").as_ref(), DEFAULT_PROJECT);
    }
}
