//! `bronze report --html`: an [`Overview`] as one self-contained HTML page.
//!
//! Charts are inline SVG drawn here: no script, no style sheet or font fetched, so the
//! file opens anywhere, offline, and prints. Each chart is an `<svg class="chart"
//! data-chart="…">` whose data points are the elements of class `point` (one per batch
//! run, or per table), each with a `<title>` a browser shows on hover.

use std::fmt::Write as _;

use super::overview::{BatchRun, Overview};
use super::{SIZE_BUCKETS, TableHealth};

/// Plot geometry: the SVG's size and the margins around the plotting area.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 36.0;

/// Series colours (colour-blind safe: Okabe-Ito).
const BLUE: &str = "#0072B2";
const ORANGE: &str = "#E69F00";
const GREY: &str = "#999999";
const RED: &str = "#D55E00";
const GREEN: &str = "#009E73";
const SKY: &str = "#56B4E9";
const PURPLE: &str = "#CC79A7";
const YELLOW: &str = "#F0E442";

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1000px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;margin:0 0 12px}.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eee}
th{background:#f6f6f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.flag td{background:#fff4e5}.bad{color:#b00020}.none{color:#777;font-style:italic}
svg text{font:11px system-ui,sans-serif;fill:#444}.grid{stroke:#e5e5e5}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #e3e3e3;border-radius:6px;padding:8px 14px;min-width:130px}
.card b{display:block;font-size:20px}
";

impl Overview {
    /// The page.
    pub fn to_html(&self) -> String {
        let mut h = String::with_capacity(64 << 10);
        self.head(&mut h);
        self.cards(&mut h);
        self.run_charts(&mut h);
        self.tables(&mut h);
        self.failures(&mut h);
        self.landing(&mut h);
        h.push_str(
            "<p class=\"meta\">Made by <code>bronze report --html</code>; the same data as \
             JSON: <code>bronze report --json</code>.</p>\n</body></html>\n",
        );
        h
    }

    /// The page's head, style sheet included, and its title lines.
    fn head(&self, h: &mut String) {
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
             <title>bronze: {schema} at {catalog}</title><style>{STYLE}</style></head><body>\n\
             <h1>bronze lakehouse report</h1>\n<p class=\"meta\">Schema <b>{schema}</b> of \
             <b>{catalog}</b>, read {at}.</p>\n",
            schema = esc(&self.schema),
            catalog = esc(&self.catalog),
            at = esc(&self.generated_at),
        );
    }

    /// The charts of the batch runs: rows, corrupt lines and duplicates, wall time by
    /// stage.
    fn run_charts(&self, h: &mut String) {
        h.push_str("<h2>Rows loaded per batch run</h2>\n");
        legend(h, &[(BLUE, "rows (messages written)"), (RED, "run failed")]);
        h.push_str(&bars(
            "rows",
            &self.batches,
            &[("rows", BLUE)],
            |b| vec![b.rows as f64],
            fmt_number,
        ));
        h.push_str("<h2>Corrupt lines and duplicates per batch run</h2>\n");
        legend(
            h,
            &[
                (ORANGE, "corrupt lines (in _corrupt_records)"),
                (GREY, "duplicates dropped"),
            ],
        );
        h.push_str(&bars(
            "bad-lines",
            &self.batches,
            &[("corrupt", ORANGE), ("duplicates", GREY)],
            |b| vec![b.corrupt as f64, b.duplicates as f64],
            fmt_number,
        ));
        h.push_str("<h2>Wall time per batch run, by stage</h2>\n");
        legend(
            h,
            &[
                (SKY, "read and stage"),
                (BLUE, "write tables"),
                (PURPLE, "record and clean up"),
            ],
        );
        h.push_str(&bars(
            "time",
            &self.batches,
            &[("read", SKY), ("tables", BLUE), ("finish", PURPLE)],
            |b| vec![b.stages.read, b.stages.tables, b.stages.finish],
            fmt_seconds,
        ));
    }

    /// Headline figures.
    fn cards(&self, h: &mut String) {
        let runs = self.batches.len();
        let failed = self.batches.iter().filter(|b| !b.ok).count();
        let rows: u64 = self.batches.iter().filter(|b| b.ok).map(|b| b.rows).sum();
        let corrupt: u64 = self.batches.iter().map(|b| b.corrupt).sum();
        let tables = self.health.tables.len();
        let flagged = self.health.tables.iter().filter(|t| t.flagged).count();
        let card = |h: &mut String, value: String, label: &str| {
            let _ = write!(h, "<div class=\"card\"><b>{value}</b>{label}</div>");
        };
        h.push_str("<div class=\"cards\">");
        card(h, runs.to_string(), "batch runs");
        card(h, failed.to_string(), "failed runs");
        card(h, fmt_count(rows), "rows loaded");
        card(h, fmt_count(corrupt), "corrupt lines kept");
        card(h, tables.to_string(), "tables");
        card(h, flagged.to_string(), "tables flagged");
        h.push_str("</div>\n");
    }

    /// File sizes per table (a chart) and the health table with its flags.
    fn tables(&self, h: &mut String) {
        let target = self.target_file_bytes;
        h.push_str("<h2>Files per table, by size against the target</h2>\n");
        let mut bounds = vec![0u64];
        bounds.extend(SIZE_BUCKETS.iter().map(|f| (target as f64 * f) as u64));
        let labels: Vec<String> = (0..6)
            .map(|i| match i {
                5 => format!("≥ {} (target)", fmt_bytes(target)),
                0 => format!("< {}", fmt_bytes(bounds[1])),
                i => format!("{}–{}", fmt_bytes(bounds[i]), fmt_bytes(bounds[i + 1])),
            })
            .collect();
        let colours = [RED, ORANGE, YELLOW, SKY, BLUE, GREEN];
        let items: Vec<(&str, &str)> = colours
            .iter()
            .zip(&labels)
            .map(|(c, l)| (*c, l.as_str()))
            .collect();
        legend(h, &items);
        h.push_str(&file_sizes(&self.health.tables, &labels, &colours));
        let _ = writeln!(
            h,
            "<p class=\"meta\">Small files: under half the target ({}). Flagged: more \
             than 50 files averaging under 25 MB (<code>bronze health</code>).</p>",
            fmt_bytes(target / 2)
        );
        h.push_str(
            "<table><tr><th>table</th><th>version</th><th>files</th><th>bytes</th>\
             <th>avg file</th><th>small</th><th>versions since checkpoint</th>\
             <th>since OPTIMIZE</th><th>vacuumable</th><th>action</th></tr>\n",
        );
        for t in &self.health.tables {
            let _ = writeln!(
                h,
                "<tr{}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                if t.flagged { " class=\"flag\"" } else { "" },
                esc(&t.table),
                t.version,
                t.files,
                fmt_bytes(t.bytes),
                fmt_bytes(t.avg_file_bytes),
                t.small_files,
                t.versions_since_checkpoint,
                t.since_optimize(),
                t.vacuum_files,
                esc(&t.action),
            );
        }
        h.push_str("</table>\n");
    }

    /// The latest failures.
    fn failures(&self, h: &mut String) {
        h.push_str("<h2>Latest failures</h2>\n");
        if self.failures.is_empty() {
            h.push_str("<p class=\"none\">No failed write or row accounting.</p>\n");
            return;
        }
        h.push_str(
            "<table><tr><th>at</th><th>batch</th><th>landing path</th><th>table</th>\
             <th>reason</th></tr>\n",
        );
        for f in &self.failures {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"bad\">{}</td></tr>",
                esc(&f.at),
                esc(&f.batch_id),
                esc(&f.landing_paths),
                esc(&f.table),
                esc(&f.reason)
            );
        }
        h.push_str("</table>\n");
    }

    /// A landing zone's backlog, when one was given.
    fn landing(&self, h: &mut String) {
        if self.landing.is_empty() {
            return;
        }
        h.push_str(
            "<h2>Landing zone</h2>\n<table><tr><th>entity</th><th>loaded</th>\
             <th>pending</th><th>failed</th><th>in progress</th><th>oldest pending</th>\
             <th>last failure</th></tr>\n",
        );
        for e in &self.landing {
            let failure = e
                .last_failure
                .as_ref()
                .map_or(String::new(), |f| format!("{}: {}", f.batch_id, f.reason));
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"bad\">{}</td></tr>",
                esc(&e.landing_path),
                e.loaded,
                e.pending,
                e.failed,
                e.in_progress.len(),
                esc(e.oldest_pending.as_deref().unwrap_or("")),
                esc(&failure),
            );
        }
        h.push_str("</table>\n");
    }
}

