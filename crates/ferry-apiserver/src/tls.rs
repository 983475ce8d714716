//! CA and serving certificate generation, client-certificate signing and the
//! rustls server config.
//!
//! The hub keeps its PKI under `<data_dir>/pki`: a long-lived CA (`ca.crt`,
//! `ca.key`) and a serving certificate signed by it (`serving.crt`,
//! `serving.key`). The CA is generated once and always reused, so kubeconfigs
//! written earlier stay valid; the serving certificate is regenerated when it
//! no longer covers a requested host or is close to expiry.
//!
//! rcgen models a subject as a map (one value per attribute type), but
//! Kubernetes reads a client certificate's groups from *every* `O` attribute.
//! Certificates with several groups (and CSR-signed certificates, whose
//! subject is copied verbatim) therefore get their subject spliced in at the
//! DER level and are re-signed with the CA key; see [`replace_subject`].

use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, ensure, Context};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, CustomExtension, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
    SigningKey,
};
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;

/// Common name of the hub's self-generated CA.
pub const CA_COMMON_NAME: &str = "ferry-hub-ca";
/// Common name of the serving certificate.
const SERVING_COMMON_NAME: &str = "ferry-hub";
const CA_VALIDITY_DAYS: i64 = 3650;
const SERVING_VALIDITY_DAYS: i64 = 366;
/// A serving certificate expiring within this window is regenerated at start-up.
const SERVING_RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// Hosts every serving certificate covers, besides the requested ones.
const DEFAULT_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// ASN.1 OIDs of the subject attributes Kubernetes reads from client certificates.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// The hub's CA and serving certificate, all PEM-encoded.
#[derive(Clone)]
pub struct TlsMaterial {
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print private keys.
        f.debug_struct("TlsMaterial")
            .field("ca_cert_pem", &self.ca_cert_pem)
            .field("serving_cert_pem", &self.serving_cert_pem)
            .finish_non_exhaustive()
    }
}

/// Where [`ensure_certs`] keeps its files.
struct PkiPaths {
    ca_cert: PathBuf,
    ca_key: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
}

impl PkiPaths {
    fn new(data_dir: &Path) -> Self {
        let pki = data_dir.join("pki");
        Self {
            ca_cert: pki.join("ca.crt"),
            ca_key: pki.join("ca.key"),
            serving_cert: pki.join("serving.crt"),
            serving_key: pki.join("serving.key"),
        }
    }
}

/// Loads the hub's CA and serving certificate from `<data_dir>/pki`, creating
/// them on first use.
///
/// The CA (`CN=ferry-hub-ca`, 10 years) is generated only when neither
/// `ca.crt` nor `ca.key` exists. The serving certificate (1 year) covers
/// `localhost`, `127.0.0.1`, `::1` and `hosts` (IP addresses as IP SANs,
/// anything else as DNS SANs); it is regenerated when missing, not signed by
/// the CA, not valid for a requested host, or within 30 days of expiry.
/// Every file is written with mode 0600 (as `ferry-server`'s `server::data_dir`
/// writes the data directory).
pub fn ensure_certs(data_dir: &Path, hosts: &[String]) -> anyhow::Result<TlsMaterial> {
    let paths = PkiPaths::new(data_dir);
    let pki_dir = data_dir.join("pki");
    fs::create_dir_all(&pki_dir).with_context(|| format!("creating PKI directory {}", pki_dir.display()))?;

    let (ca_cert_pem, ca_key_pem) = match (paths.ca_cert.exists(), paths.ca_key.exists()) {
        (true, true) => {
            let cert = read_to_string(&paths.ca_cert)?;
            let key = read_to_string(&paths.ca_key)?;
            load_issuer(&cert, &key)
                .with_context(|| format!("loading CA from {}", paths.ca_cert.display()))?;
            (cert, key)
        }
        (false, false) => {
            let (cert, key) = generate_ca()?;
            write_file(&paths.ca_key, &key, 0o600)?;
            write_file(&paths.ca_cert, &cert, 0o600)?;
            tracing::info!(path = %paths.ca_cert.display(), "generated hub CA");
            (cert, key)
        }
        _ => bail!(
            "incomplete CA in {}: both ca.crt and ca.key must exist (or neither, to generate a new CA)",
            pki_dir.display()
        ),
    };

    let hosts = serving_hosts(hosts);
    let existing = if paths.serving_cert.exists() && paths.serving_key.exists() {
        Some((
            read_to_string(&paths.serving_cert)?,
            read_to_string(&paths.serving_key)?,
        ))
    } else {
        None
    };
    let reusable = existing.filter(|(cert, key)| {
        let now = SystemTime::now() + SERVING_RENEW_BEFORE;
        serving_cert_covers(&ca_cert_pem, cert, key, &hosts, now)
    });
    let (serving_cert_pem, serving_key_pem) = match reusable {
        Some(pair) => pair,
        None => {
            let (cert, key) = generate_serving(&ca_cert_pem, &ca_key_pem, &hosts)?;
            write_file(&paths.serving_key, &key, 0o600)?;
            write_file(&paths.serving_cert, &cert, 0o600)?;
            tracing::info!(hosts = ?hosts, "generated hub serving certificate");
            (cert, key)
        }
    };

    Ok(TlsMaterial {
        ca_cert_pem,
        ca_key_pem,
        serving_cert_pem,
        serving_key_pem,
    })
}

