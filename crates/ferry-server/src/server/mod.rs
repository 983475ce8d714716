//! Starting a hub: storage, certificates, the admin kubeconfig, and the HTTPS
//! listener (HTTP/2 and HTTP/1.1 through ALPN).

pub mod data_dir;
mod drain;

// The PKI is its own module (authentication reads client certificates
// below the server); callers still find it under its old path.
pub use crate::tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

use crate::controller::{ControllerContext, Lease, ObservedWrites};
use crate::hub::{Extensions, Hub, HubConfig};
use crate::status::ApiError;
use crate::storage::{
    Backend, Etcd, EtcdOptions, HistoryLimits, MemoryBackend, SqliteBackend, Store, DEFAULT_HISTORY,
    DEFAULT_HISTORY_BYTES,
};

/// How to run a hub.
#[derive(Debug, Clone)]
pub struct HubOptions {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Extra names and addresses for the serving certificate.
    pub hosts: Vec<String>,
    /// User-provided serving certificate and key (PEM) instead of the generated ones.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub max_in_flight: usize,
    /// Events retained for watches to resume from.
    pub watch_history: usize,
    /// Keep objects in memory only (benchmark baselines, throwaway demos).
    pub ephemeral: bool,
    /// Keep objects in etcd instead of `<data_dir>/hub.db` (`--storage etcd`).
    /// Several hubs on one etcd prefix serve the same objects.
    pub etcd: Option<EtcdOptions>,
    /// On etcd: how long the hub running the built-in controllers keeps
    /// their Lease without renewing it before another hub takes over.
    pub controllers_lease_duration: Duration,
    /// Run the mailbox controller (one mailbox workspace per SyncTarget).
    pub mailbox_controller: bool,
    /// Run KubeStellar's where-resolver and placement translator
    /// (EdgePlacements fill mailbox workspaces).
    pub placement_translator: bool,
    /// kube-apiserver's static token CSV (`token,user,uid,"group1,group2"`).
    pub token_auth_file: Option<PathBuf>,
    /// Also serve plain HTTP on `127.0.0.1:<port>` (0 picks a free port).
    /// Requests there are authenticated like HTTPS ones, minus client
    /// certificates; the listener is never bound beyond loopback.
    pub insecure_port: Option<u16>,
    /// A connection that has not completed its TLS handshake this long after
    /// it was accepted is closed.
    pub tls_handshake_timeout: Duration,
    /// A connection that has not sent its first request's headers in full
    /// this long after it was accepted (after its TLS handshake) is closed.
    pub request_header_timeout: Duration,
    /// An HTTP/1.1 connection is closed when its next request's headers have
    /// not arrived in full this long after the previous response.
    pub idle_timeout: Duration,
    /// `--service-cluster-ip-range` and `--service-node-port-range`.
    pub service_ranges: crate::service_ranges::ServiceRanges,
    /// `--sync-target-heartbeat-threshold`: a SyncTarget whose syncer has
    /// not sent a heartbeat for this long is `HeartbeatHealthy=False`.
    pub sync_target_heartbeat_threshold: Duration,
    /// Create kcp's `root:compute` (the `kubernetes` APIExport of
    /// Deployments, Services and Ingresses) at start unless it exists.
    /// Off by default for embedders; `ferry hub` turns it on.
    pub compute_workspace: bool,
    /// Serve the web console at `/console/` (`--disable-console` turns it off).
    pub console: bool,
}