/// A legend line.
fn legend(h: &mut String, items: &[(&str, &str)]) {
    h.push_str("<p class=\"legend\">");
    for (colour, label) in items {
        let _ = write!(
            h,
            "<span><i style=\"background:{colour}\"></i>{}</span>",
            esc(label)
        );
    }
    h.push_str("</p>\n");
}

/// A bar chart with one stacked bar (class `point`) per batch run: `values` gives each
/// series' value, stacked bottom up; a failed run's bar is outlined red.
fn bars(
    name: &str,
    runs: &[BatchRun],
    series: &[(&str, &str)],
    values: impl Fn(&BatchRun) -> Vec<f64>,
    fmt: impl Fn(f64) -> String,
) -> String {
    let mut s = String::new();
    let stacks: Vec<Vec<f64>> = runs.iter().map(&values).collect();
    let max = stacks
        .iter()
        .map(|v| v.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let (top, ticks) = scale(max);
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let _ = write!(
        s,
        "<svg class=\"chart\" data-chart=\"{name}\" data-points=\"{}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         width=\"100%\" role=\"img\" aria-label=\"{name} per batch run\">",
        runs.len()
    );
    axis(&mut s, top, ticks, &fmt);
    if runs.is_empty() {
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no batch run recorded yet</text>",
            LEFT + pw / 2.0,
            TOP + ph / 2.0
        );
    }
    let step = pw / runs.len().max(1) as f64;
    let bar = (step * 0.8).clamp(1.0, 48.0);
    for (i, (run, stack)) in runs.iter().zip(&stacks).enumerate() {
        let x = LEFT + step * i as f64 + (step - bar) / 2.0;
        let tip = bar_tip(run, series, stack, &fmt);
        let _ = write!(
            s,
            "<g class=\"point\" data-batch=\"{}\" data-run=\"{}\"><title>{}</title>",
            esc(&run.batch_id),
            esc(&run.run_id),
            esc(&tip)
        );
        stacked_bar(&mut s, run, series, stack, BarAt { x, width: bar, top });
        s.push_str("</g>");
    }
    first_and_last_ids(&mut s, runs);
    s.push_str("</svg>\n");
    s
}

