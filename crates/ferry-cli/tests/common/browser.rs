//! Headless Chromium for the console tests, driven through Debian's
//! `chromedriver` with the W3C WebDriver protocol (JSON over HTTP): start a
//! browser, open pages, type and click like a user, read what the page shows
//! and save screenshots under `target/console-screenshots/`.
//!
//! CI installs `chromium` and `chromium-driver` (`.ci/run`); without them the
//! tests fail, unless `FERRY_SKIP_BROWSER_TESTS=1` says to skip them.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use base64::Engine;
use ferry_testkit::eventually;
use ferry_testkit::net::free_port;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const SKIP_ENV: &str = "FERRY_SKIP_BROWSER_TESTS";

/// The W3C name of an element reference in WebDriver's JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless Chromium session; the driver (and with it the browser) is
/// killed when this is dropped.
pub struct Browser {
    driver: Child,
    base: String,
    http: Client<HttpConnector, Full<bytes::Bytes>>,
    shots: PathBuf,
}

/// Whether the browser tests can run here: `false` (after a loud message)
/// only when Chromium is missing and `FERRY_SKIP_BROWSER_TESTS=1`.
pub fn available() -> bool {
    let present = std::path::Path::new(CHROMIUM).exists() && std::path::Path::new(CHROMEDRIVER).exists();
    if present {
        return true;
    }
    if std::env::var(SKIP_ENV).as_deref() == Ok("1") {
        eprintln!(
            "\n!!! SKIPPING the console's browser test: {CHROMIUM} or {CHROMEDRIVER} is missing and {SKIP_ENV}=1 !!!\n"
        );
        return false;
    }
    panic!(
        "the console's browser test needs {CHROMIUM} and {CHROMEDRIVER} (Debian: apt-get install chromium chromium-driver; \
         .ci/run installs them); set {SKIP_ENV}=1 to skip it"
    );
}

impl Browser {
    /// Start chromedriver and a headless Chromium session. Screenshots go to
    /// `target/console-screenshots/<test>/`.
    pub async fn start(test: &str) -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = Client::builder(TokioExecutor::new()).build_http();
        let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/console-screenshots")
            .join(test);
        std::fs::create_dir_all(&shots).unwrap();
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            http,
            shots,
        };
        eventually(20, "chromedriver to be ready", || {
            let b = &browser;
            async move {
                b.call("GET", "/status", None)
                    .await
                    .ok()
                    .filter(|v| v["ready"] == true)
            }
        })
        .await;
        let session = browser
            .call(
                "POST",
                "/session",
                Some(json!({"capabilities": {"alwaysMatch": {
                    "browserName": "chrome",
                    // The test hubs' certificates come from their own CAs.
                    "acceptInsecureCerts": true,
                    "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--window-size=1280,860", "--ignore-certificate-errors",
                    ]},
                }}})),
            )
            .await
            .expect("a Chromium session");
        let id = session["sessionId"].as_str().expect("session id").to_string();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    /// A WebDriver command: its `value`, or the driver's error message.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from(body)))
            .unwrap();
        let resp = self.http.request(req).await.map_err(|e| e.to_string())?;
        let ok = resp.status().is_success();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        if ok {
            Ok(v["value"].clone())
        } else {
            Err(v["value"]["message"]
                .as_str()
                .unwrap_or("WebDriver error")
                .to_string())
        }
    }

    /// Open `url` (it may also be the same page with another fragment).
    pub async fn open(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url})))
            .await
            .expect("navigate");
    }

    async fn element(&self, css: &str) -> Result<String, String> {
        let v = self
            .call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await?;
        Ok(v[ELEMENT].as_str().unwrap_or_default().to_string())
    }

    /// Wait for the element `css` and type `text` into it, as keystrokes.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = eventually(10, &format!("{css} to type into"), || async {
            self.element(css).await.ok()
        })
        .await;
        self.call("POST", &format!("/element/{id}/clear"), Some(json!({})))
            .await
            .expect("clear");
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await
        .expect("type");
    }

    /// Wait for the element `css` and click it.
    pub async fn click(&self, css: &str) {
        eventually(10, &format!("{css} to click"), || async {
            let id = self.element(css).await.ok()?;
            self.call("POST", &format!("/element/{id}/click"), Some(json!({})))
                .await
                .ok()
        })
        .await;
    }

    /// Run `script` in the page (a function body; `arguments` are `args`).
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("running {script}: {e}"))
    }

    /// The text the element `css` shows, or `None` while it is not there.
    pub async fn text(&self, css: &str) -> Option<String> {
        let v = self
            .run(
                "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;",
                json!([css]),
            )
            .await;
        v.as_str().map(String::from)
    }

    /// Wait until the element `css` shows text that `ok` accepts; returns it.
    /// On timeout the failure shows what the element showed last, and a
    /// screenshot `failed.png` shows the page.
    pub async fn wait_text(&self, secs: u64, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let text = self.text(css).await;
            if let Some(t) = text.as_deref().filter(|t| ok(t)) {
                return t.to_string();
            }
            if tokio::time::Instant::now() > deadline {
                let shot = self.screenshot("failed").await;
                panic!(
                    "timed out after {secs}s waiting for {what}; {css} showed {text:?} (screenshot {})",
                    shot.display()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Everything the page holds (its markup, not only what shows).
    pub async fn source(&self) -> String {
        self.run("return document.documentElement.outerHTML;", json!([]))
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Save a screenshot of the window as `<name>.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.call("GET", "/screenshot", None).await.expect("screenshot");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap_or_default())
            .expect("PNG as base64");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Browser {
    /// End the session (closing Chromium) and stop the driver.
    pub async fn quit(self) {
        let _ = self.call("DELETE", "", None).await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that panicked never reached `quit`: end the session over a
        // plain blocking request, as chromedriver leaves its browser running
        // when it is killed.
        if let Some((host, path)) = self.base.strip_prefix("http://").and_then(|r| r.split_once('/')) {
            if let Ok(mut tcp) = std::net::TcpStream::connect(host) {
                use std::io::{Read, Write};
                let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let request =
                    format!("DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                if tcp.write_all(request.as_bytes()).is_ok() {
                    let _ = tcp.read_to_end(&mut Vec::new());
                }
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