/// kube-apiserver's `ReadHeaderTimeout`; Go's `http.Server` bounds the TLS
/// handshake by it too.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(32);
/// kube-apiserver's `IdleTimeout`: the keep-alive timeout of Go's (and
/// hyper's) HTTP clients, so a client drops an idle connection no later
/// than the hub does.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl HubOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        HubOptions {
            data_dir: data_dir.into(),
            listen: "127.0.0.1:6443".parse().expect("valid address"),
            hosts: Vec::new(),
            tls_cert_file: None,
            tls_private_key_file: None,
            max_in_flight: 400,
            watch_history: DEFAULT_HISTORY,
            ephemeral: false,
            etcd: None,
            controllers_lease_duration: crate::replicas::DEFAULT_LEASE_DURATION,
            mailbox_controller: true,
            placement_translator: true,
            token_auth_file: None,
            insecure_port: None,
            tls_handshake_timeout: DEFAULT_CONNECTION_TIMEOUT,
            request_header_timeout: DEFAULT_CONNECTION_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            service_ranges: Default::default(),
            sync_target_heartbeat_threshold: crate::synctarget::DEFAULT_HEARTBEAT_THRESHOLD,
            compute_workspace: false,
            console: true,
        }
    }
}

/// A hub that is serving.
pub struct RunningHub {
    pub hub: Arc<Hub>,
    /// `https://127.0.0.1:PORT`
    pub url: String,
    pub addr: SocketAddr,
    pub kubeconfig_path: PathBuf,
    pub ca_pem: String,
    pub admin_token: String,
    /// `http://127.0.0.1:PORT` when a plain-HTTP loopback listener was asked for.
    pub insecure_url: Option<String>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// The controllers that follow the store's watch, stopped with the hub.
    controllers: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningHub {
    /// Stop accepting connections and wait for the listener to close and the
    /// controllers to stop writing.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        for c in self.controllers {
            let _ = c.await;
        }
    }
}

/// What kcp's tenancy layer, kcp TMC and KubeStellar add to the API server
/// of every hub: kcp's kinds served built in and their strategies (and
/// KubeStellar's), the Workspaces that make logical clusters, the resources
/// kcp's APIBindings serve, TMC's reserved labels and annotations, and
/// kcp's virtual workspaces.
pub fn extensions() -> Extensions {
    let mut extensions = Extensions::default();
    extensions.insert(crate::kinds::builtin::resources());
    extensions.insert(crate::kinds::table());
    extensions.insert(crate::kinds::reserved::metadata());
    extensions.insert(crate::workspace::objects());
    extensions.insert(crate::virtual_workspace::kinds());
    extensions.insert(Arc::new(
        crate::virtual_workspace::apiexport::ExportViews::default(),
    ));
    extensions.insert(Arc::new(crate::virtual_workspace::syncer::SyncerViews::default()));
    crate::apis::install(&mut extensions);
    extensions
}

fn admin_token(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("admin.token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        if !t.trim().is_empty() {
            return Ok(t.trim().to_string());
        }
    }
    use rand::Rng;
    let bytes: [u8; 24] = rand::rng().random();
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(&path, token.as_bytes())?;
    Ok(token)
}

/// The key that signs ServiceAccount tokens, kept in the data directory so
/// tokens survive restarts. Deleting the file revokes every token.
fn service_account_key(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    let path = data_dir.join("pki").join("service-account.key");
    if let Ok(hex) = std::fs::read_to_string(&path) {
        let hex = hex.trim();
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
            .collect();
        match bytes {
            Some(b) if b.len() >= 32 => return Ok(b),
            _ => anyhow::bail!(
                "{} is not a hex-encoded key of at least 32 bytes; delete it to generate a new one (this revokes every ServiceAccount token)",
                path.display()
            ),
        }
    }
    use rand::Rng;
    let key: [u8; 32] = rand::rng().random();
    std::fs::create_dir_all(data_dir.join("pki"))?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    write_private(&path, hex.as_bytes())?;
    Ok(key.to_vec())
}