/// The hover text of a run's bar: the run, then each series' value.
fn bar_tip(
    run: &BatchRun,
    series: &[(&str, &str)],
    stack: &[f64],
    fmt: &impl Fn(f64) -> String,
) -> String {
    let mut tip = format!(
        "{} · {} · {}{}",
        run.batch_id,
        run.landing_paths,
        run.started_at,
        if run.ok { "" } else { " · FAILED" }
    );
    for ((label, _), v) in series.iter().zip(stack) {
        let _ = write!(tip, "\n{label}: {}", fmt(*v));
    }
    tip
}

/// Where a bar goes on a chart: its left edge `x`, its `width`, and the value at the top
/// of the chart's scale.
#[derive(Clone, Copy)]
struct BarAt {
    x: f64,
    width: f64,
    top: f64,
}

/// A run's bar `at` its place, its series' values stacked bottom up on the chart's
/// scale, and a red line under it when the run failed.
fn stacked_bar(s: &mut String, run: &BatchRun, series: &[(&str, &str)], stack: &[f64], at: BarAt) {
    let BarAt { x, width: bar, top } = at;
    let ph = HEIGHT - TOP - BOTTOM;
    let mut y = TOP + ph;
    for ((_, colour), v) in series.iter().zip(stack) {
        let height = if top > 0.0 { v / top * ph } else { 0.0 };
        y -= height;
        let _ = write!(
            s,
            "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{bar:.2}\" height=\"{height:.2}\" fill=\"{colour}\"/>"
        );
    }
    if !run.ok {
        let _ = write!(
            s,
            "<rect x=\"{x:.2}\" y=\"{}\" width=\"{bar:.2}\" height=\"3\" fill=\"{RED}\"/>",
            TOP + ph + 2.0
        );
    }
}