/// Reads a user-provided certificate chain and private key
/// (`--tls-cert-file` / `--tls-private-key-file`) and checks that they parse
/// and belong together. Returns `(cert_chain_pem, key_pem)`.
pub fn load_user_certs(cert_file: &Path, key_file: &Path) -> anyhow::Result<(String, String)> {
    let cert = read_to_string(cert_file)?;
    let key = read_to_string(key_file)?;
    certified_key(&cert, &key).with_context(|| {
        format!(
            "checking TLS certificate {} and key {}",
            cert_file.display(),
            key_file.display()
        )
    })?;
    Ok((cert, key))
}

/// Builds the rustls server config for the hub's listener, using the ring
/// provider explicitly (never the process default).
///
/// ALPN offers `h2` then `http/1.1` (kubectl speaks HTTP/2 over TLS, kube-rs
/// HTTP/1.1). With `client_ca_pem`, client certificates are requested but not
/// required; presented ones must chain to that CA, and authentication decides
/// later what an anonymous or certificate-bearing connection may do.
pub fn server_config(
    cert_chain_pem: &str,
    key_pem: &str,
    client_ca_pem: Option<&str>,
) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = parse_certs(cert_chain_pem)?;
    let key = parse_key(key_pem)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("selecting TLS protocol versions")?;
    let builder = match client_ca_pem {
        Some(ca_pem) => {
            let roots = root_store(ca_pem)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .context("building client certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("installing the serving certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Issues a client certificate for `user` (subject `CN=user`, one `O=` per
/// group), valid for `days`, signed by the hub CA. Returns `(cert_pem, key_pem)`.
pub fn sign_client_cert(
    ca: &TlsMaterial,
    user: &str,
    groups: &[String],
    days: u32,
) -> anyhow::Result<(String, String)> {
    ensure!(!user.is_empty(), "client certificate user name must not be empty");
    let (issuer, ca_key) = load_issuer(&ca.ca_cert_pem, &ca.ca_key_pem)?;
    let key = KeyPair::generate().context("generating client key")?;
    let mut params = leaf_params(i64::from(days))?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, user);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing client certificate")?;
    let subject = encode_subject(user, groups);
    let der = replace_subject(cert.der(), &subject, &ca_key)?;
    Ok((pem_encode("CERTIFICATE", &der), key.serialize_pem()))
}

/// Arcs of the certificate extension that binds a client certificate to one
/// logical cluster: under the UUID arc `2.25` (X.667), with random numbers
/// each below 2^31 (Go's x509, so kubectl, refuses larger arcs). Its value
/// is the logical cluster's name as a DER UTF8String. The hub puts
/// it into every certificate it signs for a CertificateSigningRequest; a
/// requester cannot, since signing copies nothing but SANs and extended key
/// usages from the request.
const WORKSPACE_EXTENSION_ARCS: &[u64] = &[2, 25, 1_596_815_407, 1_120_953_211, 1];

/// The identity a verified client certificate carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity {
    /// The user: the subject's first `CN`.
    pub user: String,
    /// The groups: every `O`.
    pub groups: Vec<String>,
    /// The logical cluster the certificate is good in, when it was issued
    /// through a workspace's CertificateSigningRequest; `None` for the hub's
    /// own certificates, good in every workspace.
    pub workspace: Option<String>,
}

/// The user and groups a PKCS#10 request (PEM) asks for, read as
/// [`client_cert_identity`] would read the certificate.
pub fn csr_identity(csr_pem: &str) -> anyhow::Result<(String, Vec<String>)> {
    let csr_der = pem_decode("CERTIFICATE REQUEST", csr_pem)?;
    let (subject, _) = read_tlv(csr_subject(&csr_der)?)?;
    let mut user = String::new();
    let mut groups = Vec::new();
    for_each_name_attribute(subject.content, |oid, value| {
        if oid == OID_COMMON_NAME && user.is_empty() {
            user = value;
        } else if oid == OID_ORGANIZATION {
            groups.push(value);
        }
    })?;
    Ok((user, groups))
}

/// Signs a PKCS#10 certificate signing request (PEM) with the hub CA, for the
/// CertificateSigningRequest API. The subject is copied from the CSR verbatim
/// (every `O` kept); requested SANs and extended key usages are kept (client
/// auth when none is requested); the result is never a CA. `workspace`: the
/// logical cluster the certificate is bound to (see [`CertIdentity`]).
/// Returns the certificate PEM.
pub fn sign_csr(
    ca: &TlsMaterial,
    csr_pem: &str,
    days: u32,
    workspace: Option<&str>,
) -> anyhow::Result<String> {
    let (issuer, ca_key) = load_issuer(&ca.ca_cert_pem, &ca.ca_key_pem)?;
    let csr_der = pem_decode("CERTIFICATE REQUEST", csr_pem)?;
    let csr = CertificateSigningRequestParams::from_der(&csr_der.clone().into())
        .map_err(|e| anyhow!("parsing certificate signing request: {e}"))?;
    let mut params = leaf_params(i64::from(days))?;
    params.subject_alt_names = csr.params.subject_alt_names.clone();
    params.extended_key_usages = if csr.params.extended_key_usages.is_empty() {
        vec![ExtendedKeyUsagePurpose::ClientAuth]
    } else {
        csr.params.extended_key_usages.clone()
    };
    if let Some(ws) = workspace {
        params.custom_extensions.push(CustomExtension::from_oid_content(
            WORKSPACE_EXTENSION_ARCS,
            der(TAG_UTF8_STRING, ws.as_bytes()),
        ));
    }
    let signed = CertificateSigningRequestParams {
        params,
        public_key: csr.public_key,
    }
    .signed_by(&issuer)
    .context("signing certificate request")?;
    let subject = csr_subject(&csr_der)?;
    let der = replace_subject(signed.der(), subject, &ca_key)?;
    Ok(pem_encode("CERTIFICATE", &der))
}

/// The user (`CN`) and groups (every `O`) of a DER-encoded X.509 certificate,
/// as Kubernetes' client-certificate authenticator reads them. The caller must
/// have verified the certificate (rustls does, with [`server_config`]'s
/// client verifier).
pub fn client_cert_identity(cert_der: &[u8]) -> anyhow::Result<CertIdentity> {
    let tbs = tbs_fields(cert_der)?;
    let subject = tbs.fields[tbs.subject_index].content;
    let mut user = None;
    let mut groups = Vec::new();
    for_each_name_attribute(subject, |oid, value| {
        if oid == OID_COMMON_NAME && user.is_none() {
            user = Some(value);
        } else if oid == OID_ORGANIZATION {
            groups.push(value);
        }
    })?;
    let user = user.ok_or_else(|| anyhow!("client certificate has no common name"))?;
    Ok(CertIdentity {
        user,
        groups,
        workspace: workspace_extension(&tbs)?,
    })
}

/// The value of the workspace extension in a certificate's extensions
/// (`[3]`, after the subject), if present.
fn workspace_extension(tbs: &ParsedCert<'_>) -> anyhow::Result<Option<String>> {
    let wanted = oid_content(WORKSPACE_EXTENSION_ARCS);
    let Some(field) = tbs.fields[tbs.subject_index..]
        .iter()
        .find(|f| f.tag == TAG_EXTENSIONS)
    else {
        return Ok(None);
    };
    let (list, _) = read_tlv(field.content)?;
    for extension in read_all(list.content)? {
        let items = read_all(extension.content)?;
        let (Some(oid), Some(value)) = (items.first(), items.last()) else {
            bail!("malformed certificate extension");
        };
        if oid.tag == TAG_OID && oid.content == wanted.as_slice() {
            ensure!(value.tag == TAG_OCTET_STRING, "malformed workspace extension");
            let (text, _) = read_tlv(value.content)?;
            ensure!(text.tag == TAG_UTF8_STRING, "malformed workspace extension");
            let ws = std::str::from_utf8(text.content).context("workspace extension is not UTF-8")?;
            ensure!(!ws.is_empty(), "empty workspace extension");
            return Ok(Some(ws.to_string()));
        }
    }
    Ok(None)
}

/// The DER content of an OBJECT IDENTIFIER with these arcs.
fn oid_content(arcs: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut push = |mut n: u64| {
        let mut bytes = vec![(n & 0x7f) as u8];
        n >>= 7;
        while n > 0 {
            bytes.push(0x80 | (n & 0x7f) as u8);
            n >>= 7;
        }
        out.extend(bytes.iter().rev());
    };
    push(arcs[0] * 40 + arcs[1]);
    for arc in &arcs[2..] {
        push(*arc);
    }
    out
}

// ---------------------------------------------------------------------------
// Generation

fn generate_ca() -> anyhow::Result<(String, String)> {
    let key = KeyPair::generate().context("generating CA key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, CA_VALIDITY_DAYS)?;
    params.serial_number = Some(random_serial());
    let cert = params.self_signed(&key).context("self-signing CA certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn generate_serving(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    hosts: &[String],
) -> anyhow::Result<(String, String)> {
    let (issuer, _) = load_issuer(ca_cert_pem, ca_key_pem)?;
    let key = KeyPair::generate().context("generating serving key")?;
    let mut params = leaf_params(SERVING_VALIDITY_DAYS)?;
    params
        .distinguished_name
        .push(DnType::CommonName, SERVING_COMMON_NAME);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.subject_alt_names = hosts
        .iter()
        .map(|host| match host.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName(
                host.clone()
                    .try_into()
                    .map_err(|e| anyhow!("invalid host name {host:?}: {e}"))?,
            )),
        })
        .collect::<anyhow::Result<_>>()?;
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing serving certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Parameters shared by every certificate the CA issues.
fn leaf_params(days: i64) -> anyhow::Result<CertificateParams> {
    ensure!(days > 0, "certificate validity must be at least one day");
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(random_serial());
    set_validity(&mut params, days)?;
    Ok(params)
}

/// Valid from yesterday (tolerating clock skew) for `days` days from today.
fn set_validity(params: &mut CertificateParams, days: i64) -> anyhow::Result<()> {
    let today = chrono::Utc::now().date_naive();
    let start = today - chrono::Days::new(1);
    let end = today
        .checked_add_days(chrono::Days::new(days.unsigned_abs()))
        .ok_or_else(|| anyhow!("certificate validity of {days} days is out of range"))?;
    let (year, month, day) = ymd(start);
    params.not_before = rcgen::date_time_ymd(year, month, day);
    let (year, month, day) = ymd(end);
    params.not_after = rcgen::date_time_ymd(year, month, day);
    Ok(())
}

fn ymd(date: chrono::NaiveDate) -> (i32, u8, u8) {
    use chrono::Datelike;
    // Month (1..=12) and day (1..=31) always fit in u8.
    (date.year(), date.month() as u8, date.day() as u8)
}

/// A random positive 16-byte serial number.
fn random_serial() -> SerialNumber {
    let mut bytes = *uuid::Uuid::new_v4().as_bytes();
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01; // keep the encoding exactly 16 bytes and non-zero
    SerialNumber::from_slice(&bytes)
}

/// Requested hosts plus the defaults, deduplicated, IPv6 brackets removed.
fn serving_hosts(requested: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    let candidates = DEFAULT_HOSTS
        .iter()
        .map(|h| h.to_string())
        .chain(requested.iter().map(|h| {
            let h = h.trim();
            h.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(h)
                .to_string()
        }));
    for host in candidates {
        if !host.is_empty() && !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

// ---------------------------------------------------------------------------
// Verification and parsing

/// Whether the serving certificate matches its key, chains to the CA and is
/// valid for every host at `at`.
fn serving_cert_covers(
    ca_cert_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    hosts: &[String],
    at: SystemTime,
) -> bool {
    let check = || -> anyhow::Result<()> {
        let chain = certified_key(cert_pem, key_pem)?.cert;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(root_store(ca_cert_pem)?),
            provider,
        )
        .build()?;
        let now = UnixTime::since_unix_epoch(at.duration_since(UNIX_EPOCH)?);
        for host in hosts {
            let name = ServerName::try_from(host.as_str())
                .map_err(|e| anyhow!("host {host:?} is not a valid server name: {e}"))?;
            verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], now)?;
        }
        Ok(())
    };
    match check() {
        Ok(()) => true,
        Err(error) => {
            tracing::info!(%error, "serving certificate will be regenerated");
            false
        }
    }
}

fn load_issuer(cert_pem: &str, key_pem: &str) -> anyhow::Result<(Issuer<'static, KeyPair>, KeyPair)> {
    let key = KeyPair::from_pem(key_pem).map_err(|e| anyhow!("parsing CA key: {e}"))?;
    // The issuer owns one copy of the key; the other re-signs spliced certificates.
    let signer = KeyPair::from_pem(key_pem).map_err(|e| anyhow!("parsing CA key: {e}"))?;
    let issuer =
        Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| anyhow!("parsing CA certificate: {e}"))?;
    Ok((issuer, signer))
}

fn certified_key(cert_pem: &str, key_pem: &str) -> anyhow::Result<CertifiedKey> {
    let provider: CryptoProvider = rustls::crypto::ring::default_provider();
    let chain = parse_certs(cert_pem)?;
    let key = parse_key(key_pem)?;
    CertifiedKey::from_der(chain, key, &provider).context("certificate does not match private key")
}

fn parse_certs(pem: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("parsing PEM certificates")?;
    ensure!(!certs.is_empty(), "no certificate found in PEM input");
    Ok(certs)
}

fn parse_key(pem: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .context("parsing PEM private key")?
        .ok_or_else(|| anyhow!("no private key found in PEM input"))
}

fn root_store(ca_pem: &str) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in parse_certs(ca_pem)? {
        roots.add(cert).context("adding CA certificate to trust roots")?;
    }
    Ok(roots)
}

