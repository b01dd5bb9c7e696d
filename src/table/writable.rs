//! Whether bronze may write a table another engine may have changed (turned on row
//! tracking, liquid clustering, column mapping, a CHECK constraint…): the table's
//! protocol and properties against what bronze's writes do. [`super::Opener::refusals`] checks
//! every table a batch would write before the batch's first commit, so a table bronze
//! cannot write fails the whole batch up front rather than its own commit half way
//! through the batch.

use buoyant_kernel::table_configuration::TableConfiguration;
use buoyant_kernel::table_features::TableFeature;

/// Why bronze will not write a table, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The feature or property in the way (`rowTracking`, `delta.appendOnly`, …).
    pub(crate) feature: String,
    /// Why bronze does not write it, and the fix.
    pub(crate) fix: String,
}

/// What a look at a table's protocol and metadata found ([`look`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Look {
    /// Why bronze will not write it, if it will not.
    pub(crate) refusal: Option<Refusal>,
    /// A child table (it has `_parent_id`): every topic with its array path writes it.
    pub(crate) child: bool,
    /// The table's schema, for the checks a run makes of it ([`Look::columns`]).
    pub(crate) schema: buoyant_kernel::schema::SchemaRef,
}

impl Look {
    /// The table's columns as `(name, path, type)`: the path its field metadata
    /// `bronze.path` records (else the name), the type as a hint names it
    /// ([`crate::column_types::type_text`]).
    pub(crate) fn columns(&self) -> Vec<(String, String, String)> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;

        let Ok(schema): std::result::Result<arrow::datatypes::Schema, _> =
            self.schema.as_ref().try_into_arrow()
        else {
            return Vec::new();
        };
        schema
            .fields()
            .iter()
            .map(|f| {
                let meta = f.metadata();
                let path = meta.get(crate::flatten::PATH_META).unwrap_or(f.name());
                let json = meta
                    .get(crate::flatten::JSON_META)
                    .is_some_and(|v| v == "true");
                let ty = crate::column_types::type_text(f.data_type(), json);
                (f.name().clone(), path.clone(), ty)
            })
            .collect()
    }
}

/// Writer features bronze's writes handle:
/// - what appends and whole-file replaces need nothing more of (append-only is checked
///   by [`append_only_refusal`], deletion vectors at the rewrite of a file with one);
/// - row tracking: row ids and commit versions on every file bronze adds, the ids a
///   removed file had on its remove ([`super::planned`]);
/// - domain metadata: bronze's commits name no domain but `delta.rowTracking`, so every
///   other writer's stays as it is; liquid clustering: bronze's files are unclustered,
///   which the protocol allows, with statistics for the clustering columns;
/// - the change data feed: a rewrite that writes rows of a file it removes again writes
///   a change data file ([`super::change_data`]);
/// - the features whose values a writer computes or checks (CHECK constraints,
///   invariants, generated and identity columns): while the table uses none of them
///   ([`constraint_refusal`], [`column_refusal`] refuse it when it does);
/// - in-commit timestamps: every commit stamps one, above the previous commit's
///   ([`super::planned`]);
/// - type widening: files written before a column was widened are read in the column's
///   type now ([`super::shape::conform`]); bronze itself never widens a column.
fn writes_feature(feature: &TableFeature) -> bool {
    match feature {
        TableFeature::AppendOnly
        | TableFeature::InCommitTimestamp
        | TableFeature::TypeWidening
        | TableFeature::TypeWideningPreview
        | TableFeature::TimestampWithoutTimezone
        | TableFeature::VariantType
        | TableFeature::VariantTypePreview
        | TableFeature::V2Checkpoint
        | TableFeature::DeletionVectors
        | TableFeature::RowTracking
        | TableFeature::DomainMetadata
        | TableFeature::ClusteredTable
        | TableFeature::CheckConstraints
        | TableFeature::Invariants
        | TableFeature::GeneratedColumns
        | TableFeature::IdentityColumns
        | TableFeature::ChangeDataFeed
        | TableFeature::ColumnMapping => true,
        TableFeature::Unknown(name) => name == "checkpointProtection",
        _ => false,
    }
}

/// Reader features bronze's reads handle (column mapping: [`super::mapping`]; type
/// widening: [`super::shape::conform`]).
fn reads_feature(feature: &TableFeature) -> bool {
    matches!(
        feature,
        TableFeature::ColumnMapping
            | TableFeature::TypeWidening
            | TableFeature::TypeWideningPreview
            | TableFeature::TimestampWithoutTimezone
            | TableFeature::DeletionVectors
            | TableFeature::VariantType
            | TableFeature::VariantTypePreview
            | TableFeature::V2Checkpoint
    )
}

