//! Kubeconfig files the hub writes (admin.kubeconfig, per-user kubeconfigs),
//! and [`at_workspace`], which points a loaded configuration at another
//! workspace of the same hub.
//!
//! The YAML is written by hand: every string is emitted as a JSON string,
//! which is also a valid YAML double-quoted scalar, so no value (URLs with
//! colons, tokens, names) needs YAML-specific escaping.

use base64::Engine;

/// Cluster entry name in the admin kubeconfig.
pub const ADMIN_CLUSTER: &str = "ferry-hub";
/// User entry name in the admin kubeconfig.
pub const ADMIN_USER: &str = "admin";
/// Context name (and current context) in the admin kubeconfig.
pub const ADMIN_CONTEXT: &str = "ferry-admin";

/// How a kubeconfig user authenticates.
#[derive(Clone, PartialEq, Eq)]
pub enum AuthInfo {
    /// A bearer token.
    Token(String),
    /// A client certificate and its private key, both PEM.
    ClientCert { cert_pem: String, key_pem: String },
}

impl std::fmt::Debug for AuthInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials stay out of logs.
        match self {
            AuthInfo::Token(_) => f.write_str("Token(..)"),
            AuthInfo::ClientCert { .. } => f.write_str("ClientCert { .. }"),
        }
    }
}

/// The admin kubeconfig: cluster `ferry-hub` at `<server_url>/clusters/<workspace>`
/// (also for `root`, like kcp's admin kubeconfig), user `admin` with `token`,
/// and context `ferry-admin` as the current context.
pub fn admin_kubeconfig(server_url: &str, ca_pem: &str, token: &str, workspace: &str) -> String {
    let server = format!("{}/clusters/{workspace}", server_url.trim_end_matches('/'));
    render(&Entries {
        cluster: ADMIN_CLUSTER,
        server: &server,
        ca_pem,
        user: ADMIN_USER,
        auth: &AuthInfo::Token(token.to_string()),
        context: ADMIN_CONTEXT,
        namespace: None,
    })
}

/// A single-context kubeconfig. `server_url` is used as given (include any
/// `/clusters/<workspace>` path); the user entry is named after the context.
pub fn kubeconfig(
    cluster_name: &str,
    server_url: &str,
    ca_pem: &str,
    auth: AuthInfo,
    context_name: &str,
    namespace: Option<&str>,
) -> String {
    render(&Entries {
        cluster: cluster_name,
        server: server_url.trim_end_matches('/'),
        ca_pem,
        user: context_name,
        auth: &auth,
        context: context_name,
        namespace,
    })
}

/// `config` pointed at workspace `path` (`root:a`, a logical cluster name or
/// `*`) on the same server, whatever workspace it pointed at before.
pub fn at_workspace(config: &kube::Config, path: &str) -> Result<kube::Config, http::uri::InvalidUri> {
    let mut c = config.clone();
    let url = config.cluster_url.to_string();
    let base = url
        .split("/clusters/")
        .next()
        .unwrap_or(&url)
        .trim_end_matches('/')
        .to_string();
    c.cluster_url = format!("{base}/clusters/{path}").parse()?;
    Ok(c)
}

struct Entries<'a> {
    cluster: &'a str,
    server: &'a str,
    ca_pem: &'a str,
    user: &'a str,
    auth: &'a AuthInfo,
    context: &'a str,
    namespace: Option<&'a str>,
}

fn render(e: &Entries<'_>) -> String {
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    out += &format!("- name: {}\n  cluster:\n", q(e.cluster));
    out += &format!("    server: {}\n", q(e.server));
    out += &format!("    certificate-authority-data: {}\n", q(&b64(e.ca_pem)));
    out += "contexts:\n";
    out += &format!("- name: {}\n  context:\n", q(e.context));
    out += &format!("    cluster: {}\n", q(e.cluster));
    out += &format!("    user: {}\n", q(e.user));
    if let Some(namespace) = e.namespace {
        out += &format!("    namespace: {}\n", q(namespace));
    }
    out += &format!("current-context: {}\n", q(e.context));
    out += "preferences: {}\n";
    out += "users:\n";
    out += &format!("- name: {}\n  user:\n", q(e.user));
    match e.auth {
        AuthInfo::Token(token) => out += &format!("    token: {}\n", q(token)),
        AuthInfo::ClientCert { cert_pem, key_pem } => {
            out += &format!("    client-certificate-data: {}\n", q(&b64(cert_pem)));
            out += &format!("    client-key-data: {}\n", q(&b64(key_pem)));
        }
    }
    out
}

/// A YAML double-quoted scalar (JSON string syntax is a subset of it).
fn q(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::config::Kubeconfig;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn admin_kubeconfig_parses_and_points_at_the_workspace() {
        let yaml = admin_kubeconfig("https://127.0.0.1:6443/", CA, "s3cr3t:\"x\"", "root");
        let config = Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(config.current_context.as_deref(), Some(ADMIN_CONTEXT));

        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(config.clusters[0].name, ADMIN_CLUSTER);
        assert_eq!(
            cluster.server.as_deref(),
            Some("https://127.0.0.1:6443/clusters/root")
        );
        let ca = cluster.certificate_authority_data.as_deref().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD.decode(ca).unwrap();
        assert_eq!(decoded, CA.as_bytes());

        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!(config.contexts[0].name, ADMIN_CONTEXT);
        assert_eq!(context.cluster, ADMIN_CLUSTER);
        assert_eq!(context.user.as_deref(), Some(ADMIN_USER));
        assert_eq!(context.namespace, None);

        assert_eq!(config.auth_infos[0].name, ADMIN_USER);
        assert_eq!(user_field(&config, "token"), "s3cr3t:\"x\"");
    }

    #[test]
    fn admin_kubeconfig_for_a_nested_workspace() {
        let yaml = admin_kubeconfig("https://hub:6443", CA, "t", "root:org:team");
        let config = Kubeconfig::from_yaml(&yaml).unwrap();
        let server = config.clusters[0].cluster.as_ref().unwrap().server.clone();
        assert_eq!(server.as_deref(), Some("https://hub:6443/clusters/root:org:team"));
    }

    #[test]
    fn client_cert_kubeconfig_with_namespace_parses() {
        let auth = AuthInfo::ClientCert {
            cert_pem: "CERT".into(),
            key_pem: "KEY".into(),
        };
        let yaml = kubeconfig(
            "hub",
            "https://hub/clusters/root:a",
            CA,
            auth,
            "alice@hub",
            Some("dev"),
        );
        let config = Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("alice@hub"));
        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.namespace.as_deref(), Some("dev"));
        assert_eq!(context.user.as_deref(), Some("alice@hub"));
        let engine = base64::engine::general_purpose::STANDARD;
        assert_eq!(
            engine
                .decode(user_field(&config, "client-certificate-data"))
                .unwrap(),
            b"CERT"
        );
        assert_eq!(
            engine.decode(user_field(&config, "client-key-data")).unwrap(),
            b"KEY"
        );
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_none());
    }

    #[test]
    fn debug_output_hides_credentials() {
        assert!(!format!("{:?}", AuthInfo::Token("hunter2".into())).contains("hunter2"));
    }

    /// A field of the first user, read back through kube's serializer (its
    /// secret fields are not otherwise readable without the `secrecy` crate).
    fn user_field(config: &Kubeconfig, field: &str) -> String {
        let json = serde_json::to_value(config).unwrap();
        json["users"][0]["user"][field].as_str().unwrap().to_string()
    }
}