// ---------------------------------------------------------------------------
// Files and PEM

fn read_to_string(path: &Path) -> anyhow::Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Writes `contents` to `path` atomically (temporary file, then rename) with
/// the given Unix permissions.
fn write_file(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(file);
    #[cfg(unix)]
    {
        // The mode passed to open() is masked by the umask; make it exact.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))
            .with_context(|| format!("setting permissions of {}", tmp.display()))?;
    }
    fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// `der` as one PEM block labelled `label` (e.g. `CERTIFICATE`), base64 in lines
/// of 64 characters.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn pem_decode(label: &str, pem: &str) -> anyhow::Result<Vec<u8>> {
    use base64::Engine;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = pem
        .find(&begin)
        .ok_or_else(|| anyhow!("no {label} PEM block found"))?
        + begin.len();
    let stop = pem[start..]
        .find(&end)
        .ok_or_else(|| anyhow!("unterminated {label} PEM block"))?;
    let body: String = pem[start..start + stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .with_context(|| format!("decoding {label} PEM block"))
}

// ---------------------------------------------------------------------------
// Minimal DER handling: enough to read and replace a certificate's subject.

const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_OID: u8 = 0x06;
const TAG_UTF8_STRING: u8 = 0x0c;
const TAG_BIT_STRING: u8 = 0x03;
const TAG_VERSION: u8 = 0xa0;
const TAG_EXTENSIONS: u8 = 0xa3;
const TAG_OCTET_STRING: u8 = 0x04;

/// One DER element: its tag, its full encoding and its content.
#[derive(Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    whole: &'a [u8],
    content: &'a [u8],
}

