//! What a run checks of its column type hints ([`crate::column_types`]) once it knows the
//! batch's topics: a hint for a topic that is nowhere is an error before any table is
//! written; a hint that matched no column of the batch is a warning in the report.

use std::collections::BTreeSet;

use super::gather::SlicedPlan;
use crate::config::FlattenConfig;
use crate::error::{Error, Result};
use crate::flatten::HINT_META;
use crate::naming::TableName;

/// The hints the flattened tables of a run matched, as `(topic, pointer)`.
#[derive(Default)]
pub(super) struct HintsSeen(parking_lot::Mutex<BTreeSet<(String, String)>>);

impl HintsSeen {
    /// Records the hinted columns of `topic`'s flattened `plan` (marked by the
    /// flattener with their pointer).
    pub(super) fn record(&self, topic: &str, plan: &SlicedPlan) {
        let mut seen = self.0.lock();
        for batch in plan.values().flatten() {
            for f in batch.schema().fields() {
                if let Some(pointer) = f.metadata().get(HINT_META)
                    && !seen.contains(&(topic.to_string(), pointer.clone()))
                {
                    seen.insert((topic.to_string(), pointer.clone()));
                }
            }
        }
    }

    /// A warning for each hint that applies to a topic of the batch (`topics`) but matched
    /// no column of it.
    pub(super) fn warnings(self, cfg: &FlattenConfig, topics: &[(String, u64)]) -> Vec<String> {
        let seen = self.0.into_inner();
        let in_batch = |t: &str| topics.iter().any(|(name, _)| name == t);
        cfg.hints()
            .filter(|(_, topic, _)| topic.is_none_or(in_batch))
            .filter(|(_, topic, pointer)| {
                !seen
                    .iter()
                    .any(|(t, p)| p == pointer && topic.is_none_or(|topic| topic == t))
            })
            .map(|(key, _, _)| {
                format!("the column type hint `{key}` matched no column of this batch")
            })
            .collect()
    }
}

/// Refuses a hint for a topic that is neither in the batch (`topics`) nor has a table in
/// the schema (`tables`, listed only when needed): a typo in the topic, named with the
/// hint.
pub(super) fn check_topics(
    cfg: &FlattenConfig,
    topics: &[(String, u64)],
    tables: impl FnOnce() -> Result<Vec<TableName>>,
) -> Result<()> {
    let missing: Vec<&String> = cfg
        .topic_column_types
        .keys()
        .filter(|t| !topics.iter().any(|(name, _)| name == *t))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let tables = tables()?;
    let Some(topic) = missing
        .into_iter()
        .find(|t| !tables.contains(&TableName::for_topic(t)))
    else {
        return Ok(());
    };
    let (pointer, ty) = cfg.topic_column_types[topic]
        .iter()
        .next()
        .expect("a topic's hints are never empty");
    let batch: Vec<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
    Err(Error::Config {
        name: "column_types",
        reason: format!(
            "`{topic}:{pointer}={ty}`: no topic `{topic}` in this batch ({}) nor a table of it in the schema",
            batch.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FlattenConfig {
        crate::Settings::from_toml(
            "[flatten.column_types]\n\"/a\" = \"int64\"\n\"/b\" = \"date\"\n[topics.t.column_types]\n\"/c\" = \"json\"\n[topics.u.column_types]\n\"/d\" = \"json\"\n",
        )
        .unwrap()
        .resolve()
        .unwrap()
        .flatten
    }

    #[test]
    fn a_hint_for_a_topic_that_is_nowhere_is_an_error_naming_it() {
        let topics = [("t".to_string(), 1)];
        let err = check_topics(&cfg(), &topics, || Ok(Vec::new())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid setting `column_types`: `u:/d=json`: no topic `u` in this batch (t) nor a table of it in the schema"
        );
        let with_table = || Ok(vec![TableName::for_topic("u")]);
        assert!(check_topics(&cfg(), &topics, with_table).is_ok());
        let both = [("t".to_string(), 1), ("u".to_string(), 1)];
        assert!(check_topics(&cfg(), &both, || panic!("not listed")).is_ok());
    }

    #[test]
    fn hints_that_matched_no_column_are_warned_about() {
        let seen = HintsSeen::default();
        seen.0.lock().insert(("t".into(), "/a".into()));
        seen.0.lock().insert(("t".into(), "/d".into()));
        let topics = [("t".to_string(), 1)];
        assert_eq!(
            seen.warnings(&cfg(), &topics),
            [
                "the column type hint `/b` matched no column of this batch",
                "the column type hint `t:/c` matched no column of this batch",
            ]
        );
    }
}
