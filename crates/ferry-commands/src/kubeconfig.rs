//! Loading kube-rs configurations for the commands: one place that reads
//! kubeconfig files and picks contexts. Pointing a configuration at another
//! workspace is [`ferry_server::kubeconfig::at_workspace`].

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The configuration from `path` (or `$KUBECONFIG` / `~/.kube/config` when
/// `None`), using `context` or the current context.
pub async fn load(path: Option<&Path>, context: Option<&str>) -> anyhow::Result<kube::Config> {
    let options = KubeConfigOptions {
        context: context.map(String::from),
        ..Default::default()
    };
    match path {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))
        }
        None => kube::Config::from_kubeconfig(&options)
            .await
            .context("no kubeconfig: set KUBECONFIG or pass --kubeconfig"),
    }
}

/// A client for `path` (see [`load`]).
pub async fn client(path: Option<&Path>, context: Option<&str>) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(load(path, context).await?)?)
}

/// Parses flag durations: `500ms`, `20s`, `30m`, `8760h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 500ms, 20s, 30m, 8760h"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {text:?}; use ms, s, m or h")),
    };
    Ok(std::time::Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("8760h").unwrap(), Duration::from_secs(8760 * 3600));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("1d").is_err());
    }
}