/// Why bronze does not write tables with `feature`, and what to do.
fn feature_fix(feature: &str) -> String {
    let why = match feature {
        "liquid" => {
            "it is the preview of liquid clustering (Databricks Runtime 13), which the Delta \
             protocol does not define (tables clustered since use `clustering`)"
        }
        "icebergCompatV1" | "icebergCompatV2" => {
            "bronze does not write the Iceberg-compatible files and metadata it asks of every \
             writer (UniForm); turn UniForm off with `ALTER TABLE … UNSET TBLPROPERTIES \
             ('delta.universalFormat.enabledFormats')` and set \
             `delta.enableIcebergCompatV2 = false`"
        }
        _ => "bronze does not know this table feature",
    };
    format!(
        "{why}; drop the feature where its engine allows it (`ALTER TABLE … DROP FEATURE \
         {feature}`), or load the topic into a table without it (another `--schema`)"
    )
}

impl Refusal {
    fn of(feature: &str, fix: String) -> Refusal {
        Refusal {
            feature: feature.to_string(),
            fix,
        }
    }

    /// A table feature bronze does not read or write.
    fn feature(feature: &TableFeature) -> Refusal {
        let name = feature.to_string();
        Refusal::of(&name, feature_fix(&name))
    }
}

/// Whether a write may remove files from a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Removes {
    /// It may: a rerun replaces the batch's rows.
    Files,
    /// It only adds files.
    Nothing,
}

/// Why bronze will not write the table of `config` (`None`: it will) with a write that
/// `removes` what it says. The constraint's or column's own fix comes before the feature
/// it brings.
pub(crate) fn refusal(config: &TableConfiguration, removes: Removes) -> Option<Refusal> {
    constraint_refusal(config)
        .or_else(|| column_refusal(config))
        .or_else(|| lineage_refusal(config))
        .or_else(|| partition_refusal(config))
        .or_else(|| protocol_refusal(config))
        .or_else(|| append_only_refusal(config, removes))
}

/// A CHECK constraint (`delta.constraints.<name>`) outside the expressions bronze
/// evaluates ([`super::constraints`]); the others are checked on every row it writes.
fn constraint_refusal(config: &TableConfiguration) -> Option<Refusal> {
    let properties = &config.table_properties().unknown_properties;
    let refused = super::constraints::of_properties(properties).err()?;
    let (name, text, why) = (refused.name, refused.text, refused.why);
    Some(Refusal::of(
        &format!("CHECK constraint `{name}` ({text})"),
        format!(
            "bronze evaluates the comparisons, IS [NOT] NULL, IN, BETWEEN, LIKE, AND/OR/NOT, \
             casts, arithmetic and a few functions (length, lower, upper, trim, abs, \
             coalesce) a constraint is written with, not {why}; drop it (`ALTER TABLE … DROP \
             CONSTRAINT {name}`) or load the topic into a table without it"
        ),
    ))
}

/// A column whose values a writer must compute or check: an invariant, a generated or
/// an identity column.
fn column_refusal(config: &TableConfiguration) -> Option<Refusal> {
    let schema = config.metadata().schema_string();
    let (key, what) = [
        ("delta.invariants", "a column invariant"),
        ("delta.generationExpression", "a generated column"),
        ("delta.identity.", "an identity column"),
    ]
    .into_iter()
    .find(|(key, _)| schema.contains(key))?;
    Some(Refusal::of(
        what,
        format!(
            "the table's schema has {what} (`{key}`), whose values bronze does not compute or \
             check; load the topic into a table without it"
        ),
    ))
}

/// One of bronze's own columns another engine renamed (seen under column mapping: the
/// column's physical name is still bronze's) or dropped (`_batch_id` or `_topic`, from a
/// topic or child table: one that has `_id` and `_line`): bronze would write its rows beside the renamed column, which
/// then holds nulls (a non-nullable one fails the write), and a rerun finds a batch's rows
/// by these columns.
fn lineage_refusal(config: &TableConfiguration) -> Option<Refusal> {
    use crate::naming::{BATCH_ID, ID, LINE, LOADED_AT, SOURCE_FILE, SYSTEM_COLUMNS, TOPIC};
    const PHYSICAL_NAME: &str = "delta.columnMapping.physicalName";
    let schema = config.logical_schema();
    let fix = |what: String, name: &str| {
        Refusal::of(
            &format!("bronze's column `{name}` {what}"),
            format!(
                "bronze writes `{name}` on every row and finds a batch's rows by its lineage \
                 columns; rename or add it back (`ALTER TABLE … RENAME COLUMN … TO {name}`), or \
                 load the topic into a table of bronze's own"
            ),
        )
    };
    for field in schema.fields() {
        let physical = match field.metadata().get(PHYSICAL_NAME) {
            Some(buoyant_kernel::schema::MetadataValue::String(p)) => p.as_str(),
            _ => continue,
        };
        if SYSTEM_COLUMNS.contains(&physical)
            && field.name() != physical
            && schema.field(physical).is_none()
        {
            return Some(fix(format!("renamed to `{}`", field.name()), physical));
        }
    }
    // A table with `_id` and three or more of bronze's lineage columns is a bronze table
    // (whoever created it): one it lacks was dropped, or renamed under physical names
    // another engine chose (`col-<uuid>`).
    let lineage = [BATCH_ID, TOPIC, SOURCE_FILE, LINE, LOADED_AT];
    let present = lineage.iter().filter(|n| schema.field(n).is_some()).count();
    if schema.field(ID).is_none() || present < 3 {
        return None;
    }
    let missing = lineage.into_iter().find(|n| schema.field(n).is_none())?;
    Some(fix("dropped or renamed".to_string(), missing))
}

