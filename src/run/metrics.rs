//! Prometheus metrics of a batch run and of a landing zone's backlog, in the text
//! exposition format (encoded by `prometheus-client`), and their push to a Pushgateway.
//!
//! Every batch run pushes its group (job `bronze`, grouping key the run's landing path):
//! a run that ends with a report replaces the group (`PUT`), a run that fails before one
//! replaces only `bronze_batch_success` (`POST`), so the last success's timestamp stays
//! for the staleness alert of `docs/alerts.yml`. Labels are the landing path, the batch
//! id, the table, the stage and the request kind: never a file name or a message id.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use std::collections::BTreeMap;

use super::EntityStatus;
use super::context::Context;
use super::discovery;
use crate::error::Error;
use crate::report::BatchReport;

/// The job name of every push.
pub const JOB: &str = "bronze";

/// How long a push may take before it is given up (with a warning).
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(5);

type Value = Gauge<f64, AtomicU64>;

/// A metric's labels, in order.
type Labels = Vec<(&'static str, String)>;

/// Gauge families registered as they are set, encoded at the end.
#[derive(Default)]
struct Exposition {
    registry: Registry,
}

impl Exposition {
    /// The family `name`, one gauge per label set of `values`.
    fn gauges(&mut self, name: &str, help: &str, values: impl IntoIterator<Item = (Labels, f64)>) {
        let family = Family::<Labels, Value>::default();
        for (labels, value) in values {
            family.get_or_create(&labels).set(value);
        }
        self.registry.register(name, help, family);
    }

    /// The classic text exposition format, which the Pushgateway and the node_exporter
    /// textfile collector read.
    fn text(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

fn seconds_since_epoch(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The landing path a batch's metrics are grouped by: its folders' `<source>/<entity>`,
/// comma separated when it has several.
pub fn landing_path_of(report: &BatchReport) -> String {
    let mut paths: Vec<&str> = report
        .folders
        .iter()
        .map(|f| f.landing_path.as_str())
        .collect();
    paths.dedup();
    paths.join(",")
}

/// The help of `bronze_batch_success`.
const SUCCESS_HELP: &str = "1 when the batch loaded (corrupt lines kept), 0 when it failed.";

/// The labels of a batch's metrics: its landing path and batch id.
struct BatchLabels(Labels);

impl BatchLabels {
    /// The one value of a batch-wide metric.
    fn one(&self, v: f64) -> [(Labels, f64); 1] {
        [(self.0.clone(), v)]
    }

    /// A value of a metric per `label`, this one's `value`.
    fn with(&self, label: &'static str, value: &str, v: f64) -> (Labels, f64) {
        let mut labels = self.0.clone();
        labels.push((label, value.to_string()));
        (labels, v)
    }
}

/// The metrics of a batch run that produced `report`, at `now`.
pub fn batch_metrics(report: &BatchReport, now: SystemTime) -> String {
    let batch = BatchLabels(vec![
        ("landing_path", landing_path_of(report)),
        ("batch_id", report.batch_id.clone()),
    ]);
    let mut m = Exposition::default();
    row_metrics(&mut m, report, &batch);
    request_metrics(&mut m, report, &batch);
    outcome_metrics(&mut m, report, &batch, now);
    m.text()
}

/// The batch's rows per table, its messages, corrupt lines, duplicates and rescued
/// values.
fn row_metrics(m: &mut Exposition, report: &BatchReport, batch: &BatchLabels) {
    let rows = report
        .tables
        .iter()
        .map(|(t, o)| batch.with("table", t, o.rows_written as f64));
    m.gauges(
        "bronze_batch_rows",
        "Rows the batch wrote, per table.",
        rows,
    );
    m.gauges(
        "bronze_batch_messages",
        "Messages the batch loaded.",
        batch.one(report.messages as f64),
    );
    let corrupt = batch.one(report.corrupt_lines as f64);
    m.gauges(
        "bronze_batch_corrupt_lines",
        "Lines kept in _corrupt_records.",
        corrupt,
    );
    let duplicates = batch.one(report.duplicates as f64);
    m.gauges(
        "bronze_batch_duplicates",
        "Duplicate messages dropped.",
        duplicates,
    );
    m.gauges(
        "bronze_batch_unregistered_tables",
        "Tables the catalog of [metastore] did not take after the run (the next run or `bronze register` registers them).",
        batch.one(report.unregistered.len() as f64),
    );
    let rescued: u64 = report.tables.values().map(|t| t.rescued_values).sum();
    m.gauges(
        "bronze_batch_rescued_values",
        "Values kept in _rescued_data.",
        batch.one(rescued as f64),
    );
}

/// The run's wall time per stage, its object store requests per stage, the requests
/// retried and the commits planned again.
fn request_metrics(m: &mut Exposition, report: &BatchReport, batch: &BatchLabels) {
    let stages = report
        .stage_seconds
        .iter()
        .map(|(s, v)| batch.with("stage", s, *v));
    m.gauges(
        "bronze_batch_duration_seconds",
        "Wall time of each stage of the run.",
        stages,
    );
    let calls = report
        .store_calls
        .iter()
        .map(|(k, n)| batch.with("kind", k, *n as f64));
    m.gauges(
        "bronze_batch_store_requests",
        "Object store requests, per stage of the run.",
        calls,
    );
    let retries = batch.one(report.store_retries as f64);
    m.gauges(
        "bronze_batch_store_retries",
        "Object store requests retried.",
        retries,
    );
    let replans = batch.one(report.commit_replans as f64);
    m.gauges(
        "bronze_batch_commit_replans",
        "Commits planned again after a conflict.",
        replans,
    );
}

/// Whether the batch loaded, and when it did (`now`) if it did.
fn outcome_metrics(m: &mut Exposition, report: &BatchReport, batch: &BatchLabels, now: SystemTime) {
    let success = report.exit_code() < 2;
    m.gauges(
        "bronze_batch_success",
        SUCCESS_HELP,
        batch.one(if success { 1.0 } else { 0.0 }),
    );
    if success {
        let help = "When the batch last loaded, seconds since the epoch.";
        let at = batch.one(seconds_since_epoch(now));
        m.gauges("bronze_batch_last_success_timestamp_seconds", help, at);
    }
}

/// The metrics of a run that failed before it had a report: `bronze_batch_success` 0.
pub fn failed_run_metrics(landing_path: &str, batch_id: &str) -> String {
    let labels: Labels = vec![
        ("landing_path", landing_path.to_string()),
        ("batch_id", batch_id.to_string()),
    ];
    let mut m = Exposition::default();
    m.gauges("bronze_batch_success", SUCCESS_HELP, [(labels, 0.0)]);
    m.text()
}

/// A landing zone's backlog per entity ([`crate::Ingest::status`]), with the age in
/// seconds of each entity's oldest batch not loaded (`ages`, by landing path; 0 for an
/// entity with none).
pub fn backlog_metrics(entities: &[EntityStatus], ages: &BTreeMap<String, f64>) -> String {
    let of = |f: &dyn Fn(&EntityStatus) -> Option<f64>| -> Vec<(Labels, f64)> {
        entities
            .iter()
            .filter_map(|e| Some((vec![("landing_path", e.landing_path.clone())], f(e)?)))
            .collect()
    };
    let mut m = Exposition::default();
    let pending = of(&|e| Some(e.pending as f64));
    m.gauges(
        "bronze_backlog_pending_batches",
        "Batches never loaded and not being loaded.",
        pending,
    );
    let failed = of(&|e| Some(e.failed as f64));
    m.gauges(
        "bronze_backlog_failed_batches",
        "Batches whose latest run failed.",
        failed,
    );
    let changed = of(&|e| Some(e.changed.len() as f64));
    m.gauges(
        "bronze_backlog_changed_batches",
        "Loaded batches whose folder changed after their load (files added, changed or removed).",
        changed,
    );
    let unregistered = of(&|e| Some(e.unregistered.len() as f64));
    m.gauges(
        "bronze_backlog_unregistered_tables",
        "Tables the entity's runs created or widened that the catalog of [metastore] has not taken yet.",
        unregistered,
    );
    let busy = of(&|e| Some(e.in_progress.len() as f64));
    m.gauges(
        "bronze_backlog_in_progress_batches",
        "Batches a run holds the lease of.",
        busy,
    );
    let age = of(&|e| Some(ages.get(&e.landing_path).copied().unwrap_or(0.0)));
    let help = "Age of the oldest batch not loaded, since its folder's newest file landed.";
    m.gauges("bronze_backlog_oldest_pending_age_seconds", help, age);
    let last = of(&|e| Some(e.last_loaded_micros? as f64 / 1e6));
    let help = "When the latest run that loaded a batch of the entity started.";
    m.gauges("bronze_backlog_last_loaded_timestamp_seconds", help, last);
    m.text()
}

/// The gateway URL of the group `label=value` of job `bronze`:
/// `<url>/metrics/job/bronze/<label>@base64/<value>` (base64url, as the Pushgateway takes
/// a value holding `/`). Batch runs group by `landing_path`, backlogs by `backlog` (the
/// landing root).
pub fn group_url(gateway: &str, label: &str, value: &str) -> String {
    use base64::Engine as _;
    let key = base64::engine::general_purpose::URL_SAFE.encode(value);
    format!(
        "{}/metrics/job/{JOB}/{label}@base64/{key}",
        gateway.trim_end_matches('/')
    )
}

/// Whether a push replaces the whole group or only the metrics it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// `PUT`: the group becomes these metrics.
    Group,
    /// `POST`: these metrics replace theirs; the group's others stay.
    Metrics,
}

/// Pushes `body` to the group `label=value` of the gateway at `url`, within
/// [`PUSH_TIMEOUT`]. The error says what failed and where, for a warning.
pub async fn push(
    url: &str,
    label: &str,
    value: &str,
    body: String,
    replace: Replace,
) -> Result<(), String> {
    let target = group_url(url, label, value);
    let client = reqwest::Client::builder()
        .timeout(PUSH_TIMEOUT)
        .build()
        .map_err(|e| format!("metrics not pushed to {url}: {e}"))?;
    let request = match replace {
        Replace::Group => client.put(&target),
        Replace::Metrics => client.post(&target),
    };
    let response = request
        .header("Content-Type", "text/plain; version=0.0.4")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("metrics not pushed to {url}: {e}"))?;
    if response.status().is_success() {
        Ok(())
    } else {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        Err(format!(
            "metrics not pushed to {url}: the gateway answered {status}: {}",
            text.trim()
        ))
    }
}

/// With [`crate::IngestConfig::metrics_push`]: the run's metrics to the gateway (the whole
/// group replaced), or `bronze_batch_success 0` alone for a run that failed before its
/// report. Not for a batch another run holds or loaded: that run pushes. A gateway
/// that cannot take them costs a warning, on the report when there is one.
pub(super) fn push_run_metrics(
    ctx: &Context,
    batch_dirs: &[impl AsRef<std::path::Path>],
    result: &mut crate::error::Result<BatchReport>,
) {
    let Some(url) = &ctx.config.metrics_push else {
        return;
    };
    let (landing_path, body, replace) = match result {
        Ok(report) => (
            landing_path_of(report),
            batch_metrics(report, std::time::SystemTime::now()),
            Replace::Group,
        ),
        Err(Error::AlreadyLoaded { .. } | Error::BatchLeased { .. }) => return,
        Err(_) => {
            let Some((landing_path, batch_id)) = discovery::folder_identity(ctx, batch_dirs) else {
                return;
            };
            let body = failed_run_metrics(&landing_path, &batch_id);
            (landing_path, body, Replace::Metrics)
        }
    };
    let pushed = ctx
        .runtime()
        .block_on(push(url, "landing_path", &landing_path, body, replace));
    if let Err(warning) = pushed {
        tracing::warn!("{warning}");
        if let Ok(report) = result {
            report.warnings.push(warning);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_url_carries_the_landing_path_in_base64() {
        assert_eq!(
            group_url("http://gw:9091/", "landing_path", "kafka-eu/market"),
            "http://gw:9091/metrics/job/bronze/landing_path@base64/a2Fma2EtZXUvbWFya2V0"
        );
    }

    #[test]
    fn tables_not_registered_are_counted_per_batch_and_per_entity() {
        let report = crate::BatchReport {
            batch_id: "b1".into(),
            unregistered: vec!["db.t: down".into(), "db.u: down".into()],
            ..Default::default()
        };
        let text = batch_metrics(&report, SystemTime::UNIX_EPOCH);
        let line = text
            .lines()
            .find(|l| l.starts_with("bronze_batch_unregistered_tables{"))
            .unwrap_or_default();
        assert!(
            line.ends_with(" 2.0") && line.contains("batch_id=\"b1\""),
            "{text}"
        );
        let record = crate::metastore::pending::Unregistered {
            database: "db".into(),
            table: "t".into(),
            landing_path: "s/e".into(),
            reason: "down".into(),
            since_micros: 0,
            version: 3,
        };
        let entity = EntityStatus {
            landing_path: "s/e".into(),
            unregistered: vec![record],
            ..Default::default()
        };
        let text = backlog_metrics(&[entity], &BTreeMap::new());
        assert!(
            text.contains("bronze_backlog_unregistered_tables{landing_path=\"s/e\"} 1.0"),
            "{text}"
        );
    }

    #[test]
    fn a_failed_run_reports_success_zero_and_no_timestamp() {
        let text = failed_run_metrics("s/e", "b1");
        assert!(
            text.contains("bronze_batch_success{landing_path=\"s/e\",batch_id=\"b1\"} 0.0"),
            "{text}"
        );
        assert!(!text.contains("last_success"), "{text}");
    }
}
