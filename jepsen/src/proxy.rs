//! A fault-injecting TCP proxy for real-process tests, without root.
//!
//! The harness gives every ordered pair of nodes (`from` dials `to`) its own listening port
//! that forwards to `to`'s real listener, and configures `from` to reach `to` through it.
//! Cutting the link between two nodes then affects exactly those two: while a link is cut
//! its connections are black holes (bytes are read and dropped, as with an iptables DROP
//! rule, so the peers see silence, not a reset); when it heals, every connection that lost
//! bytes is closed (its framing is broken) and the peers reconnect. New connections over a
//! cut link are accepted and black-holed too.
//!
//! A link can also be *degraded* instead of cut: every chunk forwarded over it waits a
//! delay (a slow link), and a lossy link makes a share of its chunks wait a retransmission
//! timeout (what TCP does with a lost segment) and resets a smaller share of connections
//! (what a sender that gives up on a path sees). Bytes are never silently dropped from a
//! connection that stays open: TCP does not do that either.
//!
//! Plain threads, two per connection: the proxy carries a handful of node-to-node links.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// State of one link: whether it is cut and how many times it was (so a connection knows
/// it lost bytes).
#[derive(Default)]
struct LinkState {
    cut: AtomicBool,
    cuts: AtomicU64,
    /// Extra delay per forwarded chunk, milliseconds (0: none).
    delay_ms: AtomicU64,
    /// Per forwarded chunk, per mille: the chance it waits [`RETRANSMIT`] (a lost segment)
    /// and, a tenth as often, that the connection is reset instead (0: not lossy).
    loss_permille: AtomicU64,
    /// Connections accepted so far: numbers each connection's random stream.
    accepted: AtomicU64,
}

/// How long a "lost" chunk waits on a lossy link: TCP's minimum retransmission timeout.
const RETRANSMIT: Duration = Duration::from_millis(200);

/// Degradation of a link that is up (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Degrade {
    pub delay_ms: u64,
    pub loss_permille: u64,
}

