//! Where a request goes: a path template for accounting and the concrete path.

use std::fmt;

use crate::observe::api_endpoint;

/// Where a request goes: a path template for accounting and the concrete path.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) template: &'static str,
    pub(crate) path: String,
    pub(crate) api_endpoint: String,
    /// A POST that creates a resource: repeating it could create a duplicate.
    pub(crate) create: bool,
}

impl Target {
    pub(crate) fn fixed(template: &'static str) -> Target {
        Target { template, path: template.to_owned(), api_endpoint: api_endpoint(template), create: false }
    }

    pub(crate) fn with_id(template: &'static str, id: impl fmt::Display) -> Target {
        Target {
            template,
            path: template.replacen("{id}", &id.to_string(), 1),
            api_endpoint: api_endpoint(template),
            create: false,
        }
    }

    /// The collection a `POST` creates a resource in.
    pub(crate) fn create(template: &'static str) -> Target {
        Target { create: true, ..Target::fixed(template) }
    }
}