/// What every hub on one etcd prefix must share so that any of them can
/// serve any client: the CA (clients trust one CA; each hub issues its own
/// serving certificate from it for its own addresses), the admin token and
/// the key that signs ServiceAccount tokens. The first hub to start on the
/// prefix puts its own into etcd (`<prefix>/hub/identity`); every hub then
/// writes what etcd holds into its data directory. Like kube-apiserver's
/// Secrets, these are readable by whoever can read the etcd prefix: protect
/// etcd with `--etcd-cafile/--etcd-certfile/--etcd-keyfile`.
async fn share_identity(etcd: &Etcd, data_dir: &Path) -> anyhow::Result<()> {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq)]
    struct Identity {
        ca_cert: String,
        ca_key: String,
        admin_token: String,
        service_account_key: String,
    }
    let pki = data_dir.join("pki");
    let read = |p: PathBuf| std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()));
    tls::ensure_certs(data_dir, &[])?;
    admin_token(data_dir)?;
    service_account_key(data_dir)?;
    let ours = Identity {
        ca_cert: read(pki.join("ca.crt"))?,
        ca_key: read(pki.join("ca.key"))?,
        admin_token: read(data_dir.join("admin.token"))?,
        service_account_key: read(pki.join("service-account.key"))?,
    };
    let stored = etcd
        .put_once("hub/identity", serde_json::to_vec(&ours)?)
        .await
        .context("sharing the hub's CA and tokens through etcd")?;
    let shared: Identity = serde_json::from_slice(&stored).with_context(|| {
        format!(
            "{}/hub/identity in etcd is not a hub identity; delete it to let this hub write its own",
            etcd.prefix()
        )
    })?;
    if shared != ours {
        tracing::info!(
            "using the CA, admin token and ServiceAccount signing key another hub stored in etcd under {}",
            etcd.prefix()
        );
        write_private(&pki.join("ca.crt"), shared.ca_cert.as_bytes())?;
        write_private(&pki.join("ca.key"), shared.ca_key.as_bytes())?;
        write_private(&data_dir.join("admin.token"), shared.admin_token.as_bytes())?;
        write_private(
            &pki.join("service-account.key"),
            shared.service_account_key.as_bytes(),
        )?;
    }
    Ok(())
}

/// This hub among the hubs on one etcd: host name, serving address and a
/// random suffix (a restarted hub is a new holder).
fn replica_identity(addr: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "hub".into());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}_{addr}_{}", &suffix[..8])
}

/// Write a file readable only by its owner.
pub fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    // The mode above applies only to a new file; one left by an older run keeps its own.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making {} private", path.display()))?;
    }
    f.write_all(contents)?;
    Ok(())
}

/// The built-in controllers as the server runs them. The layer above the
/// server provides them (the `ferry-hub` crate assembles the server with
/// `ferry-controllers`, `ferry-kubestellar` and `ferry-tmc`), so the server
/// never depends on a controller.
pub trait Controllers: Send + Sync + 'static {
    /// The controllers' part of a write ([`crate::controller::WriteObserver`]),
    /// installed before [`Controllers::bootstrap`].
    fn write_observer(&self) -> Arc<dyn crate::controller::WriteObserver>;

    /// Before the hub serves: create what a fresh cluster has, as `opts`
    /// asks (e.g. the compute workspace).
    fn bootstrap<'a>(&'a self, ctx: &'a ControllerContext, opts: &'a HubOptions) -> BoxFuture<'a, ()>;

    /// Start the controllers that follow the store's watch, as `opts` asks;
    /// they stop when `ctx`'s lease is lost. With etcd, the server calls this
    /// each time this hub wins the controllers' Lease.
    fn spawn(&self, ctx: &ControllerContext, opts: &HubOptions) -> Vec<JoinHandle<()>>;
}