/// Splits the first DER element off `input`.
fn read_tlv(input: &[u8]) -> anyhow::Result<(Tlv<'_>, &[u8])> {
    let malformed = || anyhow!("malformed DER");
    let (&tag, rest) = input.split_first().ok_or_else(malformed)?;
    ensure!(tag & 0x1f != 0x1f, "unsupported multi-byte DER tag");
    let (&first, rest) = rest.split_first().ok_or_else(malformed)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        ensure!((1..=4).contains(&n) && rest.len() >= n, "unsupported DER length");
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, 2 + n)
    };
    let end = header
        .checked_add(len)
        .filter(|end| *end <= input.len())
        .ok_or_else(malformed)?;
    Ok((
        Tlv {
            tag,
            whole: &input[..end],
            content: &input[header..end],
        },
        &input[end..],
    ))
}

fn read_all(mut input: &[u8]) -> anyhow::Result<Vec<Tlv<'_>>> {
    let mut items = Vec::new();
    while !input.is_empty() {
        let (tlv, rest) = read_tlv(input)?;
        items.push(tlv);
        input = rest;
    }
    Ok(items)
}

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// A certificate split into TBS fields, signature algorithm and signature.
struct ParsedCert<'a> {
    fields: Vec<Tlv<'a>>,
    subject_index: usize,
    signature_algorithm: Tlv<'a>,
}

