//! The instruments of what a GPU did beyond `nvidia-smi`'s gauges: GPM activity of the GPU and
//! of its MIG instances, and each process's use of the GPU.

use std::sync::Arc;

use opentelemetry::{KeyValue, StringValue};

use super::instrument::{instrument, AnyInstrument, Kind, Values::Series};
use crate::names;
use crate::source::{DeviceSample, GpmMetrics, MigInstanceSample, ProcessSample};

/// The attribute naming MIG instance `m`.
fn mig_attribute(m: &MigInstanceSample) -> KeyValue {
    KeyValue::new(names::GPU_MIG_ID, StringValue::from(Arc::clone(&m.id)))
}

/// `device`'s own value (no extra attribute), then each MIG instance's `read` with its
/// `hw.gpu.mig.id`.
pub(super) fn with_mig<T>(
    d: &DeviceSample,
    device: Option<T>,
    read: impl Fn(&MigInstanceSample) -> Option<T>,
    emit: &mut dyn FnMut(T, &[KeyValue]),
) {
    if let Some(v) = device {
        emit(v, &[]);
    }
    for m in &d.mig_instances {
        if let Some(v) = read(m) {
            emit(v, &[mig_attribute(m)]);
        }
    }
}

/// `read` of the GPU's GPM metrics and of each MIG instance's, after the `extra` attributes.
fn gpm(
    d: &DeviceSample,
    extra: &[KeyValue],
    read: impl Fn(&GpmMetrics) -> Option<f64>,
    emit: &mut dyn FnMut(f64, &[KeyValue]),
) {
    if let Some(v) = d.gpm.as_ref().and_then(&read) {
        emit(v, extra);
    }
    for m in &d.mig_instances {
        if let Some(v) = m.gpm.as_ref().and_then(&read) {
            let mut attrs = extra.to_vec();
            attrs.push(mig_attribute(m));
            emit(v, &attrs);
        }
    }
}

/// `read` of each process's use of the GPU, with `process.pid` after the `extra` attributes.
pub(super) fn per_process<T>(
    d: &DeviceSample,
    read: impl Fn(&ProcessSample) -> Option<T>,
    extra: &[KeyValue],
    emit: &mut dyn FnMut(T, &[KeyValue]),
) {
    for p in &d.processes {
        if let Some(v) = read(p) {
            let mut attrs = extra.to_vec();
            attrs.push(KeyValue::new(names::PROCESS_PID, i64::from(p.pid)));
            emit(v, &attrs);
        }
    }
}

/// A read of one GPM metric.
type GpmRead = fn(&GpmMetrics) -> Option<f64>;

const TENSOR_PIPES: [(&str, GpmRead); 4] = [
    (names::tensor_pipe::ANY, |g| g.tensor_active),
    (names::tensor_pipe::DFMA, |g| g.tensor_dfma_active),
    (names::tensor_pipe::HMMA, |g| g.tensor_hmma_active),
    (names::tensor_pipe::IMMA, |g| g.tensor_imma_active),
];

const FP_PIPES: [(&str, GpmRead); 3] = [
    (names::pipe::FP16, |g| g.fp16_active),
    (names::pipe::FP32, |g| g.fp32_active),
    (names::pipe::FP64, |g| g.fp64_active),
];

const NVLINK: [(&str, GpmRead); 2] = [
    (names::direction::TRANSMIT, |g| g.nvlink_tx_bytes_per_second),
    (names::direction::RECEIVE, |g| g.nvlink_rx_bytes_per_second),
];

/// One series per `(attribute value, read)` of `reads`, under `key`, for the GPU and each MIG
/// instance.
fn gpm_by(
    d: &DeviceSample,
    key: &'static str,
    reads: &[(&'static str, GpmRead)],
    emit: &mut dyn FnMut(f64, &[KeyValue]),
) {
    for (label, read) in reads {
        gpm(d, &[KeyValue::new(key, *label)], read, emit);
    }
}

/// A read of one process's use.
type ProcessRead = fn(&ProcessSample) -> Option<f64>;

const PROCESS_TASKS: [(&str, ProcessRead); 3] = [
    (names::task::GENERAL, |p| p.sm_utilization),
    (names::task::ENCODER, |p| p.encoder_utilization),
    (names::task::DECODER, |p| p.decoder_utilization),
];

/// The GPM and per-process instruments, in registration order.
pub(super) static INSTRUMENTS: [AnyInstrument; 8] = [
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_SM_ACTIVITY,
        names::UNIT_RATIO,
        "Fraction of time each SM had at least one warp assigned, averaged over the SMs (GPM, Hopper and later)",
        Series(&[names::GPU_MIG_ID], |d, emit| gpm(d, &[], |g| g.sm_active, emit)),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_SM_OCCUPANCY,
        names::UNIT_RATIO,
        "Resident warps as a fraction of the SMs' maximum (GPM, Hopper and later)",
        Series(&[names::GPU_MIG_ID], |d, emit| gpm(d, &[], |g| g.sm_occupancy, emit)),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_TENSOR_ACTIVITY,
        names::UNIT_RATIO,
        "Fraction of time a tensor pipe was active, by pipe (GPM, Hopper and later)",
        Series(&[names::GPU_TENSOR_PIPE, names::GPU_MIG_ID], |d, emit| {
            gpm_by(d, names::GPU_TENSOR_PIPE, &TENSOR_PIPES, emit);
        }),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_PIPE_ACTIVITY,
        names::UNIT_RATIO,
        "Fraction of time a non-tensor floating-point pipe was active, by precision (GPM, Hopper and later)",
        Series(&[names::GPU_PIPE, names::GPU_MIG_ID], |d, emit| gpm_by(d, names::GPU_PIPE, &FP_PIPES, emit)),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_DRAM_ACTIVITY,
        names::UNIT_RATIO,
        "Device memory bandwidth used as a fraction of the maximum (GPM, Hopper and later)",
        Series(&[names::GPU_MIG_ID], |d, emit| gpm(d, &[], |g| g.dram_active, emit)),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_NVLINK_THROUGHPUT,
        names::UNIT_BYTES_PER_SECOND,
        "NVLink bytes per second over all links, by direction (GPM, Hopper and later)",
        Series(&[names::NETWORK_IO_DIRECTION, names::GPU_MIG_ID], |d, emit| {
            gpm_by(d, names::NETWORK_IO_DIRECTION, &NVLINK, emit);
        }),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_PROCESS_UTILIZATION,
        names::UNIT_RATIO,
        "Utilisation of the GPU by one process over the poll interval, by engine",
        Series(&[names::GPU_TASK, names::PROCESS_PID], |d, emit| {
            for (task, read) in PROCESS_TASKS {
                per_process(d, read, &[KeyValue::new(names::GPU_TASK, task)], emit);
            }
        }),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_PROCESS_MEMORY_BANDWIDTH_UTILIZATION,
        names::UNIT_RATIO,
        "Memory-controller utilisation of the GPU by one process over the poll interval",
        Series(&[names::PROCESS_PID], |d, emit| per_process(d, |p| p.memory_bandwidth_utilization, &[], emit)),
    )),
];
