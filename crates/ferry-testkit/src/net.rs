//! Loopback addresses and plain HTTP reads of the endpoints agents serve
//! (`/metrics`, `/healthz`, `/readyz`).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

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
