//! A stored VictoriaLogs entry turned back into the row its writer kept locally: every value
//! comes back as text, typed again from the row schema ([`TEXT_FIELDS`],
//! [`FLOAT_FIELDS`](crate::FLOAT_FIELDS), [`is_float_field`]).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::row::{FieldValue, FleetRow};
use crate::fields::is_float_field;
use crate::TEXT_FIELDS;

/// `10^-k` as Go's `math.Pow10(-k)` computes it (what VictoriaLogs multiplies by).
fn go_pow10_neg(k: usize) -> f64 {
    let lit = |e: String| e.parse::<f64>().unwrap_or(0.0);
    if k > 323 {
        return 0.0;
    }
    lit(format!("1e-{}", k / 32 * 32)) / lit(format!("1e{}", k % 32))
}

/// How VictoriaLogs parses a decimal it stores as a float: `int + frac * 10^-len(frac)`, fused.
pub(super) fn vl_parse(s: &str) -> Option<f64> {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let (int, frac) = s.split_once('.')?;
    if int.is_empty() || frac.is_empty() || !(int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())) {
        return None;
    }
    let n_int: u64 = int.parse().ok()?;
    let n_frac: u64 = frac.trim_start_matches('0').parse().unwrap_or(0);
    let f = (n_frac as f64).mul_add(go_pow10_neg(frac.len()), n_int as f64);
    Some(if neg { -f } else { f })
}

/// The written value behind a float VictoriaLogs gave back as `text`: the value with the
/// fewest significant digits from which VictoriaLogs' parsing, applied up to four times over
/// (each merge of its parts parses the column again), reaches what came back.
pub(super) fn written_float(text: &str) -> Option<f64> {
    let x: f64 = text.parse().ok()?;
    if x == 0.0 || !x.is_finite() {
        return Some(x);
    }
    for digits in 1..=17 {
        let Ok(y) = format!("{:.*e}", digits - 1, x).parse::<f64>() else { continue };
        let mut z = y;
        for _ in 0..=4 {
            if z == x {
                return Some(y);
            }
            match vl_parse(&format!("{z}")) {
                Some(next) if next != z => z = next,
                _ => break,
            }
        }
    }
    Some(x)
}

/// The value of row field `key` from its stored text; `float_counters` are the counters seen
/// with a decimal point anywhere in the answer. Text when the text is not a number of the
/// field's type (or not a finite one).
pub(super) fn field_value(key: &str, text: &str, float_counters: &BTreeSet<String>) -> FieldValue {
    let float = |t: &str| written_float(t).filter(|f| f.is_finite()).map(FieldValue::Float);
    let int = |t: &str| t.parse::<i64>().ok().map(FieldValue::Int);
    let v = if TEXT_FIELDS.contains(&key) {
        None
    } else if is_float_field(key) {
        float(text)
    } else if key == crate::fields::SKEWED {
        matches!(text, "true" | "false").then(|| FieldValue::Bool(text == "true"))
    } else if key.starts_with("pipeline.counter.") {
        match text {
            "true" | "false" => Some(FieldValue::Bool(text == "true")),
            t if t.contains(['.', 'e', 'E']) || float_counters.contains(key) => float(t),
            t => int(t).or_else(|| float(t)),
        }
    } else {
        int(text).or_else(|| float(text))
    };
    v.unwrap_or_else(|| FieldValue::Text(text.to_string()))
}

/// Counters of `entry` whose text has a decimal point.
pub(super) fn float_counters_of(entry: &Map<String, Value>) -> impl Iterator<Item = String> + '_ {
    entry
        .iter()
        .filter(|(k, v)| k.starts_with("pipeline.counter.") && v.as_str().is_some_and(|t| t.contains('.')))
        .map(|(k, _)| k.clone())
}

