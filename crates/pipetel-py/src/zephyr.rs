//! The explicit Zephyr form: `pipetel.zephyr.StatsWriter` with Marin Zephyr's
//! `emit_stage_stat` / `emit_worker_stat` keywords, on `pipetel::emit_stage_stat` and
//! `pipetel::emit_worker_stat` (rows computed elsewhere, such as by a coordinator).

use std::time::{Duration, SystemTime};

use pipetel::pipeline::{CounterValue, StageStat, StageStatus, WorkerStat, WorkerStatus};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyTuple};

use crate::args::{arg, repr, type_name};
use crate::errors::guard;
use crate::pipeline::{counter_key, counter_value};

/// A non-negative finite number (int or float, not bool) named `what`.
fn non_negative(what: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("{what}: expected a number, got a bool")));
    }
    if !(value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>()) {
        return Err(PyTypeError::new_err(format!("{what}: expected an int or a float, got a {}", type_name(value))));
    }
    // An int beyond a float's range (10**400) cannot be converted: refused as out of range.
    let v: f64 =
        value.extract().map_err(|_| PyValueError::new_err(format!("{what}: {} is out of range", repr(value))))?;
    if !v.is_finite() {
        return Err(PyValueError::new_err(format!("{what}: {v} is not a finite number")));
    }
    if v < 0.0 {
        return Err(PyValueError::new_err(format!("{what}: {v} is negative")));
    }
    Ok(v)
}

/// A count named `what`: an int in `0..2**64`, exactly, or a float holding one, rounded.
fn count(what: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
        return value.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!(
                "{what}: {} is out of range, expected an int in 0..={}",
                repr(value),
                u64::MAX
            ))
        });
    }
    let v = non_negative(what, value)?.round();
    // 2**64 is exact as a float; every float below it that is a whole number fits a u64.
    if v >= 18_446_744_073_709_551_616.0 {
        return Err(PyValueError::new_err(format!("{what}: {v} is out of range, expected a count below 2**64")));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(v as u64)
}

fn seconds(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let v = non_negative(what, value)?;
    Duration::try_from_secs_f64(v).map_err(|e| PyValueError::new_err(format!("{what}: {v}: {e}")))
}

/// Zephyr's status (`ZephyrWorkerStatStatus` or its string value).
fn zephyr_status(value: &Bound<'_, PyAny>) -> PyResult<WorkerStatus> {
    let text: String = value.extract().map_err(|_| {
        PyTypeError::new_err(format!("status: expected a ZephyrWorkerStatStatus or its str value, got {value}"))
    })?;
    match text.to_ascii_uppercase().as_str() {
        "START" => Ok(WorkerStatus::Start),
        "RUNNING" => Ok(WorkerStatus::Running),
        "END" => Ok(WorkerStatus::End),
        "FAILED" => Ok(WorkerStatus::Failed),
        _ => Err(PyValueError::new_err(format!("status: {text:?} is not one of START, RUNNING, END, FAILED"))),
    }
}

/// A `datetime` as a time, exact to its microsecond: computed from its fields (a naive one is
/// UTC, as Zephyr writes them; an aware one less its UTC offset), never through a float, which
/// near today's dates holds a time to about 0.2 µs only.
fn timestamp(value: &Bound<'_, PyAny>) -> PyResult<SystemTime> {
    let py = value.py();
    if !value.is_instance(&py.import("datetime")?.getattr("datetime")?)? {
        return Err(PyTypeError::new_err(format!("ts: expected a datetime.datetime, got a {}", type_name(value))));
    }
    let field = |obj: &Bound<'_, PyAny>, name: &str| -> PyResult<i64> { obj.getattr(name)?.extract() };
    let days = days_from_civil(field(value, "year")?, field(value, "month")?, field(value, "day")?);
    let seconds =
        days * 86_400 + field(value, "hour")? * 3_600 + field(value, "minute")? * 60 + field(value, "second")?;
    let mut micros = i128::from(seconds) * 1_000_000 + i128::from(field(value, "microsecond")?);
    let offset = value.call_method0("utcoffset")?;
    if !offset.is_none() {
        let offset_seconds = field(&offset, "days")? * 86_400 + field(&offset, "seconds")?;
        micros -= i128::from(offset_seconds) * 1_000_000 + i128::from(field(&offset, "microseconds")?);
    }
    let since_epoch = Duration::from_micros(u64::try_from(micros.unsigned_abs()).unwrap_or(u64::MAX));
    let t = if micros >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(since_epoch)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(since_epoch)
    };
    t.ok_or_else(|| PyValueError::new_err(format!("ts: {} is out of range", repr(value))))
}

/// Days from 1970-01-01 to the proleptic Gregorian date `year-month-day` (H. Hinnant's
/// `days_from_civil`), exact for every `datetime`.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Counter key of items in Zephyr's `stage_counters`.
const ITEM_COUNT_KEY: &str = "zephyr/item_count";
/// Counter key of bytes in Zephyr's `stage_counters`.
const BYTES_PROCESSED_KEY: &str = "zephyr/bytes_processed";
/// Counter key of the average CPU % in Zephyr's `stage_counters`.
const CPU_PCT_AVERAGE_KEY: &str = "zephyr/worker/cpu_pct_average";

/// The core of `pipetel.zephyr.StatsWriter`: Marin Zephyr's `emit_stage_stat` and
/// `emit_worker_stat` with their exact keywords, emitting pipetel stage and worker rows (log
/// records `<namespace>.stage` / `<namespace>.worker`, JSON lines) and metrics.
#[pyclass(module = "pipetel.zephyr", name = "_StatsWriterCore", subclass, frozen)]
pub struct PyStatsWriter;