/// A partitioned table: bronze's data files carry no partition values.
fn partition_refusal(config: &TableConfiguration) -> Option<Refusal> {
    let columns = config.metadata().partition_columns();
    (!columns.is_empty()).then(|| {
        Refusal::of(
            &format!("partition columns ({})", columns.join(", ")),
            "bronze writes unpartitioned tables (its files carry no partition values); load \
             the topic into a table of bronze's own"
                .to_string(),
        )
    })
}

/// A reader or writer feature, or a legacy protocol version, bronze does not handle.
fn protocol_refusal(config: &TableConfiguration) -> Option<Refusal> {
    let protocol = config.protocol();
    // Reader version 2 is column mapping, which bronze reads; 3 lists reader features.
    let mut reader = protocol.reader_features().into_iter().flatten();
    if let Some(f) = reader.find(|f| !reads_feature(f)) {
        return Some(Refusal::feature(f));
    }
    // Row tracking and clustering keep their state in domains.
    let needs_domains = [TableFeature::RowTracking, TableFeature::ClusteredTable]
        .into_iter()
        .find(|f| config.is_feature_supported(f));
    if let Some(f) = needs_domains
        && !config.is_feature_supported(&TableFeature::DomainMetadata)
    {
        return Some(Refusal::of(
            &format!("{f} without domainMetadata"),
            format!(
                "the protocol asks a table with {f} to support domainMetadata, where its state \
                 is kept; add it (`ALTER TABLE … SET TBLPROPERTIES \
                 ('delta.feature.domainMetadata' = 'supported')`)"
            ),
        ));
    }
    // Writer versions 3 to 6 imply constraints, invariants, the change data feed,
    // generated and identity columns and column mapping: the checks before and after
    // this one refuse a table that uses one bronze does not write.
    match protocol.min_writer_version() {
        v if v >= 7 => protocol
            .writer_features()
            .into_iter()
            .flatten()
            .find(|f| !writes_feature(f))
            .map(Refusal::feature),
        _ => None,
    }
}

/// An append-only table, when the write may remove files.
fn append_only_refusal(config: &TableConfiguration, removes: Removes) -> Option<Refusal> {
    let protocol = config.protocol();
    let append_only = config.table_properties().append_only == Some(true)
        && (protocol.min_writer_version() < 7
            || config.is_feature_supported(&TableFeature::AppendOnly));
    (removes == Removes::Files && append_only).then(|| {
        Refusal::of(
            "delta.appendOnly",
            "a rerun replaces the batch's rows, which removes files, and the table is \
             append-only; to rerun, `ALTER TABLE … SET TBLPROPERTIES ('delta.appendOnly' = \
             'false')`, or leave the batch as it was loaded"
                .to_string(),
        )
    })
}

/// [`refusal`] and whether the table is a child table, from its protocol and metadata.
pub(crate) fn look(config: &TableConfiguration, removes: Removes) -> Look {
    Look {
        refusal: refusal(config, removes),
        child: config
            .logical_schema()
            .field(crate::naming::PARENT_ID)
            .is_some(),
        schema: config.logical_schema(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_feature_bronze_does_not_write_has_a_fix_naming_it() {
        for f in ["liquid", "icebergCompatV2"] {
            let fix = feature_fix(f);
            assert!(fix.contains(&format!("DROP FEATURE {f}")), "{fix}");
        }
        assert!(writes_feature(&TableFeature::DeletionVectors));
        assert!(writes_feature(&TableFeature::RowTracking));
        assert!(writes_feature(&TableFeature::InCommitTimestamp));
        assert!(writes_feature(&TableFeature::TypeWidening));
        assert!(reads_feature(&TableFeature::TypeWidening));
        assert!(!writes_feature(&TableFeature::IcebergCompatV2));
        assert!(!writes_feature(&TableFeature::Unknown("liquid".into())));
        assert!(writes_feature(&TableFeature::Unknown(
            "checkpointProtection".into()
        )));
        assert!(reads_feature(&TableFeature::ColumnMapping));
    }
}
