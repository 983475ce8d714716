//! The figures every bench reports, computed one way: latency summaries (`p50`, `p90`,
//! `p99`, `max`, `n`) by nearest rank, and medians over rounds with every round's value.
//!
//! A p99 in `ferry bench hub` is the same statistic as a p99 in `ferry bench sync` or
//! `ferry bench compare`, because all three call [`Summary::of`].

use serde::{Deserialize, Serialize};

/// The nearest-rank percentile `p` (0 < p ≤ 100) of `sorted` (ascending, non-empty):
/// the smallest sample such that at least `p`% of the samples are at or below it. It is
/// always one of the samples, never an interpolation.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    assert!(p > 0.0 && p <= 100.0, "percentile {p} outside (0, 100]");
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The middle value (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "median of no values");
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// A distribution of samples (latencies in milliseconds, by convention of the field
/// holding it), summarised the same way in every bench.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// How many samples the summary is over.
    pub n: usize,
}

impl Summary {
    /// The summary of `samples`. An empty set or a non-finite sample is an error naming
    /// `what`: a bench that measured nothing must not report a figure.
    pub fn of(what: &str, mut samples: Vec<f64>) -> anyhow::Result<Summary> {
        anyhow::ensure!(!samples.is_empty(), "{what}: no samples were measured");
        if let Some(bad) = samples.iter().find(|v| !v.is_finite()) {
            anyhow::bail!("{what}: a sample is {bad}");
        }
        samples.sort_by(f64::total_cmp);
        Ok(Summary {
            p50: round3(percentile(&samples, 50.0)),
            p90: round3(percentile(&samples, 90.0)),
            p99: round3(percentile(&samples, 99.0)),
            max: round3(samples[samples.len() - 1]),
            n: samples.len(),
        })
    }
}

/// A figure measured once per round: the median is the headline, every round is shown so
/// a reader can see the spread.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rounds {
    pub median: f64,
    pub rounds: Vec<f64>,
}

impl Rounds {
    /// The median of `values`, which must be non-empty and finite (see [`Summary::of`]).
    pub fn of(what: &str, values: Vec<f64>) -> anyhow::Result<Rounds> {
        anyhow::ensure!(!values.is_empty(), "{what}: no rounds were measured");
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            anyhow::bail!("{what}: a round measured {bad}");
        }
        Ok(Rounds {
            median: round3(median(&values)),
            rounds: values.into_iter().map(round3).collect(),
        })
    }
}

/// Three decimals: enough for milliseconds and ratios, and stable JSON.
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Resident memory of process `pid` in MiB (Linux, `/proc/<pid>/status`).
pub fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    use anyhow::Context;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .context("VmRSS not found")?;
    Ok(kib / 1024.0)
}

/// CPU time (user + system, seconds) process `pid` has used so far, from
/// `/proc/<pid>/stat` (in USER_HZ ticks, 100 per second on Linux).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    use anyhow::Context;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |i: usize| -> anyhow::Result<f64> { Ok(fields.get(i - 3).context("short stat")?.parse::<f64>()?) };
    Ok((ticks(14)? + ticks(15)?) / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 90.0), 90.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        // Ten samples: p99 is the largest, p50 the fifth, p90 the ninth.
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&ten, 99.0), 10.0);
        assert_eq!(percentile(&ten, 50.0), 5.0);
        assert_eq!(percentile(&ten, 90.0), 9.0);
        assert_eq!(percentile(&[3.0], 1.0), 3.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
        // Never an interpolation.
        assert_eq!(percentile(&[1.0, 2.0], 50.0), 1.0);
        assert_eq!(percentile(&[1.0, 2.0], 51.0), 2.0);
    }

    #[test]
    fn a_summary_is_ordered_and_counts_its_samples() {
        let s = Summary::of("t", vec![5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!(
            s,
            Summary {
                p50: 3.0,
                p90: 5.0,
                p99: 5.0,
                max: 5.0,
                n: 5
            }
        );
        let json = serde_json::to_value(s).unwrap();
        for key in ["p50", "p90", "p99", "max", "n"] {
            assert!(json[key].is_number(), "{key} in {json}");
        }
    }

    #[test]
    fn no_samples_or_a_nan_is_an_error_not_a_figure() {
        let err = Summary::of("watch delivery", vec![]).unwrap_err();
        assert!(err.to_string().contains("watch delivery"), "{err}");
        assert!(Summary::of("t", vec![1.0, f64::NAN]).is_err());
        assert!(Summary::of("t", vec![f64::INFINITY]).is_err());
        assert!(Rounds::of("ratio", vec![]).is_err());
        assert!(Rounds::of("ratio", vec![0.5, f64::NAN]).is_err());
    }

    #[test]
    fn rounds_report_the_median_and_every_round() {
        let r = Rounds::of("ratio", vec![0.9, 0.7, 0.8]).unwrap();
        assert_eq!(r.median, 0.8);
        assert_eq!(r.rounds, vec![0.9, 0.7, 0.8]);
        assert_eq!(median(&[0.9, 0.7]), 0.8);
        assert_eq!(median(&[0.5]), 0.5);
    }
}