/// One stored entry as the row its writer kept locally; `None` for an entry that is not a row
/// (no `_time` or `event_name` text).
pub(super) fn row_of(entry: &Map<String, Value>, float_counters: &BTreeSet<String>) -> Option<FleetRow> {
    let text = |k: &str| entry.get(k).and_then(Value::as_str);
    let time = crate::parse_utc(text("_time")?)?;
    let mut fields = vec![
        ("event".to_string(), FieldValue::Text(text("event_name")?.to_string())),
        ("timestamp_ms".to_string(), FieldValue::Int(i64::try_from(time.0).ok()?)),
    ];
    for key in ["trace_id", "span_id"] {
        if let Some(v) = text(key).filter(|v| !v.is_empty()) {
            fields.push((key.to_string(), FieldValue::Text(v.to_string())));
        }
    }
    // `Map` iterates in key order: the `pipeline.*` fields come sorted.
    for (k, v) in
        entry.iter().filter(|(k, _)| k.starts_with("pipeline.") || matches!(k.as_str(), "host.name" | "process.pid"))
    {
        if let Some(t) = v.as_str() {
            fields.push((k.clone(), field_value(k, t, float_counters)));
        }
    }
    Some(FleetRow { time, fields })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_floats_come_back_as_written() {
        // 0.35 is parsed to 0.35000000000000003, and again at a merge to 0.3500000000000001
        // (what a real VictoriaLogs returned for a row's 0.35).
        assert_eq!(vl_parse("0.35"), Some(0.350_000_000_000_000_03));
        assert_eq!(vl_parse("0.35000000000000003"), Some(0.350_000_000_000_000_1));
        assert_eq!(written_float("0.3500000000000001"), Some(0.35));
        for written in
            [0.35, 0.3, 25.985_576_186_226_307, 4_650_474.661_029_901, 1.0 / 3.0, 0.5, 12.0, 9_082.958_322_324_026]
        {
            let mut stored = written;
            for parses in 0..4 {
                assert_eq!(
                    written_float(&format!("{stored}")),
                    Some(written),
                    "{written} parsed {parses} times: {stored}"
                );
                stored = vl_parse(&format!("{stored}")).unwrap_or(stored);
            }
        }
        // The price: a value written a few units in the last place from a shorter decimal
        // comes back as that decimal.
        assert_eq!(written_float("0.30000000000000004"), Some(0.3));
        // But not a value VictoriaLogs' parsing cannot have moved there: 1 + 2 ulp stays.
        assert_eq!(written_float("1.0000000000000004"), Some(1.000_000_000_000_000_4));
    }

    #[test]
    fn an_entry_becomes_the_local_row() {
        let entry: Map<String, Value> = serde_json::from_str(
            r#"{"_msg":"shard 2 of tokenize start: 0 items","_time":"2026-12-02T10:00:29.297775696Z",
                "event_name":"pipeline.worker","host.name":"node1","pipeline.byte_rate":"0",
                "pipeline.cpu.time_seconds":"0.3500000000000001","pipeline.counter.retries":"2",
                "pipeline.execution.id":"1234","pipeline.items":"64","pipeline.namespace":"pipeline.worker",
                "pipeline.shard.index":"2","pipeline.stage.name":"tokenize","pipeline.status":"start",
                "pipetel.gateway":"gw1","service.name":"pipeline-example","span_id":"095c34e2088ea841",
                "trace_id":"35b8a37c5f18f2bb9351886e30148603"}"#,
        )
        .expect("entry");
        let row = row_of(&entry, &BTreeSet::new()).expect("a row");
        assert_eq!(row.time, (1_796_205_629_297, 775_696));
        // The host (a resource attribute in the store) is kept, for readers that show it.
        assert_eq!(
            row.to_json(),
            r#"{"event":"pipeline.worker","host.name":"node1","pipeline.byte_rate":0.0,"pipeline.counter.retries":2,"pipeline.cpu.time_seconds":0.35,"pipeline.execution.id":"1234","pipeline.items":64,"pipeline.namespace":"pipeline.worker","pipeline.shard.index":2,"pipeline.stage.name":"tokenize","pipeline.status":"start","span_id":"095c34e2088ea841","timestamp_ms":1796205629297,"trace_id":"35b8a37c5f18f2bb9351886e30148603"}"#
        );
        let keys: Vec<&str> = row.fields.iter().map(|(k, _)| k.as_str()).take(4).collect();
        assert_eq!(keys, ["event", "timestamp_ms", "trace_id", "span_id"]);
        // A float counter that held a whole number here and a fraction elsewhere in the answer.
        let floats: BTreeSet<String> = ["pipeline.counter.retries".to_string()].into();
        let row = row_of(&entry, &floats).expect("a row");
        assert!(row.to_json().contains(r#""pipeline.counter.retries":2.0"#), "{}", row.to_json());
        // Text where a number is expected, and numbers that JSON cannot hold, stay text.
        assert_eq!(field_value("pipeline.items", "many", &floats), FieldValue::Text("many".into()));
        assert_eq!(field_value("pipeline.item_rate", "NaN", &floats), FieldValue::Text("NaN".into()));
        assert_eq!(field_value("pipeline.counter.ok", "true", &floats), FieldValue::Bool(true));
        assert_eq!(field_value("pipeline.stage.name", "12", &floats), FieldValue::Text("12".into()));
    }
}