fn tbs_fields(cert_der: &[u8]) -> anyhow::Result<ParsedCert<'_>> {
    let (cert, rest) = read_tlv(cert_der)?;
    ensure!(
        cert.tag == TAG_SEQUENCE && rest.is_empty(),
        "not a DER certificate"
    );
    let parts = read_all(cert.content)?;
    ensure!(
        parts.len() == 3 && parts[0].tag == TAG_SEQUENCE,
        "not a DER certificate"
    );
    let fields = read_all(parts[0].content)?;
    // version [0] (optional), serial, signature, issuer, validity, subject, ...
    let subject_index = if fields.first().map(|f| f.tag) == Some(TAG_VERSION) {
        5
    } else {
        4
    };
    ensure!(
        fields.len() > subject_index && fields[subject_index].tag == TAG_SEQUENCE,
        "certificate has no subject"
    );
    Ok(ParsedCert {
        fields,
        subject_index,
        signature_algorithm: parts[1],
    })
}

/// Replaces the subject of a certificate issued by `ca_key` and re-signs it.
/// The signature algorithm is unchanged (the same key signs).
fn replace_subject(cert_der: &[u8], subject_der: &[u8], ca_key: &KeyPair) -> anyhow::Result<Vec<u8>> {
    let parsed = tbs_fields(cert_der)?;
    let mut tbs_content = Vec::with_capacity(cert_der.len());
    for (i, field) in parsed.fields.iter().enumerate() {
        if i == parsed.subject_index {
            tbs_content.extend_from_slice(subject_der);
        } else {
            tbs_content.extend_from_slice(field.whole);
        }
    }
    let tbs = der(TAG_SEQUENCE, &tbs_content);
    let signature = ca_key
        .sign(&tbs)
        .map_err(|e| anyhow!("signing certificate: {e}"))?;
    let mut bits = vec![0u8];
    bits.extend_from_slice(&signature);
    let mut content = tbs;
    content.extend_from_slice(parsed.signature_algorithm.whole);
    content.extend_from_slice(&der(TAG_BIT_STRING, &bits));
    Ok(der(TAG_SEQUENCE, &content))
}

