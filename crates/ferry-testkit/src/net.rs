//! Loopback addresses, plain HTTP reads of the endpoints agents serve
//! (`/metrics`, `/healthz`, `/readyz`), and a [`FrontProxy`] that stays put
//! while the hub behind it moves.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback port nobody listens on now, below the kernel's ephemeral range
/// (one the kernel hands out for port 0 may be taken again before it is bound).
pub use ferry_hub::storage::testing::free_port;

/// A loopback address (`127.0.0.1:<port>`) with a port nobody listens on now.
pub fn free_address() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// `GET http://addr/path`: status code and body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (code, body)
}

/// `GET http://addr/path` (blocking): the whole response, if it answered.
pub fn response_of(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    Some(response)
}

/// `GET http://addr/path` (blocking): the status code, if it answered.
pub fn status_of(addr: &str, path: &str) -> Option<u16> {
    response_of(addr, path)?.split_whitespace().nth(1)?.parse().ok()
}

/// A loopback address that forwards every TCP connection to a target that can
/// change, as kcp's front proxy stays where clients' kubeconfigs point while the
/// shard behind it moves. TLS passes through: clients check the target's
/// certificate (a hub's names `127.0.0.1`, whatever its port).
pub struct FrontProxy {
    addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    task: tokio::task::JoinHandle<()>,
}

impl FrontProxy {
    /// A proxy on a free loopback port, forwarding to `target`.
    pub async fn to(target: SocketAddr) -> FrontProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the front proxy");
        let addr = listener.local_addr().expect("the front proxy's address");
        let target = Arc::new(Mutex::new(target));
        let current = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let to = *current.lock().expect("the front proxy's target");
                tokio::spawn(async move {
                    // A target that is down refuses, as the proxy's client then sees.
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        FrontProxy { addr, target, task }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// New connections go to `target` from now on (open ones stay where they are).
    pub fn point_at(&self, target: SocketAddr) {
        *self.target.lock().expect("the front proxy's target") = target;
    }

    /// `config` reaching its server through this proxy: the same scheme, path and
    /// credentials, the proxy's address.
    pub fn config_through(&self, mut config: kube::Config) -> kube::Config {
        let url = &config.cluster_url;
        let path = url.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let scheme = url.scheme_str().unwrap_or("https");
        config.cluster_url = format!("{scheme}://{}{path}", self.addr)
            .parse()
            .expect("the URL through the front proxy");
        config
    }
}

impl Drop for FrontProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