/// Start a hub with `opts` running `controllers`; returns once it is
/// accepting connections.
pub async fn start_with(opts: HubOptions, controllers: Arc<dyn Controllers>) -> anyhow::Result<RunningHub> {
    let db = opts.data_dir.join("hub.db");
    let local_db = !opts.ephemeral && opts.etcd.is_none();
    data_dir::prepare(&opts.data_dir, local_db.then_some(db.as_path()))?;
    let store = match &opts.etcd {
        Some(etcd_opts) => {
            let etcd = Etcd::connect(etcd_opts).await?;
            share_identity(&etcd, &opts.data_dir).await?;
            let limits = HistoryLimits {
                events: opts.watch_history,
                bytes: DEFAULT_HISTORY_BYTES,
            };
            Store::open_etcd(etcd, limits).await?
        }
        None => {
            let backend: Box<dyn Backend> = if opts.ephemeral {
                Box::new(MemoryBackend)
            } else {
                Box::new(SqliteBackend::open(&db).with_context(|| format!("opening {}", db.display()))?)
            };
            Store::open(backend, opts.watch_history)?
        }
    };
    let token = admin_token(&opts.data_dir)?;
    let static_tokens = match &opts.token_auth_file {
        Some(path) => crate::auth::token_file::load(path)?,
        None => Vec::new(),
    };
    let hub = Hub::with_extensions(
        store,
        HubConfig {
            admin_token: token.clone(),
            max_in_flight: opts.max_in_flight,
            static_tokens,
            service_account_key: service_account_key(&opts.data_dir)?,
            service_ranges: opts.service_ranges.clone(),
        },
        extensions(),
    );

    let listener = TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("listening on {}", opts.listen))?;
    let addr = listener.local_addr()?;
    let mut hosts = opts.hosts.clone();
    hosts.push(addr.ip().to_string());
    let material = tls::ensure_certs(&opts.data_dir, &hosts)?;
    hub.security.set_ca(material.clone());
    let (cert, key) = match (&opts.tls_cert_file, &opts.tls_private_key_file) {
        (Some(c), Some(k)) => tls::load_user_certs(c, k)?,
        (None, None) => (
            material.serving_cert_pem.clone(),
            material.serving_key_pem.clone(),
        ),
        _ => anyhow::bail!("--tls-cert-file and --tls-private-key-file must be given together"),
    };
    let server_config = tls::server_config(&cert, &key, Some(&material.ca_cert_pem))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));

    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let url = format!("https://{host}:{}", addr.port());
    hub.set_external_url(url.clone());
    hub.set_write_hooks(Arc::new(ObservedWrites(controllers.write_observer())));
    controllers
        .bootstrap(&ControllerContext::new(hub.clone()), &opts)
        .await;

    let kubeconfig_path = opts.data_dir.join("admin.kubeconfig");
    let kubeconfig =
        crate::kubeconfig::admin_kubeconfig(&url, &material.ca_cert_pem, &token, crate::workspace::ROOT);
    write_private(&kubeconfig_path, kubeconfig.as_bytes())?;

    let limit = Arc::new(Semaphore::new(opts.max_in_flight.max(1)));
    let metrics = Arc::new(crate::api::metrics::HubMetrics::of(&hub));
    let app = crate::api::router_with(hub.clone(), metrics.clone());
    // The console's files need no credentials: the page signs in afterwards.
    let app = if opts.console {
        app.merge(ferry_console::router())
    } else {
        app
    };
    let capped = hub.clone();
    let app = app.layer(axum::middleware::from_fn(move |req, next| {
        in_flight(capped.clone(), metrics.clone(), limit.clone(), req, next)
    }));
    let (shutdown, mut stop) = watch::channel(false);
    let spawn_opts = opts.clone();
    let built_in = move |hub: &Arc<Hub>, stop: watch::Receiver<bool>| {
        controllers.spawn(
            &ControllerContext::new(hub.clone()).with_lease(Lease::until(stop)),
            &spawn_opts,
        )
    };
    let controllers = if opts.etcd.is_some() {
        // Other hubs on the same etcd write too: apply what their writes
        // change in this hub's memory, and run the controllers only while
        // this hub holds their Lease.
        let elected = hub.clone();
        vec![
            crate::follow::spawn(
                ControllerContext::new(hub.clone()).with_lease(Lease::until(stop.clone())),
                crate::replicas::PeerWrites,
            ),
            crate::replicas::spawn_elected(
                hub.clone(),
                stop.clone(),
                replica_identity(addr),
                opts.controllers_lease_duration,
                move |stop| built_in(&elected, stop),
            ),
        ]
    } else {
        built_in(&hub, stop.clone())
    };
    let (handshake_timeout, timeouts) = (
        opts.tls_handshake_timeout,
        HttpTimeouts {
            first_request: opts.request_header_timeout,
            idle: opts.idle_timeout,
        },
    );
    let insecure_url = match opts.insecure_port {
        Some(port) => {
            let plain = TcpListener::bind(("127.0.0.1", port))
                .await
                .with_context(|| format!("listening for plain HTTP on 127.0.0.1:{port}"))?;
            let url = format!("http://{}", plain.local_addr()?);
            tokio::spawn(serve_plain(plain, app.clone(), timeouts, stop.clone()));
            Some(url)
        }
        None => None,
    };
    let task = tokio::spawn(async move {
        let mut backoff = AcceptBackoff::default();
        loop {
            let Some(tcp) = accept(&listener, &mut backoff, &mut stop).await else {
                return;
            };
            let acceptor = acceptor.clone();
            let app = app.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(t)) => t,
                    Ok(Err(e)) => {
                        tracing::debug!("TLS handshake failed: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake not completed within {handshake_timeout:?}; closing");
                        return;
                    }
                };
                // The verified client certificate (if any) goes with every
                // request on this connection, for authentication.
                let peer = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| crate::auth::PeerCertificate(Arc::new(c.to_vec())));
                let app = tower::ServiceExt::map_request(app, move |mut req: Request<axum::body::Body>| {
                    if let Some(p) = &peer {
                        req.extensions_mut().insert(p.clone());
                    }
                    req
                });
                serve_connection(tls, app, timeouts, stop).await;
            });
        }
    });
    Ok(RunningHub {
        hub,
        url,
        addr,
        kubeconfig_path,
        ca_pem: material.ca_cert_pem,
        admin_token: token,
        insecure_url,
        shutdown,
        task,
        controllers,
    })
}

