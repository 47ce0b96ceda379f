//! Which new connections a listener takes: at most `max_connections_per_client` from one
//! client (open or waiting), at most `max_connections` served at once, of which
//! `reserved_for_new_clients` only go to a client without another connection, and as many
//! waiting up to `admission_wait` for a slot (first come, first served).
//!
//! A client holding many connections (with a request now and then, so that no idle timeout
//! closes them) therefore takes at most its own cap, and the slots left, the reserved ones
//! above all, keep a kubelet probe (one connection from its own address) answered. Filling
//! every slot takes `(max_connections - reserved_for_new_clients) / max_connections_per_client`
//! clients holding their full cap plus one more client per reserved slot.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sync_lock::Unpoison as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::limits::Limits;

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its client has as many connections open or waiting as it may.
    ClientCap,
    /// As many connections as are served already wait for a slot.
    WaitingRoomFull,
    /// No slot freed up within the admission wait.
    NoSlotInTime,
}

/// The client a peer address counts for: an IPv4 address (also when mapped into IPv6), or an
/// IPv6 /64 (one host usually has a whole /64 to pick addresses from).
pub(crate) fn client_of(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// Connections open or waiting per client.
type Clients = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// The admission of one listener.
pub(crate) struct Admission {
    /// Slots any connection may take.
    shared: Arc<Semaphore>,
    /// Slots only for a client without another connection.
    reserved: Arc<Semaphore>,
    waiting_room: Arc<Semaphore>,
    per_client: usize,
    clients: Clients,
    wait: Duration,
    refused: AtomicU64,
}

/// An admitted connection: its slot and its place in its client's count, both given back when
/// dropped.
pub(crate) struct Admitted {
    _slot: OwnedSemaphorePermit,
    _counted: Counted,
}

/// One connection counted for its client until dropped.
struct Counted {
    clients: Clients,
    client: IpAddr,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut clients = self.clients.lock_unpoisoned();
        if let Some(count) = clients.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                clients.remove(&self.client);
            }
        }
    }
}

impl Admission {
    pub(crate) fn new(limits: &Limits) -> Self {
        let max = limits.max_connections.max(1);
        let reserved = limits.reserved_for_new_clients.min(max - 1);
        Admission {
            shared: Arc::new(Semaphore::new(max - reserved)),
            reserved: Arc::new(Semaphore::new(reserved)),
            waiting_room: Arc::new(Semaphore::new(max)),
            per_client: limits.max_connections_per_client.max(1),
            clients: Arc::default(),
            wait: limits.admission_wait,
            refused: AtomicU64::new(0),
        }
    }

    /// A slot for a new connection from `peer`, held until the result is dropped.
    pub(crate) async fn admit(&self, peer: IpAddr) -> Result<Admitted, Refused> {
        let client = client_of(peer);
        let (counted, alone) = {
            let mut clients = self.clients.lock_unpoisoned();
            let count = clients.entry(client).or_insert(0);
            if *count >= self.per_client {
                return Err(Refused::ClientCap);
            }
            *count += 1;
            (Counted { clients: Arc::clone(&self.clients), client }, *count == 1)
        };
        let slot = self.slot(alone).await?;
        Ok(Admitted { _slot: slot, _counted: counted })
    }

    /// A shared slot, or for a client without another connection (`alone`) also a reserved one;
    /// waiting for one if none is free.
    async fn slot(&self, alone: bool) -> Result<OwnedSemaphorePermit, Refused> {
        if let Ok(slot) = Arc::clone(&self.shared).try_acquire_owned() {
            return Ok(slot);
        }
        if alone && let Ok(slot) = Arc::clone(&self.reserved).try_acquire_owned() {
            return Ok(slot);
        }
        let _waiting = Arc::clone(&self.waiting_room).try_acquire_owned().map_err(|_| Refused::WaitingRoomFull)?;
        let freed = async {
            if alone {
                tokio::select! {
                    biased;
                    slot = Arc::clone(&self.shared).acquire_owned() => slot,
                    slot = Arc::clone(&self.reserved).acquire_owned() => slot,
                }
            } else {
                Arc::clone(&self.shared).acquire_owned().await
            }
        };
        match tokio::time::timeout(self.wait, freed).await {
            Ok(Ok(slot)) => Ok(slot),
            // The semaphores are never closed; a closed one admits nobody either.
            Ok(Err(_)) | Err(_) => Err(Refused::NoSlotInTime),
        }
    }

