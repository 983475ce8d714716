//! `ferry bench hub` runs end to end and reports every figure the issue asks for.

use std::process::Command;

#[test]
fn bench_hub_reports_all_figures_as_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["bench", "hub", "--json", "--writes", "40", "--list-objects", "50"])
        .args(["--watchers", "3", "--watch-events", "5", "--rss-objects", "200"])
        .args(["--bound-workspaces", "4", "--apiexport-events", "12"])
        .output()
        .expect("ferry runs");
    assert!(
        out.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON figures");
    for ptr in [
        "/creates/clients_1/durable_per_sec",
        "/creates/clients_32/ratio_durable_to_in_memory",
        "/list/p50_ms",
        "/watch/p99_ms",
        "/rss/mib",
        "/list_during_writes/creates_per_sec_while_listing",
        "/list_during_writes/list_p50_ms",
    ] {
        let n = v
            .pointer(ptr)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or_else(|| panic!("{ptr} missing in {v}"));
        assert!(n > 0.0, "{ptr} = {n}");
    }
    let during = &v["list_during_writes"];
    assert!(during["lists"].as_u64().unwrap() >= 1, "{during}");
    let ratio = during["ratio_creates_while_listing_to_alone"].as_f64().unwrap();
    assert!(ratio.is_finite() && ratio > 0.0, "{during}");
    let (p50, p99) = (
        during["list_p50_ms"].as_f64().unwrap(),
        during["list_p99_ms"].as_f64().unwrap(),
    );
    assert!(p50 <= p99, "{during}");
    // The APIExport block: every event seen through the virtual workspace.
    let ae = &v["apiexport"];
    assert_eq!(ae["bound_workspaces"], 4, "{ae}");
    assert_eq!(ae["events"], 12, "{ae}");
    for key in [
        "virtual_workspace_p50_ms",
        "virtual_workspace_p99_ms",
        "baseline_one_workspace_p99_ms",
        "rss_mib_after",
    ] {
        let n = ae[key].as_f64().unwrap_or(f64::NAN);
        assert!(n.is_finite() && n > 0.0, "{key}: {ae}");
    }
    assert!(
        ae["virtual_workspace_p50_ms"].as_f64() <= ae["virtual_workspace_p99_ms"].as_f64(),
        "{ae}"
    );
}