/// The plain-HTTP loopback listener: the same API, no TLS, no client certificates.
async fn serve_plain(
    listener: TcpListener,
    app: axum::Router,
    timeouts: HttpTimeouts,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = AcceptBackoff::default();
    while let Some(tcp) = accept(&listener, &mut backoff, &mut stop).await {
        tokio::spawn(serve_connection(tcp, app.clone(), timeouts, stop.clone()));
    }
}

/// How long a connection may take to send request headers.
#[derive(Debug, Clone, Copy)]
struct HttpTimeouts {
    /// From the start of HTTP on the connection to its first request's
    /// headers (any protocol: this also bounds choosing one).
    first_request: Duration,
    /// HTTP/1.1: from one response to the next request's headers.
    idle: Duration,
}

/// How long the accept loop pauses after `accept` fails (typically out of
/// file descriptors, EMFILE): 5 ms, doubling up to 1 s, reset by a success
/// — as Go's `http.Server` does. Retrying at once would spin a CPU while
/// nothing can be accepted; exiting would stop the hub for good.
#[derive(Default)]
struct AcceptBackoff {
    delay: Option<Duration>,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    fn failed(&mut self) -> Duration {
        let next = self.delay.map_or(Self::FIRST, |d| (d * 2).min(Self::MAX));
        self.delay = Some(next);
        next
    }
}

