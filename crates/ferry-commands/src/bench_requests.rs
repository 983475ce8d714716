//! Where a bench's time goes on the API servers: the requests a measured step made,
//! by server, verb and resource, read as the difference of the servers' own
//! `apiserver_request_total` and `apiserver_request_duration_seconds` between two
//! scrapes of their `/metrics`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::bench_stats::round3;

/// One kind of request: the server it went to, and its verb, resource (with
/// subresource) and HTTP code.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestKind {
    pub server: String,
    pub verb: String,
    pub resource: String,
    pub code: String,
}

const HANDLING_COUNT: &str = "ferry_controller_handling_duration_seconds_count";
const HANDLING_SUM: &str = "ferry_controller_handling_duration_seconds_sum";
/// The store's commit figures a hub reports (unlabelled histogram sums and counts).
const STORAGE: [&str; 6] = [
    "ferry_storage_commit_duration_seconds_count",
    "ferry_storage_commit_duration_seconds_sum",
    "ferry_storage_commit_writes_sum",
    "ferry_storage_commit_writes_count",
    "ferry_storage_write_duration_seconds_count",
    "ferry_storage_write_duration_seconds_sum",
];

/// Request counts by kind, and the seconds spent answering each server's verb and
/// resource (watches excluded), as one scrape saw them (counters since the server
/// started); and, for a hub, the changes each of its controllers handled and the
/// seconds it spent on them (`ferry_controller_handling_duration_seconds`), and
/// its store's commits (`ferry_storage_*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requests {
    pub counts: BTreeMap<RequestKind, f64>,
    pub seconds: BTreeMap<(String, String, String), f64>,
    /// By server and controller name: changes handled, and seconds spent handling.
    pub handled: BTreeMap<(String, String), (f64, f64)>,
    /// By server and `ferry_storage_*` sample name: its value.
    pub storage: BTreeMap<(String, &'static str), f64>,
}

/// The labels of a Prometheus text line `name{k="v",...} value`, and its value, if the
/// line is a sample of `name`.
fn sample<'a>(line: &'a str, name: &str) -> Option<(BTreeMap<&'a str, &'a str>, f64)> {
    let rest = line.strip_prefix(name)?.strip_prefix('{')?;
    let (labels, value) = rest.rsplit_once("} ")?;
    let value = value.trim().parse::<f64>().ok()?;
    let labels = labels
        .split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((k.trim(), v.trim().trim_matches('"')))
        })
        .collect();
    Some((labels, value))
}

/// How much each of `now`'s counters grew since `before` (never below zero).
fn grown<K: Ord + Clone>(now: &BTreeMap<K, f64>, before: &BTreeMap<K, f64>) -> BTreeMap<K, f64> {
    now.iter()
        .map(|(key, now)| {
            (
                key.clone(),
                (now - before.get(key).copied().unwrap_or_default()).max(0.0),
            )
        })
        .collect()
}

impl Requests {
    /// The request tallies in `metrics` (a hub's `/metrics` text), under `server`.
    pub fn parse(server: &str, metrics: &str) -> Requests {
        let label =
            |labels: &BTreeMap<&str, &str>, k: &str| labels.get(k).copied().unwrap_or_default().to_string();
        let resource_of = |labels: &BTreeMap<&str, &str>| match label(labels, "subresource").as_str() {
            "" => label(labels, "resource"),
            sub => format!("{}/{sub}", label(labels, "resource")),
        };
        let mut out = Requests::default();
        for line in metrics.lines() {
            if let Some((labels, value)) = sample(line, "apiserver_request_total") {
                let kind = RequestKind {
                    server: server.to_string(),
                    verb: label(&labels, "verb"),
                    resource: resource_of(&labels),
                    code: label(&labels, "code"),
                };
                *out.counts.entry(kind).or_default() += value;
            } else if let Some((labels, value)) = sample(line, "apiserver_request_duration_seconds_sum") {
                let pair = (server.to_string(), label(&labels, "verb"), resource_of(&labels));
                *out.seconds.entry(pair).or_default() += value;
            } else if let Some((labels, value)) = sample(line, HANDLING_COUNT) {
                let controller = (server.to_string(), label(&labels, "name"));
                out.handled.entry(controller).or_default().0 += value;
            } else if let Some((labels, value)) = sample(line, HANDLING_SUM) {
                let controller = (server.to_string(), label(&labels, "name"));
                out.handled.entry(controller).or_default().1 += value;
            } else if let Some((name, value)) = STORAGE.into_iter().find_map(|n| {
                Some((
                    n,
                    line.strip_prefix(n)?
                        .strip_prefix(' ')?
                        .trim()
                        .parse::<f64>()
                        .ok()?,
                ))
            }) {
                out.storage.insert((server.to_string(), name), value);
            }
        }
        out
    }

