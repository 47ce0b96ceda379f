//! The error codes of the Hetzner Cloud API, shared by the error envelope ([`crate::Error`]) and
//! finished actions ([`crate::models::ActionError`]); kept apart from both so neither imports
//! the other.

crate::string_enum! {
    /// An error code of the Hetzner Cloud API (`error.code` in the error envelope).
    ///
    /// Codes this client does not know are kept as [`ErrorCode::Unknown`], never rejected.
    pub enum ErrorCode {
        /// The resource does not exist.
        NotFound = "not_found",
        /// The project's request budget is used up.
        RateLimitExceeded = "rate_limit_exceeded",
        /// The resource changed during the request; retry.
        Conflict = "conflict",
        /// Another action is running on the resource.
        Locked = "locked",
        /// A field that must be unique (usually `name`) is already taken.
        UniquenessError = "uniqueness_error",
        /// The requested resource is currently unavailable.
        ResourceUnavailable = "resource_unavailable",
        /// A quota or per-resource maximum would be exceeded.
        ResourceLimitExceeded = "resource_limit_exceeded",
        /// The resource is protected against this action.
        Protected = "protected",
        /// The operation cannot run during maintenance.
        Maintenance = "maintenance",
        /// The input failed validation; see [`ErrorDetails::InvalidInput`](crate::ErrorDetails::InvalidInput).
        InvalidInput = "invalid_input",
        /// The request body was not valid JSON.
        JsonError = "json_error",
        /// The token is missing or invalid.
        Unauthorized = "unauthorized",
        /// The token lacks permission.
        Forbidden = "forbidden",
        /// The token is read-only.
        TokenReadonly = "token_readonly",
        /// An error inside the API.
        ServerError = "server_error",
        /// An error inside a backing service.
        ServiceError = "service_error",
        /// The API could not answer in time; retry.
        Timeout = "timeout",
        /// The API backend could not be reached; retry.
        BadGateway = "bad_gateway",
        /// The API is unavailable.
        Unavailable = "unavailable",
        /// The resource does not support this.
        UnsupportedError = "unsupported_error",
        /// Load Balancer: the target is already defined.
        TargetAlreadyDefined = "target_already_defined",
        /// Load Balancer: the listen port is already used by another service.
        SourcePortAlreadyUsed = "source_port_already_used",
        /// Load Balancer: already attached to that network.
        LoadBalancerAlreadyAttached = "load_balancer_already_attached",
        /// Load Balancer: not attached to a network.
        LoadBalancerNotAttachedToNetwork = "load_balancer_not_attached_to_network",
        /// Load Balancer: the server target is not in the Load Balancer's network.
        ServerNotAttachedToNetwork = "server_not_attached_to_network",
        /// Load Balancer: the IP target is not owned by the project.
        IpNotOwned = "ip_not_owned",
        /// Load Balancer: the IP target belongs to a Hetzner Cloud resource.
        CloudResourceIpNotAllowed = "cloud_resource_ip_not_allowed",
        /// Load Balancer: the type does not fit the Load Balancer.
        InvalidLoadBalancerType = "invalid_load_balancer_type",
        /// Load Balancer: some targets use the public IP.
        TargetsWithoutUsePrivateIp = "targets_without_use_private_ip",
        /// Network: the requested IP is not available.
        IpNotAvailable = "ip_not_available",
        /// Network: no subnet or IP left.
        NoSubnetAvailable = "no_subnet_available",
        /// Server: already attached to that network.
        ServerAlreadyAttached = "server_already_attached",
    }
}

impl Default for ErrorCode {
    /// The code of an envelope that named none (the API always names one; tolerated).
    fn default() -> Self {
        ErrorCode::Unknown(String::new())
    }
}
