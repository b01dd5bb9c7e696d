//! A Delta table's columns as catalogs take them: Hive type strings (the Hive Metastore,
//! Glue) from the Delta schema's JSON (the log's `schemaString`).

use serde_json::Value;

/// One top-level column of a Delta table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its type as Hive writes it (`bigint`, `struct<a:int,b:array<string>>`).
    pub hive_type: String,
    /// Its field of the Delta schema, as JSON.
    pub field: Value,
}

/// The top-level columns of Delta schema `schema` (`{"type":"struct","fields":[…]}`);
/// `None` when it is not a struct of fields.
pub fn columns(schema: &Value) -> Option<Vec<Column>> {
    schema
        .get("fields")?
        .as_array()?
        .iter()
        .map(|f| {
            Some(Column {
                name: f.get("name")?.as_str()?.to_string(),
                hive_type: hive_type(f.get("type")?)?,
                field: f.clone(),
            })
        })
        .collect()
}

/// Delta type `t` (a schema JSON type) as Hive's type string. Hive has no
/// `timestamp_ntz` nor `variant`: they are `timestamp` and `string` there (engines read
/// the table's own types from its log).
pub fn hive_type(t: &Value) -> Option<String> {
    type_string(t, Dialect::Hive)
}

/// Delta type `t` as Spark's catalog string (`bigint`, `timestamp_ntz`, `variant`,
/// `struct<a:int>`): what Unity Catalog's `type_text` holds.
pub fn spark_type(t: &Value) -> Option<String> {
    type_string(t, Dialect::Spark)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Hive,
    Spark,
}

fn type_string(t: &Value, d: Dialect) -> Option<String> {
    if let Some(name) = t.as_str() {
        return Some(
            match name {
                "long" => "bigint",
                "integer" => "int",
                "short" => "smallint",
                "byte" => "tinyint",
                "timestamp_ntz" if d == Dialect::Hive => "timestamp",
                "variant" if d == Dialect::Hive => "string",
                other => other,
            }
            .to_string(),
        );
    }
    match t.get("type")?.as_str()? {
        "struct" => {
            let fields: Option<Vec<String>> = t
                .get("fields")?
                .as_array()?
                .iter()
                .map(|f| {
                    Some(format!(
                        "{}:{}",
                        f.get("name")?.as_str()?,
                        type_string(f.get("type")?, d)?
                    ))
                })
                .collect();
            Some(format!("struct<{}>", fields?.join(",")))
        }
        "array" => Some(format!("array<{}>", type_string(t.get("elementType")?, d)?)),
        "map" => Some(format!(
            "map<{},{}>",
            type_string(t.get("keyType")?, d)?,
            type_string(t.get("valueType")?, d)?
        )),
        _ => None,
    }
}

/// Unity Catalog's `type_name` of Delta type `t` (`LONG`, `DECIMAL`, `STRUCT`).
pub fn type_name(t: &Value) -> &'static str {
    let name = match t.as_str() {
        Some(n) => n,
        None => t.get("type").and_then(Value::as_str).unwrap_or(""),
    };
    match name {
        "boolean" => "BOOLEAN",
        "byte" => "BYTE",
        "short" => "SHORT",
        "integer" => "INT",
        "long" => "LONG",
        "float" => "FLOAT",
        "double" => "DOUBLE",
        "date" => "DATE",
        "timestamp" => "TIMESTAMP",
        "timestamp_ntz" => "TIMESTAMP_NTZ",
        "string" => "STRING",
        "binary" => "BINARY",
        "variant" => "VARIANT",
        "array" => "ARRAY",
        "map" => "MAP",
        "struct" => "STRUCT",
        n if n.starts_with("decimal") => "DECIMAL",
        _ => "USER_DEFINED_TYPE",
    }
}

/// The precision and scale of a `decimal(p,s)` Delta type.
pub fn decimal_precision_scale(t: &Value) -> Option<(u32, u32)> {
    let inner = t.as_str()?.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_types_become_hive_types_nested_ones_included() {
        let schema = serde_json::json!({"type": "struct", "fields": [
            {"name": "_id", "type": "string", "nullable": false, "metadata": {}},
            {"name": "n", "type": "long", "nullable": true, "metadata": {}},
            {"name": "d", "type": "decimal(18,2)", "nullable": true, "metadata": {}},
            {"name": "ts", "type": "timestamp_ntz", "nullable": true, "metadata": {}},
            {"name": "v", "type": "variant", "nullable": true, "metadata": {}},
            {"name": "s", "type": {"type": "struct", "fields": [
                {"name": "a", "type": "integer", "nullable": true, "metadata": {}},
                {"name": "b", "type": {"type": "array", "elementType": "short", "containsNull": true},
                 "nullable": true, "metadata": {}},
                {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": "byte",
                 "valueContainsNull": true}, "nullable": true, "metadata": {}}]},
             "nullable": true, "metadata": {}}]});
        let columns = columns(&schema).unwrap();
        let types: Vec<(&str, &str)> = columns
            .iter()
            .map(|c| (c.name.as_str(), c.hive_type.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("_id", "string"),
                ("n", "bigint"),
                ("d", "decimal(18,2)"),
                ("ts", "timestamp"),
                ("v", "string"),
                ("s", "struct<a:int,b:array<smallint>,m:map<string,tinyint>>"),
            ]
        );
        assert_eq!(columns[1].field["name"], "n");
        let spark: Vec<String> = columns
            .iter()
            .map(|c| spark_type(&c.field["type"]).unwrap())
            .collect();
        assert_eq!(
            spark,
            [
                "string",
                "bigint",
                "decimal(18,2)",
                "timestamp_ntz",
                "variant",
                "struct<a:int,b:array<smallint>,m:map<string,tinyint>>",
            ]
        );
        let names: Vec<&str> = columns
            .iter()
            .map(|c| type_name(&c.field["type"]))
            .collect();
        assert_eq!(
            names,
            [
                "STRING",
                "LONG",
                "DECIMAL",
                "TIMESTAMP_NTZ",
                "VARIANT",
                "STRUCT"
            ]
        );
        assert_eq!(
            decimal_precision_scale(&columns[2].field["type"]),
            Some((18, 2))
        );
        assert!(super::columns(&serde_json::json!({"type": "struct"})).is_none());
    }
}