#[pymethods]
impl PyStatsWriter {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        PyStatsWriter
    }

    /// One stage row from the coordinator's aggregated counters. Items and bytes are
    /// `stage_counters["zephyr/item_count"]` and `["zephyr/bytes_processed"]`; every counter is
    /// also in the row as `pipeline.counter.<key>`. `status` END is `succeeded`, FAILED
    /// `failed`, START and RUNNING `running`.
    #[pyo3(signature = (stage_counters, stage_name, execution_id, elapsed, total_shards, status))]
    #[allow(clippy::too_many_arguments)]
    fn emit_stage_stat(
        &self,
        py: Python<'_>,
        stage_counters: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = arg::stage_name)] stage_name: String,
        #[pyo3(from_py_with = arg::execution_id)] execution_id: String,
        elapsed: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = arg::total_shards)] total_shards: u32,
        status: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let dict = stage_counters.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!(
                "stage_counters: expected a dict of str to int or float, got a {}",
                type_name(stage_counters)
            ))
        })?;
        let mut counters = Vec::with_capacity(dict.len());
        for (k, v) in dict.iter() {
            let key: String =
                k.extract().map_err(|_| PyTypeError::new_err(format!("stage_counters: the key {k} is not a str")))?;
            counter_key("stage_counters", &key)?;
            let value = counter_value(&format!("stage_counters[{key:?}]"), &v, false)?;
            counters.push((key, value));
        }
        let elapsed = seconds("elapsed", elapsed)?;
        let status = match zephyr_status(status)? {
            WorkerStatus::End => StageStatus::Succeeded,
            WorkerStatus::Failed => StageStatus::Failed,
            _ => StageStatus::Running,
        };
        let get = |key: &str| counters.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let as_count = |v: Option<CounterValue>| match v {
            Some(CounterValue::Int(i)) => u64::try_from(i).unwrap_or(0),
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Some(CounterValue::Float(f)) => f.round() as u64,
            None => 0,
        };
        let cpu = get(CPU_PCT_AVERAGE_KEY).map(|v| match v {
            #[allow(clippy::cast_precision_loss)]
            CounterValue::Int(i) => i as f64,
            CounterValue::Float(f) => f,
        });
        let stat = StageStat {
            stage_name,
            execution_id,
            items: as_count(get(ITEM_COUNT_KEY)),
            bytes: as_count(get(BYTES_PROCESSED_KEY)),
            elapsed,
            total_shards,
            shards_succeeded: 0,
            shards_failed: 0,
            shards_retried: 0,
            status,
            cpu_percent_avg: cpu,
            counters,
            reason: None,
        };
        py.detach(|| {
            guard(|| {
                pipetel::emit_stage_stat(&stat);
                Ok(())
            })
        })
    }

    /// One worker row (a shard's START, a RUNNING sample, its END or FAILED) with the runner's
    /// figures: items and bytes so far, rates per second, CPU seconds and percentages (100 = one
    /// core), resident memory in bytes. `ts` is a `datetime` (naive: UTC).
    #[pyo3(signature = (
        shard_idx, stage_name, execution_id, status, ts, items, bytes_processed, item_rate, byte_rate,
        cpu_time_total, cpu_current_pct, cpu_avg_pct, mem_current_bytes, mem_avg_bytes, mem_peak_bytes
    ))]
    #[allow(clippy::too_many_arguments)]
    fn emit_worker_stat(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::shard_idx)] shard_idx: u32,
        #[pyo3(from_py_with = arg::stage_name)] stage_name: String,
        #[pyo3(from_py_with = arg::execution_id)] execution_id: String,
        status: &Bound<'_, PyAny>,
        ts: &Bound<'_, PyAny>,
        items: &Bound<'_, PyAny>,
        bytes_processed: &Bound<'_, PyAny>,
        item_rate: &Bound<'_, PyAny>,
        byte_rate: &Bound<'_, PyAny>,
        cpu_time_total: &Bound<'_, PyAny>,
        cpu_current_pct: &Bound<'_, PyAny>,
        cpu_avg_pct: &Bound<'_, PyAny>,
        mem_current_bytes: &Bound<'_, PyAny>,
        mem_avg_bytes: &Bound<'_, PyAny>,
        mem_peak_bytes: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let status = zephyr_status(status)?;
        let stat = WorkerStat {
            shard_index: shard_idx,
            stage_name,
            execution_id,
            status,
            timestamp: timestamp(ts)?,
            items: count("items", items)?,
            bytes: count("bytes_processed", bytes_processed)?,
            item_rate: non_negative("item_rate", item_rate)?,
            byte_rate: non_negative("byte_rate", byte_rate)?,
            cpu_time: seconds("cpu_time_total", cpu_time_total)?,
            cpu_percent: Some(non_negative("cpu_current_pct", cpu_current_pct)?),
            cpu_percent_avg: Some(non_negative("cpu_avg_pct", cpu_avg_pct)?),
            memory_current: count("mem_current_bytes", mem_current_bytes)?,
            memory_avg: count("mem_avg_bytes", mem_avg_bytes)?,
            memory_peak: count("mem_peak_bytes", mem_peak_bytes)?,
            counters: Vec::new(),
            reason: None,
        };
        py.detach(|| {
            guard(|| {
                pipetel::emit_worker_stat(&stat);
                Ok(())
            })
        })
    }
}

/// Adds the writer's core class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStatsWriter>()?;
    Ok(())
}
