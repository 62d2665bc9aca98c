//! The value types of the standard row fields, for readers that get every value as text (the
//! `pipetel rows --url` tool and `pipetel.rows` in Python read rows back from VictoriaLogs,
//! which stores each field as a string).

/// The standard row fields whose values are text; every other standard field is a number.
pub const TEXT_FIELDS: [&str; 6] = [
    "pipeline.namespace",
    "pipeline.stage.name",
    "pipeline.execution.id",
    "pipeline.status",
    "pipeline.shard.state",
    "pipeline.failure.reason",
];

/// The standard row fields whose values are floating point numbers; every other numeric
/// standard field is an integer.
pub const FLOAT_FIELDS: [&str; 6] = [
    "pipeline.elapsed_seconds",
    "pipeline.item_rate",
    "pipeline.byte_rate",
    "pipeline.cpu.time_seconds",
    "pipeline.cpu.percent",
    "pipeline.cpu.percent_avg",
];
