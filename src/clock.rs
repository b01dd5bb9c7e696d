//! Time as bronze stamps it: microseconds since the Unix epoch, UTC.

/// Now, in microseconds since the Unix epoch (UTC).
pub(crate) fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
