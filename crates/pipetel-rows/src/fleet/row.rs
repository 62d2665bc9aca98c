//! A row read back from the store, typed as its writer wrote it.

/// The value of one row field, typed as the writer wrote it.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// Text (names, ids, statuses; a number field whose text is not a number).
    Text(String),
    /// A whole number.
    Int(i64),
    /// A finite floating point number.
    Float(f64),
    /// A boolean user counter.
    Bool(bool),
}

/// One row read back from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRow {
    /// When it was stored: milliseconds since the epoch and the sub-millisecond rest in
    /// nanoseconds (rows are ordered by it).
    pub time: (u64, u32),
    /// The row's fields as its writer kept them locally: `event`, `timestamp_ms`, then
    /// `trace_id` and `span_id` when the row has them, then every `pipeline.*` field by name.
    pub fields: Vec<(String, FieldValue)>,
}

impl FleetRow {
    /// The row as the JSON line of a local store (keys sorted).
    pub fn to_json(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .fields
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    FieldValue::Text(t) => serde_json::Value::from(t.as_str()),
                    FieldValue::Int(n) => serde_json::Value::from(*n),
                    // Finite by construction; a non-finite one could only be text.
                    FieldValue::Float(f) => serde_json::Number::from_f64(*f)
                        .map_or_else(|| serde_json::Value::from(f.to_string()), serde_json::Value::Number),
                    FieldValue::Bool(b) => serde_json::Value::from(*b),
                };
                (k.clone(), v)
            })
            .collect();
        serde_json::Value::Object(map).to_string()
    }
}