/// The next connection, pausing after failures (see [`AcceptBackoff`]);
/// `None` once the hub stops.
async fn accept(
    listener: &TcpListener,
    backoff: &mut AcceptBackoff,
    stop: &mut watch::Receiver<bool>,
) -> Option<tokio::net::TcpStream> {
    loop {
        let failed = tokio::select! {
            _ = stop.changed() => return None,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    backoff.delay = None;
                    let _ = tcp.set_nodelay(true);
                    return Some(tcp);
                }
                Err(e) => e,
            },
        };
        let pause = backoff.failed();
        // One line per failure at most every second while failing, not a flood.
        if pause == AcceptBackoff::FIRST || pause == AcceptBackoff::MAX {
            tracing::warn!("accepting a connection failed: {failed}; retrying in {pause:?}");
        }
        tokio::select! {
            _ = stop.changed() => return None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Serve HTTP/1.1 or HTTP/2 on one connection until it ends or the hub
/// stops, within `timeouts`: the first request's deadline is kept here, since
/// hyper's protocol detection has none; hyper keeps the HTTP/1.1 idle one
/// (its header timer also runs while a keep-alive connection waits). Every
/// request body is read to its end even when no handler reads it, and an
/// HTTP/2 answer goes out once its request's body has ended, so an early
/// answer is never cut off by a stream reset ([`drain`]).
async fn serve_connection<I, S>(io: I, app: S, timeouts: HttpTimeouts, mut stop: watch::Receiver<bool>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<Request<axum::body::Body>, Response = Response, Error = std::convert::Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let (first_request, first_seen) = tokio::sync::oneshot::channel::<()>();
    let first_request = Arc::new(parking_lot::Mutex::new(Some(first_request)));
    let app = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        if let Some(tx) = first_request.lock().take() {
            let _ = tx.send(());
        }
        let http2 = req.version() == axum::http::Version::HTTP_2;
        let (parts, body) = req.into_parts();
        let (body, ended) = drain::DrainOnDrop::new(body);
        let req = Request::from_parts(parts, axum::body::Body::new(body));
        let answer = tower::ServiceExt::oneshot(app.clone(), req);
        async move {
            let response = answer.await?;
            if http2 {
                ended.wait(drain::ANSWER_WAIT).await;
            }
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let service = TowerToHyperService::new(app);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.idle.max(timeouts.first_request));
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let header_timeout = timeouts.first_request;
    let first_deadline = tokio::time::sleep(header_timeout);
    tokio::pin!(first_deadline);
    let mut first_seen = Some(first_seen);
    loop {
        tokio::select! {
            r = &mut conn => {
                if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            _ = stop.changed() => return,
            seen = async { first_seen.as_mut().expect("polled only while waiting").await }, if first_seen.is_some() => {
                first_seen = None;
                // A dropped sender means the connection closed; `conn` says so next.
                let _ = seen;
            }
            _ = &mut first_deadline, if first_seen.is_some() => {
                tracing::debug!("no request headers within {header_timeout:?}; closing the connection");
                return;
            }
        }
    }
}

/// Cap on requests served at once. Watches are long-running and exempt, as in
/// kube-apiserver; everything else past the cap gets 429 with Retry-After,
/// counted in `metrics` as kube-apiserver counts the requests its priority and
/// fairness rejects (`apiserver_request_total{code="429"}`).
async fn in_flight(
    hub: Arc<Hub>,
    metrics: Arc<crate::api::metrics::HubMetrics>,
    limit: Arc<Semaphore>,
    req: Request,
    next: Next,
) -> Response {
    let is_watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    if is_watch {
        return next.run(req).await;
    }
    match limit.try_acquire() {
        Ok(_permit) => next.run(req).await,
        Err(_) => {
            let shape = crate::api::metrics::shape_of(&hub, &req);
            let refused =
                ApiError::too_many_requests("too many requests in flight; retry shortly", 1).into_response();
            metrics.answered(shape, 429, Duration::ZERO, refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_back_off_from_5ms_to_1s() {
        let mut backoff = AcceptBackoff::default();
        let pauses: Vec<u128> = (0..10).map(|_| backoff.failed().as_millis()).collect();
        assert_eq!(pauses, vec![5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        backoff.delay = None; // a success
        assert_eq!(backoff.failed(), AcceptBackoff::FIRST);
    }
}