/// `CN=<user>, O=<group>...`, one RDN per attribute, as UTF8Strings.
fn encode_subject(user: &str, groups: &[String]) -> Vec<u8> {
    let attribute = |oid: &[u8], value: &str| {
        let mut pair = der(TAG_OID, oid);
        pair.extend_from_slice(&der(TAG_UTF8_STRING, value.as_bytes()));
        der(TAG_SET, &der(TAG_SEQUENCE, &pair))
    };
    let mut rdns = Vec::new();
    for group in groups {
        rdns.extend_from_slice(&attribute(OID_ORGANIZATION, group));
    }
    rdns.extend_from_slice(&attribute(OID_COMMON_NAME, user));
    der(TAG_SEQUENCE, &rdns)
}

/// The raw subject `Name` of a PKCS#10 request.
fn csr_subject(csr_der: &[u8]) -> anyhow::Result<&[u8]> {
    let (csr, _) = read_tlv(csr_der)?;
    let parts = read_all(csr.content)?;
    let info = parts
        .first()
        .ok_or_else(|| anyhow!("empty certificate request"))?;
    let info_fields = read_all(info.content)?;
    // version, subject, subjectPKInfo, attributes
    let subject = info_fields
        .get(1)
        .ok_or_else(|| anyhow!("certificate request has no subject"))?;
    ensure!(
        subject.tag == TAG_SEQUENCE,
        "malformed certificate request subject"
    );
    Ok(subject.whole)
}

