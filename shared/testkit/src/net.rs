use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Mutex;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::timeout;

/// Asks the kernel for an unused loopback port, never one this process has been given
/// before.
///
/// The port is released before returning, so another process could grab it
/// before the caller binds it; the process spawners retry on "address in use". The
/// kernel may offer a released port again at once, so two services started side by side
/// could be given the same one: the second would fail to bind while the first's port
/// already answers, and look ready. Ports handed out are remembered to rule that out.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("failed to bind 127.0.0.1:0 to find a free port");
        let port = listener
            .local_addr()
            .expect("bound listener has no local address")
            .port();
        if GIVEN
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(port)
        {
            return port;
        }
    }
}

/// Retries a TCP connect to `127.0.0.1:port` until it succeeds or `timeout_after`
/// elapses. Returns whether the port accepted a connection.
pub async fn wait_for_port(port: u16, timeout_after: Duration) -> bool {
    crate::try_eventually(timeout_after, || async move {
        match port_accepts(port).await {
            true => Ok(()),
            false => Err(format!("port {port} refuses connections")),
        }
    })
    .await
    .is_ok()
}

pub(crate) async fn port_accepts(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    // A connect to a dropped SYN could hang for a long time; bound each attempt.
    matches!(
        timeout(Duration::from_secs(1), TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_never_gives_a_port_twice() {
        let ports: BTreeSet<u16> = (0..200).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 200);
    }

    #[test]
    fn free_port_is_bindable() {
        let port = free_port();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("free port should be bindable");
    }

    #[tokio::test]
    async fn wait_for_port_sees_listener_and_times_out_without_one() {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let port = listener.local_addr().expect("local addr").port();
        assert!(wait_for_port(port, Duration::from_secs(2)).await);

        // Bound but not listening: the port stays reserved, so no other test can
        // take it, yet connects are refused.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .expect("bind without listen");
        let port = socket.local_addr().expect("local addr").port();
        assert!(!wait_for_port(port, Duration::from_millis(200)).await);
    }
}
