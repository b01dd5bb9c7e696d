//! What a run checks of its column type hints ([`crate::column_types`]) once it knows the
//! batch's topics, before any table is written: a hint for a topic that is nowhere is an
//! error; a hint that contradicts the type of a column a table of the batch has refuses
//! the batch ([`HintTargets`], with the checks of [`crate::table::writable`]); a hint
//! that matched no column of the batch is a warning in the report.

use std::collections::{BTreeMap, BTreeSet};

use super::gather::SlicedPlan;
use crate::column_types::ColumnType;
use crate::config::{ChildNaming, FlattenConfig};
use crate::error::{Error, Result};
use crate::flatten::HINT_META;
use crate::naming::TableName;
use crate::table::writable::{Look, Refusal};

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
                if let Some(pointer) = f.metadata().get(HINT_META) {
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
    // A topic with no hints (an empty map, as a library caller may pass) hints nothing.
    let missing: Vec<&String> = cfg
        .topic_column_types
        .iter()
        .filter(|(t, hints)| !hints.is_empty() && !topics.iter().any(|(name, _)| name == *t))
        .map(|(t, _)| t)
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
    let Some((pointer, ty)) = cfg.topic_column_types[topic].iter().next() else {
        return Ok(());
    };
    let batch: Vec<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
    Err(Error::Config {
        name: "column_types",
        reason: format!(
            "`{topic}:{pointer}={ty}`: no topic `{topic}` in this batch ({}) nor a table of it in the schema",
            batch.join(", ")
        ),
    })
}

/// The columns the hints of a batch's topics type, by the table they are in: `(hint as
/// given, column path in the table's rows, type)`. Child tables are named as the
/// flattener names them ([`crate::config::FlattenConfig::child_naming`], mapped paths).
#[derive(Debug, Default)]
pub(super) struct HintTargets(BTreeMap<TableName, Vec<(String, String, ColumnType)>>);

impl HintTargets {
    /// The targets of the hints that apply to `topics`.
    pub(super) fn of(cfg: &FlattenConfig, topics: &[(String, u64)]) -> HintTargets {
        let mut targets = HintTargets::default();
        for (topic, _) in topics {
            for (key, hint_topic, pointer) in cfg.hints() {
                let own = cfg.topic_column_types.get(topic);
                let applies = match hint_topic {
                    Some(t) => t == topic,
                    None => own.is_none_or(|own| !own.contains_key(pointer)),
                };
                let ty = cfg.column_type(topic, pointer);
                if let (true, Some(ty), Some((table, path))) =
                    (applies, ty, target(cfg, topic, pointer))
                {
                    targets.0.entry(table).or_default().push((key, path, ty));
                }
            }
        }
        targets
    }

    /// The tables a hint types a column of.
    pub(super) fn tables(&self) -> Vec<TableName> {
        self.0.keys().cloned().collect()
    }

    /// Why `table` (as `look` saw it) cannot take the batch: a hinted column it has with
    /// another type, named with both types.
    pub(super) fn conflict(&self, table: &TableName, look: &Look) -> Option<Refusal> {
        let hints = self.0.get(table)?;
        let columns = look.columns();
        hints.iter().find_map(|(key, path, ty)| {
            let (name, _, have) = columns.iter().find(|(_, p, _)| p == path)?;
            let want = ty.to_string();
            (*have != want).then(|| Refusal {
                feature: format!("column `{name}` ({path}) as {have}, but the hint `{key}` says {want}"),
                fix: "a hint types new columns only; retype the column as the README's \"Types\" says, or drop the hint".into(),
            })
        })
    }
}

/// The table and the column path in its rows that `pointer` of `topic`'s payloads
/// addresses: the topic's table, or for a pointer through `*` (an array's elements) the
/// child table as the flattener names it. `None` for a child table named like its own
/// topic's table (the flattener qualifies it).
fn target(cfg: &FlattenConfig, topic: &str, pointer: &str) -> Option<(TableName, String)> {
    let topic_table = TableName::for_topic(topic);
    let mut table = topic_table.clone();
    let mut origin: Option<String> = None;
    let mut keys: Vec<String> = Vec::new();
    let mut rest = String::new();
    for segment in pointer.split('/').skip(1) {
        if segment != "*" {
            keys.push(segment.replace("~1", "/").replace("~0", "~"));
            rest.push('/');
            rest.push_str(segment);
            continue;
        }
        let joined = keys.join(".");
        let path = match &origin {
            None => joined,
            Some(p) => format!("{p}[].{joined}"),
        };
        let name = match cfg.mapped_child(&path) {
            Some(mapped) => TableName::for_child(&[mapped.to_string()]),
            None => {
                let mut parts = Vec::with_capacity(keys.len() + 1);
                if table != topic_table || cfg.child_naming == ChildNaming::Topic {
                    parts.push(table.as_str().to_string());
                }
                parts.append(&mut keys);
                TableName::for_child(&parts)
            }
        };
        if name == topic_table {
            return None;
        }
        table = name;
        origin = Some(path);
        keys.clear();
        rest.clear();
    }
    Some((table, rest))
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
        // A topic given an empty map of hints (the field is public) is not an error.
        let mut empty = cfg();
        empty.topic_column_types.remove("u");
        empty.topic_column_types.insert("v".into(), BTreeMap::new());
        assert!(check_topics(&empty, &topics, || panic!("not listed")).is_ok());
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

    #[test]
    fn a_hint_addresses_the_topic_table_or_the_child_table_of_its_array() {
        let mut cfg = cfg();
        let at = |cfg: &FlattenConfig, topic, pointer| {
            target(cfg, topic, pointer).map(|(t, p)| (t.to_string(), p))
        };
        assert_eq!(at(&cfg, "t", "/a/b"), Some(("t".into(), "/a/b".into())));
        assert_eq!(
            at(&cfg, "t", "/legs/*/ts"),
            Some(("legs".into(), "/ts".into()))
        );
        assert_eq!(
            at(&cfg, "t", "/tags/*"),
            Some(("tags".into(), String::new()))
        );
        assert_eq!(
            at(&cfg, "t", "/a/legs/*/fills/*/px"),
            Some(("a__legs__fills".into(), "/px".into()))
        );
        cfg.child_naming = ChildNaming::Topic;
        assert_eq!(
            at(&cfg, "t", "/legs/*/ts"),
            Some(("t__legs".into(), "/ts".into()))
        );
        cfg.child_tables
            .insert("payload.legs".into(), "fills".into());
        assert_eq!(
            at(&cfg, "t", "/legs/*/ts"),
            Some(("fills".into(), "/ts".into()))
        );
        let targets = HintTargets::of(&cfg, &[("t".into(), 1), ("u".into(), 1)]);
        let t = &targets.0[&TableName::for_topic("t")];
        assert_eq!(
            t.iter()
                .map(|(k, p, ty)| format!("{k} {p} {ty}"))
                .collect::<Vec<_>>(),
            ["/a /a int64", "/b /b date", "t:/c /c json"]
        );
    }
}
