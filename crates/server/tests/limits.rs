//! Protection against floods and slow clients (issue 8, point 3): a host over its connection
//! limit gets further connections closed while other hosts and its existing connections keep
//! working; a sender that trickles a record (slowloris) or connects and says nothing is closed
//! after the record timeout; an idle connection after the idle timeout. Each is counted.

mod common;

use common::*;
use eagernfs_proto::nfs3::NFS_PROGRAM;
use eagernfs_server::ServerConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn server(config: ServerConfig) -> TestServer {
    TestServer::start_with(config, vec![spec(1, &["/mem"], "/mem *(rw,insecure,no_root_squash)", memory())])
}

/// Wait (bounded) until `stream` is closed by the server: a read returns 0 or an error.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 64];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// A NULL call answered on a new connection from `ip`; false if the server closes the
/// connection instead (it may not have seen yet that a connection of the host's went).
fn null_answered_from(addr: SocketAddr, ip: &str) -> bool {
    let mut c = Client::connect_from(addr, format!("{ip}:0").parse().unwrap()).unwrap();
    let header = c.header(NFS_PROGRAM, 3, 0);
    let rec = Client::record(&Client::call_message(&header, &[]));
    if c.try_send_raw(&rec).is_err() {
        return false;
    }
    c.recv_record().is_some()
}

/// A NULL call answered on `c`.
fn null_works(c: &mut Client) -> bool {
    c.send_call(NFS_PROGRAM, 3, 0, &());
    c.recv_within(Duration::from_secs(10)).is_some()
}

fn connect_from(addr: SocketAddr, ip: &str) -> TcpStream {
    Client::connect_from(addr, format!("{ip}:0").parse().unwrap()).unwrap().into_stream()
}

#[test]
fn a_host_over_its_connection_limit_does_not_lock_out_others() {
    let s = server(ServerConfig { max_connections_per_host: 8, ..ServerConfig::default() });
    // Host A takes its 8, then 20 more are closed at once.
    let mut held: Vec<Client> =
        (0..8).map(|_| Client::connect_from(s.addr, "127.0.9.1:0".parse().unwrap()).unwrap()).collect();
    for c in held.iter_mut() {
        assert!(null_works(c), "A's connections within the limit are served");
    }
    let mut refused = 0;
    for _ in 0..20 {
        let mut extra = connect_from(s.addr, "127.0.9.1");
        if closed_within(&mut extra, Duration::from_secs(10)) {
            refused += 1;
        }
    }
    assert_eq!(refused, 20, "connections over the per-host limit are closed");
    assert_eq!(s.stats.snapshot().connections_refused_host_limit, 20);
    // Host B is not affected, and A's first 8 still work.
    let mut b = Client::connect_from(s.addr, "127.0.9.2:0".parse().unwrap()).unwrap();
    assert!(null_works(&mut b), "another host gets in");
    assert!(null_works(&mut held[0]), "A's existing connection still works");
    // Once A closes one, it may open one again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !null_answered_from(s.addr, "127.0.9.1") {
        assert!(Instant::now() < deadline, "A never got a connection back after closing one");
    }
}

#[test]
fn slow_senders_and_silent_connections_are_closed_after_the_record_timeout() {
    let s = server(ServerConfig {
        record_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(3600),
        ..ServerConfig::default()
    });
    // Slowloris: a record mark for a 1000-byte call, then a byte now and then.
    let mut slow = TcpStream::connect(s.addr).unwrap();
    slow.write_all(&(0x8000_0000u32 | 1000).to_be_bytes()).unwrap();
    slow.write_all(&[0; 4]).unwrap();
    // A connection that says nothing at all.
    let mut silent = TcpStream::connect(s.addr).unwrap();
    // A well-behaved client meanwhile, calling every 100 ms for longer than the timeout.
    let mut good = s.client();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        assert!(null_works(&mut good), "the well-behaved client is served throughout");
        let _ = slow.write_all(&[0]);
        std::thread::sleep(Duration::from_millis(100)); // the client's pace, not synchronisation
    }
    assert!(closed_within(&mut slow, Duration::from_secs(10)), "the trickling sender was closed");
    assert!(closed_within(&mut silent, Duration::from_secs(10)), "the silent connection was closed");
    assert!(null_works(&mut good), "the well-behaved client's connection was kept");
    let snap = s.stats.snapshot();
    assert_eq!(snap.connections_closed_slow, 2, "{snap:?}");
    assert_eq!(snap.connections_closed_idle, 0);
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let s = server(ServerConfig { idle_timeout: Duration::from_secs(1), ..ServerConfig::default() });
    let mut c = s.client();
    assert!(null_works(&mut c));
    let mut raw = c.into_stream();
    assert!(closed_within(&mut raw, Duration::from_secs(10)), "an idle connection is closed");
    assert_eq!(s.stats.snapshot().connections_closed_idle, 1);
}