/// Calls `f(oid, value)` for every attribute of a DER `Name`'s content.
fn for_each_name_attribute(name_content: &[u8], mut f: impl FnMut(&[u8], String)) -> anyhow::Result<()> {
    for rdn in read_all(name_content)? {
        for pair in read_all(rdn.content)? {
            let items = read_all(pair.content)?;
            ensure!(
                items.len() == 2 && items[0].tag == TAG_OID,
                "malformed name attribute"
            );
            // UTF8String, PrintableString, IA5String and T61String are all read as text.
            let value = String::from_utf8_lossy(items[1].content).into_owned();
            f(items[0].content, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &[&str]) -> Vec<String> {
        list.iter().map(|h| h.to_string()).collect()
    }

    fn cert_der(pem: &str) -> Vec<u8> {
        parse_certs(pem).unwrap().remove(0).to_vec()
    }

    fn verifies_as_client(ca_pem: &str, cert_pem: &str) -> bool {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(root_store(ca_pem).unwrap()), provider)
                .build()
                .unwrap();
        let chain = parse_certs(cert_pem).unwrap();
        rustls::server::danger::ClientCertVerifier::verify_client_cert(
            verifier.as_ref(),
            &chain[0],
            &chain[1..],
            UnixTime::now(),
        )
        .is_ok()
    }

    #[test]
    fn first_call_generates_pki_with_private_keys_0600() {
        let dir = tempfile::tempdir().unwrap();
        let tls = ensure_certs(dir.path(), &hosts(&["hub.example.com", "10.0.0.7"])).unwrap();
        for file in ["ca.crt", "ca.key", "serving.crt", "serving.key"] {
            assert!(dir.path().join("pki").join(file).exists(), "{file} missing");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for file in ["ca.key", "serving.key"] {
                let mode = fs::metadata(dir.path().join("pki").join(file))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o600, "{file}");
            }
        }
        let now = SystemTime::now();
        for host in ["localhost", "127.0.0.1", "::1", "hub.example.com", "10.0.0.7"] {
            assert!(
                serving_cert_covers(
                    &tls.ca_cert_pem,
                    &tls.serving_cert_pem,
                    &tls.serving_key_pem,
                    &hosts(&[host]),
                    now
                ),
                "{host} not covered"
            );
        }
        assert!(!serving_cert_covers(
            &tls.ca_cert_pem,
            &tls.serving_cert_pem,
            &tls.serving_key_pem,
            &hosts(&["other.example.com"]),
            now
        ));
        let ca = tbs_fields(&cert_der(&tls.ca_cert_pem))
            .map(|p| p.fields[p.subject_index].content.to_vec())
            .unwrap();
        let mut cn = None;
        for_each_name_attribute(&ca, |oid, v| {
            if oid == OID_COMMON_NAME {
                cn = Some(v)
            }
        })
        .unwrap();
        assert_eq!(cn.as_deref(), Some(CA_COMMON_NAME));
    }

    #[test]
    fn later_calls_reuse_certs_and_regenerate_serving_only_for_new_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure_certs(dir.path(), &hosts(&["hub.local"])).unwrap();
        let again = ensure_certs(dir.path(), &hosts(&["hub.local"])).unwrap();
        assert_eq!(first.ca_cert_pem, again.ca_cert_pem);
        assert_eq!(first.serving_cert_pem, again.serving_cert_pem);
        assert_eq!(first.serving_key_pem, again.serving_key_pem);

        let widened = ensure_certs(dir.path(), &hosts(&["hub.local", "[fd00::1]"])).unwrap();
        assert_eq!(first.ca_cert_pem, widened.ca_cert_pem);
        assert_eq!(first.ca_key_pem, widened.ca_key_pem);
        assert_ne!(first.serving_cert_pem, widened.serving_cert_pem);
        assert!(serving_cert_covers(
            &widened.ca_cert_pem,
            &widened.serving_cert_pem,
            &widened.serving_key_pem,
            &hosts(&["fd00::1", "hub.local"]),
            SystemTime::now()
        ));
    }

    #[test]
    fn serving_cert_is_regenerated_before_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let tls = ensure_certs(dir.path(), &[]).unwrap();
        let in_two_years = SystemTime::now() + Duration::from_secs(2 * 365 * 24 * 3600);
        assert!(!serving_cert_covers(
            &tls.ca_cert_pem,
            &tls.serving_cert_pem,
            &tls.serving_key_pem,
            &hosts(&["localhost"]),
            in_two_years
        ));
    }

    #[test]
    fn half_present_ca_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        ensure_certs(dir.path(), &[]).unwrap();
        fs::remove_file(dir.path().join("pki/ca.key")).unwrap();
        assert!(ensure_certs(dir.path(), &[]).is_err());
    }

    /// Runs an in-memory TLS handshake; returns the server side.
    fn handshake(
        server: rustls::ServerConfig,
        client: rustls::ClientConfig,
    ) -> anyhow::Result<rustls::ServerConnection> {
        let name = ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), name)?;
        let mut server = rustls::ServerConnection::new(Arc::new(server))?;
        for _ in 0..10 {
            let mut buf = Vec::new();
            client.write_tls(&mut buf)?;
            server.read_tls(&mut buf.as_slice())?;
            server.process_new_packets()?;
            let mut buf = Vec::new();
            server.write_tls(&mut buf)?;
            client.read_tls(&mut buf.as_slice())?;
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(server);
            }
        }
        bail!("handshake did not finish")
    }

    fn client_config(tls: &TlsMaterial, identity: Option<(&str, &str)>) -> rustls::ClientConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(root_store(&tls.ca_cert_pem).unwrap());
        let mut config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(parse_certs(cert).unwrap(), parse_key(key).unwrap())
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        config
    }

    #[test]
    fn server_config_negotiates_h2_and_accepts_optional_client_certs() {
        let dir = tempfile::tempdir().unwrap();
        let tls = ensure_certs(dir.path(), &[]).unwrap();
        let server = || {
            server_config(
                &tls.serving_cert_pem,
                &tls.serving_key_pem,
                Some(&tls.ca_cert_pem),
            )
            .unwrap()
        };
        assert_eq!(
            server().alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );

        let anonymous = handshake(server(), client_config(&tls, None)).unwrap();
        assert_eq!(anonymous.alpn_protocol(), Some(&b"h2"[..]));
        assert!(anonymous.peer_certificates().is_none());

        let (cert, key) = sign_client_cert(&tls, "alice", &hosts(&["dev"]), 1).unwrap();
        let authenticated = handshake(server(), client_config(&tls, Some((&cert, &key)))).unwrap();
        let presented = authenticated.peer_certificates().unwrap();
        assert_eq!(
            client_cert_identity(&presented[0]).unwrap(),
            CertIdentity {
                user: "alice".into(),
                groups: hosts(&["dev"]),
                workspace: None
            }
        );

        // A certificate from another CA is rejected rather than ignored.
        let other = ensure_certs(tempfile::tempdir().unwrap().path(), &[]).unwrap();
        let (cert, key) = sign_client_cert(&other, "mallory", &[], 1).unwrap();
        assert!(handshake(server(), client_config(&tls, Some((&cert, &key)))).is_err());

        let plain = server_config(&tls.serving_cert_pem, &tls.serving_key_pem, None).unwrap();
        let (cert, key) = sign_client_cert(&tls, "alice", &[], 1).unwrap();
        assert!(handshake(plain, client_config(&tls, Some((&cert, &key))))
            .unwrap()
            .peer_certificates()
            .is_none());
        assert!(server_config(&tls.serving_cert_pem, &tls.ca_key_pem, None).is_err());
    }

    #[test]
    fn load_user_certs_checks_the_pair() {
        let dir = tempfile::tempdir().unwrap();
        ensure_certs(dir.path(), &[]).unwrap();
        let pki = dir.path().join("pki");
        let (cert, key) = load_user_certs(&pki.join("serving.crt"), &pki.join("serving.key")).unwrap();
        assert!(cert.contains("BEGIN CERTIFICATE") && key.contains("PRIVATE KEY"));
        assert!(load_user_certs(&pki.join("serving.crt"), &pki.join("ca.key")).is_err());
        assert!(load_user_certs(&pki.join("missing.crt"), &pki.join("ca.key")).is_err());
    }

    #[test]
    fn client_cert_carries_user_and_every_group() {
        let dir = tempfile::tempdir().unwrap();
        let tls = ensure_certs(dir.path(), &[]).unwrap();
        let groups = hosts(&["system:masters", "team-a"]);
        let (cert, key) = sign_client_cert(&tls, "alice", &groups, 30).unwrap();
        assert!(verifies_as_client(&tls.ca_cert_pem, &cert));
        certified_key(&cert, &key).unwrap();
        let id = client_cert_identity(&cert_der(&cert)).unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, groups);

        let (cert, _) = sign_client_cert(&tls, "bob", &[], 1).unwrap();
        assert!(verifies_as_client(&tls.ca_cert_pem, &cert));
        assert_eq!(
            client_cert_identity(&cert_der(&cert)).unwrap(),
            CertIdentity {
                user: "bob".into(),
                groups: vec![],
                workspace: None
            }
        );
    }

    #[test]
    fn csr_is_signed_with_its_subject_kept() {
        let dir = tempfile::tempdir().unwrap();
        let tls = ensure_certs(dir.path(), &[]).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:nodes");
        params
            .distinguished_name
            .push(DnType::CommonName, "system:node:worker-1");
        let csr = params.serialize_request(&key).unwrap().pem().unwrap();

        assert_eq!(
            csr_identity(&csr).unwrap(),
            (
                "system:node:worker-1".to_string(),
                vec!["system:nodes".to_string()]
            )
        );
        let cert = sign_csr(&tls, &csr, 7, None).unwrap();
        assert!(verifies_as_client(&tls.ca_cert_pem, &cert));
        let id = client_cert_identity(&cert_der(&cert)).unwrap();
        assert_eq!(id.user, "system:node:worker-1");
        assert_eq!(id.groups, vec!["system:nodes".to_string()]);
        assert_eq!(id.workspace, None);
        assert!(sign_csr(&tls, "not a csr", 7, None).is_err());
    }

    #[test]
    fn csr_signed_for_a_workspace_is_bound_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let tls = ensure_certs(dir.path(), &[]).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "mallory");
        let csr = params.serialize_request(&key).unwrap().pem().unwrap();
        // A requester asking for the extension itself is refused.
        params.custom_extensions.push(CustomExtension::from_oid_content(
            WORKSPACE_EXTENSION_ARCS,
            der(TAG_UTF8_STRING, b"root"),
        ));
        let forged = params.serialize_request(&key).unwrap().pem().unwrap();
        assert!(sign_csr(&tls, &forged, 7, None).is_err());

        let cert = sign_csr(&tls, &csr, 7, Some("2x8w2ihb6bt8p3f6")).unwrap();
        assert!(verifies_as_client(&tls.ca_cert_pem, &cert));
        let id = client_cert_identity(&cert_der(&cert)).unwrap();
        assert_eq!(id.user, "mallory");
        assert_eq!(id.workspace.as_deref(), Some("2x8w2ihb6bt8p3f6"));
    }

    #[test]
    fn oids_encode_as_der() {
        // 1.2.840.113549 (RSA), a textbook example.
        assert_eq!(
            oid_content(&[1, 2, 840, 113_549]),
            vec![0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d]
        );
    }

    #[test]
    fn der_lengths_round_trip() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let content = vec![7u8; len];
            let encoded = der(TAG_SEQUENCE, &content);
            let (tlv, rest) = read_tlv(&encoded).unwrap();
            assert!(rest.is_empty());
            assert_eq!(tlv.content.len(), len);
        }
    }
}