    /// Each controller's changes (or passes, or looks at everything) handled and the
    /// time spent handling them, the busiest first, as JSON rows: where a hub's
    /// controllers queue behind themselves.
    pub fn controllers(&self) -> Value {
        let mut rows: Vec<_> = self.handled.iter().collect();
        rows.sort_by(|a, b| (b.1).1.total_cmp(&(a.1).1).then(a.0.cmp(b.0)));
        rows.into_iter()
            .map(|((server, name), (changes, seconds))| {
                json!({
                    "server": server,
                    "controller": name,
                    "handled": changes,
                    "seconds": round3(*seconds),
                    "ms_each": round3(seconds * 1000.0 / changes.max(1.0)),
                })
            })
            .collect()
    }

    /// Each server's store commits: how many, the writes in them, and the mean time
    /// of a commit and of a write from queued to visible, as JSON rows: whether a
    /// hub's writes wait on its store.
    pub fn storage(&self) -> Value {
        let servers: std::collections::BTreeSet<&String> = self.storage.keys().map(|(s, _)| s).collect();
        servers
            .into_iter()
            .map(|server| {
                let v = |name: &'static str| {
                    self.storage
                        .get(&(server.clone(), name))
                        .copied()
                        .unwrap_or_default()
                };
                let [commits, commit_seconds, writes, _, timed_writes, write_seconds] = STORAGE.map(v);
                json!({
                    "server": server,
                    "commits": commits,
                    "writes": writes,
                    "writes_per_commit": round3(writes / commits.max(1.0)),
                    "commit_ms_each": round3(commit_seconds * 1000.0 / commits.max(1.0)),
                    "write_ms_each": round3(write_seconds * 1000.0 / timed_writes.max(1.0)),
                })
            })
            .collect()
    }

    /// Both scrapes' tallies in one.
    pub fn and(mut self, other: Requests) -> Requests {
        self.counts.extend(other.counts);
        self.seconds.extend(other.seconds);
        self.handled.extend(other.handled);
        self.storage.extend(other.storage);
        self
    }

    /// What was answered between `before` and this scrape (kinds with no request left out).
    pub fn since(&self, before: &Requests) -> Requests {
        let counts = self
            .counts
            .iter()
            .filter_map(|(kind, now)| {
                let count = now - before.counts.get(kind).copied().unwrap_or_default();
                (count > 0.0).then(|| (kind.clone(), count))
            })
            .collect();
        let seconds = grown(&self.seconds, &before.seconds);
        let handled = self
            .handled
            .iter()
            .filter_map(|(controller, (changes, seconds))| {
                let (was_changes, was_seconds) = before.handled.get(controller).copied().unwrap_or_default();
                let changes = changes - was_changes;
                (changes > 0.0).then(|| (controller.clone(), (changes, (seconds - was_seconds).max(0.0))))
            })
            .collect();
        let storage = grown(&self.storage, &before.storage);
        Requests {
            counts,
            seconds,
            handled,
            storage,
        }
    }

    /// Per `objects`: each kind's requests, and the mean server time of a request of its
    /// verb and resource (whatever the code), most requests first, as JSON rows.
    pub fn per_object(&self, objects: usize) -> Value {
        let n = objects.max(1) as f64;
        let mut of_pair: BTreeMap<(String, String, String), f64> = BTreeMap::new();
        for (kind, count) in &self.counts {
            let pair = (kind.server.clone(), kind.verb.clone(), kind.resource.clone());
            *of_pair.entry(pair).or_default() += count;
        }
        let mut rows: Vec<(&RequestKind, f64)> = self.counts.iter().map(|(k, c)| (k, *c)).collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        rows.into_iter()
            .map(|(kind, count)| {
                let pair = (kind.server.clone(), kind.verb.clone(), kind.resource.clone());
                let seconds = self.seconds.get(&pair).copied().unwrap_or_default();
                let ms = seconds * 1000.0 / of_pair[&pair];
                json!({
                    "server": kind.server,
                    "verb": kind.verb,
                    "resource": kind.resource,
                    "code": kind.code,
                    "requests": count,
                    "per_object": round3(count / n),
                    "server_ms_per_request": round3(ms),
                })
            })
            .collect()
    }
}