/// Proxies for a set of directed links, keyed by `(from, to)` node names.
pub struct Proxy {
    links: BTreeMap<(String, String), (SocketAddr, Arc<LinkState>)>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn new() -> Self {
        Self {
            links: BTreeMap::new(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Opens a listener on 127.0.0.1 (free port) forwarding to `target`; returns its address.
    pub fn add_link(&mut self, from: &str, to: &str, target: SocketAddr) -> io::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let state = Arc::new(LinkState::default());
        self.links
            .insert((from.to_string(), to.to_string()), (addr, state.clone()));
        let stop = self.stop.clone();
        std::thread::spawn(move || accept_loop(listener, target, state, stop));
        Ok(addr)
    }

    /// Cuts (or heals) both directions between `a` and `b`.
    pub fn set_cut(&self, a: &str, b: &str, cut: bool) {
        for key in [(a, b), (b, a)] {
            if let Some((_, s)) = self.links.get(&(key.0.to_string(), key.1.to_string())) {
                if cut && !s.cut.swap(true, Ordering::SeqCst) {
                    s.cuts.fetch_add(1, Ordering::SeqCst);
                } else if !cut {
                    s.cut.store(false, Ordering::SeqCst);
                }
            }
        }
    }

    /// Heals every link: no cut, no degradation.
    pub fn heal_all(&self) {
        for (_, s) in self.links.values() {
            s.cut.store(false, Ordering::SeqCst);
            s.delay_ms.store(0, Ordering::SeqCst);
            s.loss_permille.store(0, Ordering::SeqCst);
        }
    }

    /// Degrades (or, with `Degrade::default()`, restores) both directions between `a` and
    /// `b`; open connections are affected at once.
    pub fn set_degrade(&self, a: &str, b: &str, d: Degrade) {
        for key in [(a, b), (b, a)] {
            if let Some((_, s)) = self.links.get(&(key.0.to_string(), key.1.to_string())) {
                s.delay_ms.store(d.delay_ms, Ordering::SeqCst);
                s.loss_permille
                    .store(d.loss_permille.min(1000), Ordering::SeqCst);
            }
        }
    }

    /// Whether the link `from -> to` is cut.
    pub fn is_cut(&self, from: &str, to: &str) -> bool {
        self.links
            .get(&(from.to_string(), to.to_string()))
            .is_some_and(|(_, s)| s.cut.load(Ordering::SeqCst))
    }
}

impl Default for Proxy {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    state: Arc<LinkState>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let Ok(()) = client.set_nonblocking(false) else {
                    continue;
                };
                // A cut link still accepts: the dialler sees a silent peer, not a refusal.
                let server = if state.cut.load(Ordering::SeqCst) {
                    None
                } else {
                    TcpStream::connect_timeout(&target, Duration::from_secs(1)).ok()
                };
                match server {
                    Some(server) => splice(client, server, state.clone(), stop.clone()),
                    None => {
                        // Target down or link cut: hold the connection open, drop its bytes,
                        // close it once the link is up (then the dialler retries).
                        let (state, stop) = (state.clone(), stop.clone());
                        std::thread::spawn(move || black_hole(client, &state, &stop));
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn black_hole(mut conn: TcpStream, state: &LinkState, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 4096];
    while state.cut.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
    let _ = conn.shutdown(Shutdown::Both);
}

fn splice(client: TcpStream, server: TcpStream, state: Arc<LinkState>, stop: Arc<AtomicBool>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let born = state.cuts.load(Ordering::SeqCst);
    // Each connection, and each direction of it, draws its own stream. (Seeding from the
    // accepted socket's local port gave every connection the proxy's one listening port,
    // so one unlucky first roll reset every connection on the link.)
    let conn = state.accepted.fetch_add(1, Ordering::SeqCst);
    let peer = client.peer_addr().map_or(0, |a| u64::from(a.port()));
    let pairs = [
        (client.try_clone(), server.try_clone()),
        (server.try_clone(), client.try_clone()),
    ];
    for (dir, (from, to)) in pairs.into_iter().enumerate() {
        let (Ok(from), Ok(to)) = (from, to) else {
            return;
        };
        let (state, stop) = (state.clone(), stop.clone());
        let mut rng = XorShift::for_connection(conn, peer, dir as u64);
        std::thread::spawn(move || pump(from, to, &state, &stop, born, &mut rng));
    }
}

/// Copies `from` to `to` while the link is up; drops bytes while it is cut; closes both
/// ends once a cut that happened during this connection's life has healed.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    state: &LinkState,
    stop: &AtomicBool,
    born: u64,
    rng: &mut XorShift,
) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let cut = state.cut.load(Ordering::SeqCst);
        if !cut && state.cuts.load(Ordering::SeqCst) != born {
            break;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                match degraded(state, rng) {
                    Some(wait) => std::thread::sleep(wait),
                    None => break, // a reset on a lossy link
                }
                if !state.cut.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// How long a chunk waits on this link before it is forwarded; `None`: reset the connection.
fn degraded(state: &LinkState, rng: &mut XorShift) -> Option<Duration> {
    let mut wait = Duration::from_millis(state.delay_ms.load(Ordering::SeqCst));
    let loss = state.loss_permille.load(Ordering::SeqCst);
    if loss > 0 {
        let roll = rng.next() % 10_000;
        if roll < loss {
            return None; // a tenth of the lossy share: loss * 10 / 10_000
        }
        if roll < loss * 10 {
            wait += RETRANSMIT;
        }
    }
    Some(wait)
}

/// A tiny per-connection random stream for lossy links (real-process tests are not
/// replayable anyway: the OS schedules them).
struct XorShift(u64);

impl XorShift {
    /// The stream of connection number `conn` (dialled from port `peer`), direction `dir`.
    /// The inputs are small and close together, so they are spread by SplitMix64 first:
    /// xorshift's first outputs from a small state are nearly the state itself.
    fn for_connection(conn: u64, peer: u64, dir: u64) -> Self {
        let mut z = (conn << 17 ^ peer << 1 ^ dir).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = c.read(&mut buf) {
                        if n == 0 || c.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn roundtrip(addr: SocketAddr) -> io::Result<Vec<u8>> {
        let mut c = TcpStream::connect(addr)?;
        c.set_read_timeout(Some(Duration::from_millis(500)))?;
        c.write_all(b"ping")?;
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf)?;
        Ok(buf.to_vec())
    }

    #[test]
    fn each_connection_and_direction_draws_its_own_losses() {
        // On a fully lossy link a connection's first chunk resets it 1 time in 10. Streams
        // shared between connections (or directions) would make that all or nothing.
        let state = LinkState::default();
        state.loss_permille.store(1000, Ordering::SeqCst);
        let peer = 40_000;
        for dir in 0..2 {
            let resets = (0..1000)
                .filter(|&conn| {
                    let mut rng = XorShift::for_connection(conn, peer, dir);
                    degraded(&state, &mut rng).is_none()
                })
                .count();
            assert!((50..=150).contains(&resets), "dir {dir}: {resets} of 1000");
        }
        let first = |conn, peer, dir| XorShift::for_connection(conn, peer, dir).next();
        assert_ne!(first(0, peer, 0), first(0, peer, 1));
        assert_ne!(first(0, peer, 0), first(1, peer, 0));
        assert_ne!(first(0, peer, 0), first(0, peer + 1, 0));
    }

    #[test]
    fn slow_and_lossy_links_delay_and_reset_but_never_drop() {
        let target = echo_server();
        let mut p = Proxy::new();
        let addr = p.add_link("a", "b", target).unwrap();
        p.set_degrade(
            "a",
            "b",
            Degrade {
                delay_ms: 150,
                loss_permille: 0,
            },
        );
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let t = std::time::Instant::now();
        c.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        // One chunk each way, each held 150 ms.
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        // Fully lossy: every chunk waits a retransmission timeout or resets the connection;
        // what arrives is never corrupted.
        p.set_degrade(
            "a",
            "b",
            Degrade {
                delay_ms: 0,
                loss_permille: 1000,
            },
        );
        let (mut ok, mut reset) = (0, 0);
        for _ in 0..12 {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            c.write_all(b"pong").unwrap();
            let mut buf = [0u8; 4];
            match c.read_exact(&mut buf) {
                Ok(()) => {
                    assert_eq!(&buf, b"pong");
                    ok += 1;
                }
                Err(_) => reset += 1,
            }
        }
        assert!(ok > 0, "a lossy link still carries data");
        assert_eq!(ok + reset, 12);
        // Healed: no delay.
        p.heal_all();
        let t = std::time::Instant::now();
        assert_eq!(roundtrip(addr).unwrap(), b"ping");
        assert!(t.elapsed() < Duration::from_millis(150));
    }

    #[test]
    fn forwards_cuts_and_heals() {
        let target = echo_server();
        let mut p = Proxy::new();
        let addr = p.add_link("a", "b", target).unwrap();
        assert_eq!(roundtrip(addr).unwrap(), b"ping");
        // An open connection goes silent when the link is cut...
        let mut open = TcpStream::connect(addr).unwrap();
        open.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        open.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        open.read_exact(&mut one).unwrap();
        p.set_cut("b", "a", true);
        assert!(p.is_cut("a", "b"));
        open.write_all(b"y").unwrap();
        assert!(
            open.read_exact(&mut one).is_err(),
            "a cut link must drop bytes"
        );
        // ...and so is a new one.
        assert!(roundtrip(addr).is_err());
        p.set_cut("a", "b", false);
        // After the heal, the connection that lost bytes is closed; new ones work.
        std::thread::sleep(Duration::from_millis(300));
        let mut rest = Vec::new();
        let _ = open.read_to_end(&mut rest);
        assert!(rest.is_empty());
        assert_eq!(roundtrip(addr).unwrap(), b"ping");
    }
}
