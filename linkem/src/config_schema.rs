//! The JSON contract as a JSON Schema, `schema/link.json` (committed): emitted
//! from the config types, so the committed file is what linkem parses, and
//! lab/link (Python) validates every link it sends against that file.
//! After a change to the types, `LINKEM_WRITE_SCHEMA=1 cargo test schema`
//! rewrites it. The schema is compiled into the tests only: the binary (and
//! its dependencies) does not change.

use crate::config::Config;
use crate::config_parse::{DIR_FIELDS, TOP_FIELDS};
use serde_json::Value;
use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/link.json")
}

/// The schema the types emit, as the committed file spells it.
fn emitted() -> String {
    let schema = schemars::schema_for!(Config);
    serde_json::to_string_pretty(&schema).expect("a schema serializes") + "\n"
}

fn properties<'a>(schema: &'a Value, pointer: &str) -> Vec<&'a str> {
    let mut names: Vec<&str> = schema
        .pointer(pointer)
        .and_then(Value::as_object)
        .expect("an object of properties")
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names
}

fn sorted<'a>(fields: &[&'a str]) -> Vec<&'a str> {
    let mut v = fields.to_vec();
    v.sort_unstable();
    v
}

#[test]
fn schema_committed_file_is_what_the_types_emit() {
    let want = emitted();
    let path = committed_path();
    if std::env::var_os("LINKEM_WRITE_SCHEMA").is_some() {
        std::fs::write(&path, &want).expect("write schema/link.json");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} differs from what the config types emit: run `LINKEM_WRITE_SCHEMA=1 cargo test schema` and commit it",
        path.display()
    );
}

#[test]
fn schema_names_the_fields_the_parser_takes() {
    let schema: Value = serde_json::from_str(&emitted()).unwrap();
    assert_eq!(properties(&schema, "/properties"), sorted(TOP_FIELDS));
    assert_eq!(
        properties(&schema, "/$defs/DirectionConfig/properties"),
        sorted(DIR_FIELDS)
    );
    assert_eq!(schema["additionalProperties"], Value::Bool(false));
    assert_eq!(
        schema["$defs"]["DirectionConfig"]["additionalProperties"],
        Value::Bool(false)
    );
}

#[test]
fn schema_defaults_are_the_parsers_defaults() {
    // Every default the schema states, put in a document, parses to the default configuration.
    let schema: Value = serde_json::from_str(&emitted()).unwrap();
    let dir = &schema["$defs"]["DirectionConfig"]["properties"];
    let mut direction = serde_json::Map::new();
    for name in DIR_FIELDS {
        let default = dir[*name]
            .get("default")
            .unwrap_or_else(|| panic!("{name} has no default"));
        direction.insert((*name).to_string(), default.clone());
    }
    let doc = serde_json::json!({
        "seed": schema["properties"]["seed"]["default"],
        "keep_state": schema["properties"]["keep_state"]["default"],
        "downlink": Value::Object(direction.clone()),
        "uplink": Value::Object(direction),
    });
    assert_eq!(Config::from_value(&doc).unwrap(), Config::default());
}