/// The first and last batch ids under the axis.
fn first_and_last_ids(s: &mut String, runs: &[BatchRun]) {
    if let (Some(first), Some(last)) = (runs.first(), runs.last()) {
        let y = HEIGHT - 8.0;
        let _ = write!(
            s,
            "<text x=\"{LEFT}\" y=\"{y}\">{}</text>",
            esc(&first.batch_id)
        );
        if runs.len() > 1 {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{}</text>",
                WIDTH - RIGHT,
                esc(&last.batch_id)
            );
        }
    }
}

/// Horizontal gridlines with their values, `ticks` steps up to `top`.
fn axis(s: &mut String, top: f64, ticks: u32, fmt: &impl Fn(f64) -> String) {
    let ph = HEIGHT - TOP - BOTTOM;
    for i in 0..=ticks {
        let v = top * i as f64 / ticks as f64;
        let y = TOP + ph - ph * i as f64 / ticks as f64;
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            fmt(v)
        );
    }
}

/// One horizontal bar per table (class `point`): its files by size bucket.
fn file_sizes(tables: &[TableHealth], labels: &[String], colours: &[&str; 6]) -> String {
    let row = 20.0;
    let name_w = 180.0;
    let height = TOP + row * tables.len().max(1) as f64 + BOTTOM;
    let most = tables.iter().map(|t| t.files).max().unwrap_or(0) as f64;
    let (top, ticks) = scale(most);
    let pw = WIDTH - name_w - RIGHT;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart\" data-chart=\"file-sizes\" data-points=\"{}\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"100%\" role=\"img\" aria-label=\"files per table by size\">",
        tables.len()
    );
    for i in 0..=ticks {
        let x = name_w + pw * i as f64 / ticks as f64;
        let _ = write!(
            s,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{}\"/>\
             <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            height - BOTTOM,
            height - BOTTOM + 14.0,
            fmt_number(top * i as f64 / ticks as f64)
        );
    }
    for (i, t) in tables.iter().enumerate() {
        let y = TOP + row * i as f64;
        let mut tip = format!("{}: {} files", t.table, t.files);
        for (label, n) in labels.iter().zip(t.file_sizes) {
            if n > 0 {
                let _ = write!(tip, "\n{label}: {n}");
            }
        }
        let _ = write!(
            s,
            "<g class=\"point\" data-table=\"{}\"><title>{}</title>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}{}</text>",
            esc(&t.table),
            esc(&tip),
            name_w - 8.0,
            y + row * 0.7,
            esc(&t.table),
            if t.flagged { " ⚑" } else { "" }
        );
        let mut x = name_w;
        for (n, colour) in t.file_sizes.iter().zip(colours) {
            let w = if top > 0.0 { *n as f64 / top * pw } else { 0.0 };
            let _ = write!(
                s,
                "<rect x=\"{x:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{colour}\"/>",
                y + 3.0,
                row - 6.0
            );
            x += w;
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>\n");
    s
}

/// A chart's top and its number of gridline steps (2 to 4) for values up to `max`: the
/// steps of a round size ([`nice_ceiling`] of a quarter of `max`).
fn scale(max: f64) -> (f64, u32) {
    let step = nice_ceiling(max / 4.0);
    let ticks = ((max / step).ceil() as u32).clamp(2, 4);
    (step * ticks as f64, ticks)
}

/// The smallest of 1, 2, 2.5, 5 × 10ⁿ at or above `v`, 1 for 0.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * magnitude)
}

/// `1234567` as `1.2M`.
fn fmt_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}G", n as f64 / 1e9),
    }
}

/// A count or an axis value between counts (`2.5`).
fn fmt_number(v: f64) -> String {
    if v < 1000.0 && v.fract() != 0.0 {
        format!("{v:.1}")
    } else {
        fmt_count(v as u64)
    }
}

/// Bytes in binary units.
fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Seconds, short.
fn fmt_seconds(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v < 1.0 {
        format!("{:.0} ms", v * 1e3)
    } else {
        format!("{v:.1} s")
    }
}

/// Text for HTML (element content and attribute values).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_tops_units_and_escapes() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(180.0), 200.0);
        assert_eq!(nice_ceiling(2.2), 2.5);
        assert_eq!(scale(2400.0), (3000.0, 3));
        assert_eq!(scale(50.0), (60.0, 3));
        assert_eq!(scale(0.0), (2.0, 2));
        assert_eq!(fmt_bytes(128 << 20), "128 MiB");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_count(1_234_567), "1.2M");
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
