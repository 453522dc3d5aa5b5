//! The connections each client holds open, at most [`Limits::max_connections_per_client`] of
//! them: one client cannot take every connection the server has ([`Limits::max_connections`]).
//!
//! A client is an IPv4 address, or an IPv6 /64 network: a host is commonly given a whole /64,
//! and counting its addresses apart would let it open a connection from each. An IPv4 address
//! mapped into IPv6 counts as that IPv4 address. The table holds only the clients with a
//! connection open, so it is never larger than the connections themselves.
//!
//! Known limits: a /64 may hold hosts that are not one client (behind NAT64, every IPv4 user of
//! the translator shares one), and a client given a shorter prefix (a /56, a /48) counts as
//! many.
//!
//! [`Limits::max_connections_per_client`]: crate::Limits::max_connections_per_client
//! [`Limits::max_connections`]: crate::Limits::max_connections

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use parking_lot::Mutex;

/// Who a connection counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6Network(u64),
}

impl Client {
    fn of(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(v4) => Client::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client::V4(v4),
                None => Client::V6Network((v6.to_bits() >> 64) as u64),
            },
        }
    }
}

/// The open connections of every client that has one.
#[derive(Debug)]
pub(crate) struct Clients {
    cap: usize,
    open: Arc<Mutex<HashMap<Client, usize>>>,
}

impl Clients {
    /// At most `cap` connections per client (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap: cap.max(1), open: Arc::default() }
    }

    /// Counts a connection of the client at `address`, unless it holds `cap` already: the
    /// count goes with the returned value.
    pub(crate) fn admit(&self, address: IpAddr) -> Option<ClientConnection> {
        let client = Client::of(address);
        let mut open = self.open.lock();
        let count = open.entry(client).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(ClientConnection { client, open: Arc::clone(&self.open) })
    }
}

/// One open connection of a client, uncounted when dropped.
#[derive(Debug)]
pub(crate) struct ClientConnection {
    client: Client,
    open: Arc<Mutex<HashMap<Client, usize>>>,
}

impl Drop for ClientConnection {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        if let Some(count) = open.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn a_client_holds_at_most_its_cap_and_a_closed_connection_frees_its_place() {
        let clients = Clients::new(2);
        let first = clients.admit(ip("192.0.2.1")).expect("the first");
        let _second = clients.admit(ip("192.0.2.1")).expect("the second");
        assert!(clients.admit(ip("192.0.2.1")).is_none(), "a third past the cap of two");
        assert!(clients.admit(ip("192.0.2.2")).is_some(), "another client is counted apart");
        drop(first);
        assert!(clients.admit(ip("192.0.2.1")).is_some(), "a closed connection frees its place");
    }

    #[test]
    fn an_ipv6_network_is_one_client_and_a_mapped_ipv4_address_is_its_ipv4_client() {
        let clients = Clients::new(1);
        let _held = clients.admit(ip("2001:db8:1:2::1")).expect("the first");
        assert!(clients.admit(ip("2001:db8:1:2:ffff::9")).is_none(), "the same /64");
        assert!(clients.admit(ip("2001:db8:1:3::1")).is_some(), "another /64");
        let _v4 = clients.admit(ip("198.51.100.7")).expect("an IPv4 client");
        let mapped = IpAddr::V6(Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped());
        assert!(clients.admit(mapped).is_none(), "the IPv4 client, mapped");
        assert!(clients.admit(IpAddr::V6(Ipv6Addr::LOCALHOST)).is_some());
    }

    #[test]
    fn the_table_keeps_only_clients_with_a_connection_open() {
        let clients = Clients::new(4);
        let connections: Vec<_> = (0..100u8)
            .map(|n| clients.admit(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))).expect("room"))
            .collect();
        assert_eq!(clients.open.lock().len(), 100);
        drop(connections);
        assert!(clients.open.lock().is_empty(), "every client left");
    }
}
