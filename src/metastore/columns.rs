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
    if let Some(name) = t.as_str() {
        return Some(
            match name {
                "long" => "bigint",
                "integer" => "int",
                "short" => "smallint",
                "byte" => "tinyint",
                "timestamp_ntz" => "timestamp",
                "variant" => "string",
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
                        hive_type(f.get("type")?)?
                    ))
                })
                .collect();
            Some(format!("struct<{}>", fields?.join(",")))
        }
        "array" => Some(format!("array<{}>", hive_type(t.get("elementType")?)?)),
        "map" => Some(format!(
            "map<{},{}>",
            hive_type(t.get("keyType")?)?,
            hive_type(t.get("valueType")?)?
        )),
        _ => None,
    }
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
        assert!(super::columns(&serde_json::json!({"type": "struct"})).is_none());
    }
}
