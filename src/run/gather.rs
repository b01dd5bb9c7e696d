//! Gathering: the tables several topics of a batch feed, held while the topics are
//! flattened so that each gets one commit ([`Gather`]), and the slots that bound how many
//! topics flatten at once.

use std::collections::BTreeMap;

use arrow::array::RecordBatch;

use crate::naming::TableName;

/// A topic's flattened rows: table → batches (one per staged slice).
pub(super) type SlicedPlan = BTreeMap<TableName, Vec<RecordBatch>>;

/// How many of `topics` map to each topic table (names that sanitise alike share one).
pub(super) fn topics_per_table(topics: &[(String, u64)]) -> BTreeMap<TableName, usize> {
    let mut counts: BTreeMap<TableName, usize> = BTreeMap::new();
    for (topic, _) in topics {
        *counts.entry(TableName::for_topic(topic)).or_default() += 1;
    }
    counts
}

/// A counting semaphore: at most `n` holders of a [`Slot`] at once.
pub(super) struct Slots {
    pub(super) free: parking_lot::Mutex<usize>,
    pub(super) freed: parking_lot::Condvar,
}

/// One of [`Slots`], given back on drop.
pub(super) struct Slot<'a>(&'a Slots);

impl Slots {
    pub(super) fn new(n: usize) -> Self {
        Slots {
            free: parking_lot::Mutex::new(n.max(1)),
            freed: parking_lot::Condvar::new(),
        }
    }

    /// Waits for a free slot.
    pub(super) fn take(&self) -> Slot<'_> {
        let mut free = self.free.lock();
        while *free == 0 {
            self.freed.wait(&mut free);
        }
        *free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.freed.notify_one();
    }
}

/// One topic's rows for one table: `(topic, staged messages, rows)`.
pub(super) type TopicPart = (String, u64, Vec<RecordBatch>);

/// Tables in name order, each with its topics' parts.
pub(super) type GatheredTables = Vec<(TableName, Vec<TopicPart>)>;

/// Whether a topic's task writes a table of its own (one no other topic feeds) on its
/// own, as soon as the topic is flattened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OwnTable {
    /// It does: one more table written early.
    Written,
    /// Every table of the topic is gathered.
    None,
}

/// The tables several topics may feed, gathered while topics are flattened
/// ([`super::topic::Fanout::topic_task`]).
pub(super) struct Gathered {
    /// Topics not flattened yet.
    pub(super) remaining: usize,
    /// Topic tables written as soon as their topic was flattened.
    pub(super) early: usize,
    /// Table → its topics' parts with the topic's index, in the order they were flattened.
    pub(super) by_table: BTreeMap<TableName, Vec<(usize, TopicPart)>>,
}

impl Gathered {
    /// Adds the tables of the topic at `index` (of the batch's topics) and counts it done
    /// (`own`: whether its own table is written on its own). For the last topic: the gathered
    /// tables in name order, each table's parts in topic order (the order its schema
    /// evolves in, whatever order the topics were flattened in), and the number of early
    /// tables.
    pub(super) fn done(
        &mut self,
        index: usize,
        topic: &str,
        rows_in: u64,
        plan: SlicedPlan,
        own: OwnTable,
    ) -> Option<(GatheredTables, usize)> {
        for (table, batches) in plan {
            self.by_table
                .entry(table)
                .or_default()
                .push((index, (topic.to_string(), rows_in, batches)));
        }
        self.early += usize::from(own == OwnTable::Written);
        self.remaining -= 1;
        if self.remaining > 0 {
            return None;
        }
        let tables = std::mem::take(&mut self.by_table)
            .into_iter()
            .map(|(table, mut parts)| {
                parts.sort_by_key(|(index, _)| *index);
                (table, parts.into_iter().map(|(_, part)| part).collect())
            })
            .collect();
        Some((tables, self.early))
    }
}

/// One commit per table ([`Fanout::gather`]): the tables several topics may feed wait
/// for the last topic flattened.
pub(super) struct Gather {
    /// How many of the batch's topics map to each topic table.
    per_table: BTreeMap<TableName, usize>,
    pub(super) gathered: parking_lot::Mutex<Gathered>,
    /// Flattening is CPU work: as many topics at once as parse threads, so that each
    /// topic's staged rows are freed before most others start (the pool's other threads
    /// still overlap commits waiting on storage).
    pub(super) slots: Slots,
}

impl Gather {
    pub(super) fn new(topics: &[(String, u64)], threads: usize) -> Self {
        Gather {
            per_table: topics_per_table(topics),
            gathered: parking_lot::Mutex::new(Gathered {
                remaining: topics.len(),
                early: 0,
                by_table: BTreeMap::new(),
            }),
            slots: Slots::new(threads),
        }
    }

    /// Whether `topic`'s rows of `table` are gathered: every table but the topic's own,
    /// and its own too when another topic of the batch maps to it (topics that sanitise
    /// alike), so that it also gets one commit.
    pub(super) fn shared(&self, topic: &str, table: &TableName) -> bool {
        *table != TableName::for_topic(topic) || self.per_table.get(table) != Some(&1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_tables_come_with_the_last_topic_their_parts_in_topic_order() {
        let batch = |rows: i64| {
            let a = arrow::array::Int64Array::from_iter_values(0..rows);
            RecordBatch::try_from_iter([("x", std::sync::Arc::new(a) as arrow::array::ArrayRef)])
                .unwrap()
        };
        let child = TableName::for_topic("currentprice");
        let plan = |rows| SlicedPlan::from([(child.clone(), vec![batch(rows)])]);
        let mut g = Gathered {
            remaining: 3,
            early: 0,
            by_table: BTreeMap::new(),
        };
        // Flattened in the order 2, 0, 1; topic 1 feeds no gathered table.
        assert!(g.done(2, "trade", 3, plan(3), OwnTable::Written).is_none());
        assert!(g.done(0, "news", 1, plan(1), OwnTable::None).is_none());
        let (tables, early) = g
            .done(1, "quote", 2, SlicedPlan::new(), OwnTable::Written)
            .unwrap();
        assert_eq!(early, 2);
        assert_eq!(tables.len(), 1);
        let (table, parts) = &tables[0];
        assert_eq!(table, &child);
        let parts: Vec<(&str, u64, usize)> = parts
            .iter()
            .map(|(t, rows_in, b)| (t.as_str(), *rows_in, b[0].num_rows()))
            .collect();
        assert_eq!(parts, [("news", 1, 1), ("trade", 3, 3)]);
        assert!(g.by_table.is_empty());
    }
}