    /// Counts a refused connection; the new total.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.fetch_add(1, Ordering::Relaxed) + 1
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use tokio::time::Instant;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    const C: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));

    fn limits(max: usize, per_client: usize, reserved: usize, wait: Duration) -> Limits {
        Limits {
            max_connections: max,
            max_connections_per_client: per_client,
            reserved_for_new_clients: reserved,
            admission_wait: wait,
            ..Limits::SECURE
        }
    }

    #[test]
    fn clients_are_ipv4_addresses_and_ipv6_slash_64s() {
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(client_of(A), A);
        assert_eq!(client_of(v6("::ffff:10.0.0.1")), A);
        assert_eq!(client_of(v6("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), v6("2001:db8:1:2::"));
        assert_ne!(client_of(v6("2001:db8:1:3::1")), client_of(v6("2001:db8:1:2::1")));
    }

    #[tokio::test(start_paused = true)]
    async fn beyond_the_cap_connections_wait_briefly_and_beyond_the_waiting_room_are_refused() {
        let admission = Arc::new(Admission::new(&limits(2, 10, 0, 5 * SECOND)));
        let first = admission.admit(A).await.expect("a free slot");
        let _second = admission.admit(A).await.expect("a free slot");
        let started = Instant::now();
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let admission = Arc::clone(&admission);
                tokio::spawn(async move { admission.admit(A).await.map(|slot| (slot, Instant::now())) })
            })
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(admission.admit(A).await.err(), Some(Refused::WaitingRoomFull));
        let released = Instant::now() + 2 * SECOND;
        tokio::time::sleep_until(released).await;
        drop(first);
        let mut outcomes = Vec::new();
        for waiter in waiting {
            // Slots stay held in `outcomes`.
            outcomes.push(waiter.await.expect("the waiter does not panic"));
        }
        let admitted_after: Vec<_> = outcomes.iter().map(|o| o.as_ref().map(|(_, at)| *at - released)).collect();
        // The first in line gets the freed slot at once; the other one gives up after waiting 5 s.
        assert_eq!(admitted_after, vec![Ok(Duration::ZERO), Err(&Refused::NoSlotInTime)]);
        assert_eq!(started.elapsed(), 5 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn one_client_gets_its_cap_and_no_more_and_others_still_get_slots() {
        let admission = Admission::new(&limits(10, 3, 0, SECOND));
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(admission.admit(A).await.expect("within A's cap"));
        }
        let started = Instant::now();
        assert_eq!(admission.admit(A).await.err(), Some(Refused::ClientCap));
        assert_eq!(started.elapsed(), Duration::ZERO, "refused at once, without waiting");
        held.push(admission.admit(B).await.expect("B has its own cap"));
        // A connection of A that ends makes room for another one of A.
        held.swap_remove(0);
        held.push(admission.admit(A).await.expect("within A's cap again"));
        assert_eq!(admission.admit(A).await.err(), Some(Refused::ClientCap));
        drop(held);
        assert!(admission.clients.lock_unpoisoned().is_empty(), "every count is given back");
    }

    #[tokio::test(start_paused = true)]
    async fn reserved_slots_go_only_to_clients_without_another_connection() {
        // Two shared slots and two reserved ones.
        let admission = Admission::new(&limits(4, 4, 2, SECOND));
        let _a1 = admission.admit(A).await.expect("a shared slot");
        let _a2 = admission.admit(A).await.expect("a shared slot");
        // A holds connections: no reserved slot for it, so it waits and gives up.
        let started = Instant::now();
        assert_eq!(admission.admit(A).await.err(), Some(Refused::NoSlotInTime));
        assert_eq!(started.elapsed(), SECOND);
        // B and C have no other connection: the reserved slots are theirs.
        let b = admission.admit(B).await.expect("a reserved slot for B");
        let _c = admission.admit(C).await.expect("a reserved slot for C");
        // B now holds one: its second connection is not "new", and every slot is taken.
        assert_eq!(admission.admit(B).await.err(), Some(Refused::NoSlotInTime));
        drop(b);
        let _b = admission.admit(B).await.expect("B's reserved slot again");
    }
}