/// The `/metrics` text of the hub at `url` (its root, not a workspace), as the admin
/// of its `kubeconfig`.
pub async fn scrape(kubeconfig: &std::path::Path, url: &str) -> anyhow::Result<String> {
    let mut config = crate::kubeconfig::load(Some(kubeconfig), None).await?;
    config.cluster_url = url.parse()?;
    let client = kube::Client::try_from(config)?;
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

/// Two hubs' request counters, each under its name.
pub async fn scrape_both(
    (a_name, a): (&str, &crate::hub_process::HubProcess),
    (b_name, b): (&str, &crate::hub_process::HubProcess),
) -> anyhow::Result<Requests> {
    let a = Requests::parse(a_name, &scrape(&a.kubeconfig, &a.url).await?);
    let b = Requests::parse(b_name, &scrape(&b.kubeconfig, &b.url).await?);
    Ok(a.and(b))
}

/// What the initial sync asked of the hubs per object (by hub, verb, resource and
/// code, with the hubs' time per request), and the syncer's (or agent's)
/// reconciles per object and time in each, from its `/metrics` text.
pub fn requests_made(before: &Requests, after: &Requests, objects: usize, agent_metrics: &str) -> Value {
    let value_of = |name: &str| {
        agent_metrics
            .lines()
            .filter_map(|l| l.strip_prefix(name))
            .filter_map(|rest| rest.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
            .sum::<f64>()
    };
    let reconciles = value_of("syncer_sync_duration_seconds_count");
    let seconds = value_of("syncer_sync_duration_seconds_sum");
    json!({
        "by_kind": after.since(before).per_object(objects),
        "reconciles_per_object": round3(reconciles / objects.max(1) as f64),
        "ms_per_reconcile": round3(if reconciles > 0.0 { seconds * 1000.0 / reconciles } else { 0.0 }),
    })
}

/// The last round's requests per object, as table lines.
pub fn print_requests(requests: &Value) {
    println!(
        "  last round        {} reconciles per object, {} ms each; requests per object (hub, verb, resource, code, hub ms each):",
        requests["reconciles_per_object"], requests["ms_per_reconcile"]
    );
    for row in requests["by_kind"].as_array().into_iter().flatten() {
        println!(
            "                    {:>7} {:<7} {:<6} {:<28} {} {:>7} ms",
            row["per_object"].to_string(),
            row["server"].as_str().unwrap_or_default(),
            row["verb"].as_str().unwrap_or_default(),
            row["resource"].as_str().unwrap_or_default(),
            row["code"].as_str().unwrap_or_default(),
            row["server_ms_per_request"].to_string(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP apiserver_request_total Requests answered
apiserver_request_total{verb="POST",group="",version="v1",resource="secrets",subresource="",scope="namespace",code="201"} 2
apiserver_request_duration_seconds_sum{verb="POST",group="",version="v1",resource="secrets",subresource="",scope="namespace"} 0.02
apiserver_request_duration_seconds_count{verb="POST",group="",version="v1",resource="secrets",subresource="",scope="namespace"} 2
"#;

    const AFTER: &str = r#"apiserver_request_total{verb="POST",group="",version="v1",resource="secrets",subresource="",scope="namespace",code="201"} 12
apiserver_request_total{verb="POST",group="",version="v1",resource="secrets",subresource="",scope="namespace",code="409"} 10
apiserver_request_duration_seconds_sum{verb="POST",group="",version="v1",resource="secrets",subresource="",scope="namespace"} 0.42
apiserver_request_total{verb="PUT",group="",version="v1",resource="databases",subresource="status",scope="resource",code="200"} 5
apiserver_request_duration_seconds_sum{verb="PUT",group="",version="v1",resource="databases",subresource="status",scope="resource"} 0.05
"#;

    /// A hub's `/metrics` lines for controllers handled `(name, count, seconds)`.
    fn handling(controllers: &[(&str, u32, f64)]) -> String {
        controllers
            .iter()
            .map(|(name, count, seconds)| {
                format!(
                    "{HANDLING_COUNT}{{name=\"{name}\"}} {count}\n{HANDLING_SUM}{{name=\"{name}\"}} {seconds}\n"
                )
            })
            .collect()
    }

    #[test]
    fn controllers_between_two_scrapes_are_counted_with_their_time_busiest_first() {
        // The scheduler and the SyncTargets controller busy between the scrapes, a
        // third controller idle.
        let scrape = |scheduler: (u32, f64), targets: (u32, f64)| {
            let (s, t) = (scheduler, targets);
            Requests::parse(
                "hub",
                &handling(&[
                    ("TmcScheduler", s.0, s.1),
                    ("SyncTargets", t.0, t.1),
                    ("Idle", 7, 0.7),
                ]),
            )
        };
        let before = scrape((100, 1.5), (4, 0.1));
        let after = scrape((300, 5.5), (14, 0.2));
        let rows = after.since(&before).controllers();
        let rows = rows.as_array().unwrap();
        // A controller with nothing handled since is left out.
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0]["controller"], "TmcScheduler");
        assert_eq!(rows[0]["handled"], 200.0);
        assert_eq!(rows[0]["seconds"], 4.0);
        assert_eq!(rows[0]["ms_each"], 20.0);
        assert_eq!(rows[1]["controller"], "SyncTargets");
        assert_eq!(rows[1]["ms_each"], 10.0);
    }

    #[test]
    fn a_hubs_store_commits_between_two_scrapes_are_counted_with_their_time() {
        let scrape = |commits: u32, writes: u32, commit_seconds: f64, write_seconds: f64| {
            let [c_count, c_sum, w_sum, w_count, d_count, d_sum] = STORAGE;
            Requests::parse(
                "hub",
                &format!(
                    "{c_count} {commits}\n{c_sum} {commit_seconds}\n{w_sum} {writes}\n{w_count} {commits}\n\
                     {d_count} {writes}\n{d_sum} {write_seconds}\n# EOF\n"
                ),
            )
        };
        let rows = scrape(150, 400, 2.5, 30.0)
            .since(&scrape(50, 100, 0.5, 6.0))
            .storage();
        assert_eq!(
            rows,
            json!([{"server": "hub", "commits": 100.0, "writes": 300.0, "writes_per_commit": 3.0,
                    "commit_ms_each": 20.0, "write_ms_each": 80.0}])
        );
        assert_eq!(
            Requests::parse("hub", "").storage(),
            json!([]),
            "no store figures, no row"
        );
    }

    #[test]
    fn requests_between_two_scrapes_are_counted_by_kind_with_their_time() {
        let before = Requests::parse("service", BEFORE);
        let after = Requests::parse("service", AFTER);
        let rows = after.since(&before).per_object(10);
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 3);
        // Most requests first: ten 201s since, ten 409s, five status updates.
        let created = &rows[0];
        assert_eq!(created["code"], "201");
        assert_eq!(created["requests"], 10.0);
        assert_eq!(created["per_object"], 1.0);
        // 0.4 s since, shared by the 20 POSTs: 20 ms each.
        assert_eq!(created["server_ms_per_request"], 20.0);
        assert_eq!(rows[1]["code"], "409");
        assert_eq!(rows[2]["resource"], "databases/status");
        assert_eq!(rows[2]["server_ms_per_request"], 10.0);
    }

    #[test]
    fn lines_of_other_metrics_and_malformed_lines_are_ignored() {
        let text = "apiserver_request_total_extra{verb=\"GET\"} 3\napiserver_request_total{verb=\"GET\"} x\n";
        assert!(Requests::parse("kcp", text).counts.is_empty());
    }
}
