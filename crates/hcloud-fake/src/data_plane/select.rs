//! Target selection, pure: which healthy target gets the next connection.
//!
//! - `round_robin`: the targets in turn; a cursor per listener advances with every pick, so a
//!   target that turns unhealthy is skipped and the others keep alternating.
//! - `least_connections`: the target with the fewest open connections through this service;
//!   ties go to the first tied target at or after the cursor, so equally loaded targets still
//!   alternate.

/// The balancing algorithm of a Load Balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// In turn.
    RoundRobin,
    /// Fewest open connections.
    LeastConnections,
}

impl Algorithm {
    /// From the API's name (`round_robin`, `least_connections`; anything else is round robin,
    /// which the API validates away).
    pub fn from_api(name: &str) -> Self {
        if name == "least_connections" { Self::LeastConnections } else { Self::RoundRobin }
    }
}

/// Picks one of the candidates, given their open connections (`active[i]` for candidate `i`);
/// `None` when there is none. Advances `cursor`.
pub fn pick(algorithm: Algorithm, active: &[u64], cursor: &mut usize) -> Option<usize> {
    let len = active.len();
    if len == 0 {
        return None;
    }
    let start = *cursor % len;
    *cursor = cursor.wrapping_add(1);
    match algorithm {
        Algorithm::RoundRobin => Some(start),
        Algorithm::LeastConnections => {
            let least = active.iter().copied().min()?;
            (0..len).map(|offset| (start + offset) % len).find(|&i| active[i] == least)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_alternates() {
        let mut cursor = 0;
        let picks: Vec<_> = (0..5).map(|_| pick(Algorithm::RoundRobin, &[0, 0, 0], &mut cursor)).collect();
        assert_eq!(picks, vec![Some(0), Some(1), Some(2), Some(0), Some(1)]);
        // The set shrinks (a target turned unhealthy): the remaining ones still alternate.
        let picks: Vec<_> = (0..4).map(|_| pick(Algorithm::RoundRobin, &[7, 0], &mut cursor)).collect();
        assert_eq!(picks, vec![Some(1), Some(0), Some(1), Some(0)]);
        assert_eq!(pick(Algorithm::RoundRobin, &[], &mut cursor), None);
    }

    #[test]
    fn least_connections_prefers_the_idle() {
        let mut cursor = 0;
        for _ in 0..4 {
            assert_eq!(pick(Algorithm::LeastConnections, &[1, 0], &mut cursor), Some(1));
        }
        assert_eq!(pick(Algorithm::LeastConnections, &[3, 2, 5], &mut cursor), Some(1));
        // Ties alternate.
        let mut cursor = 0;
        let picks: Vec<_> = (0..4).map(|_| pick(Algorithm::LeastConnections, &[2, 2], &mut cursor)).collect();
        assert_eq!(picks, vec![Some(0), Some(1), Some(0), Some(1)]);
        assert_eq!(pick(Algorithm::LeastConnections, &[], &mut cursor), None);
    }

    #[test]
    fn algorithm_names() {
        assert_eq!(Algorithm::from_api("least_connections"), Algorithm::LeastConnections);
        assert_eq!(Algorithm::from_api("round_robin"), Algorithm::RoundRobin);
    }
}
