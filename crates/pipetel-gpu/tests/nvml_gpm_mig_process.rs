//! What a GPU did, through the real NVML code path (nvml-wrapper, poller, instruments, OTel
//! SDK) against the fake `libnvidia-ml`: GPM activity computed by the driver from two samples
//! (exact values, the interval between consecutive polls), per MIG instance too; MIG memory;
//! this process's utilisation and memory; the readings the stage attribution reads.

mod common;

use common::{assert_values, find, value, TestResult};
use pipetel_gpu::names;
use pipetel_gpu::test_support::Nvml;

type Harness = common::Harness<Nvml>;

const MIB: f64 = 1_048_576.0;

/// GPM counters of one sample: busy seconds for the activity metrics, MiB for the rates.
fn gpm(prefix: &str, time: f64, counters: &[(&str, f64)]) -> String {
    let mut s = format!("{prefix}gpm.time={time}\n");
    for (k, v) in counters {
        s.push_str(&format!("{prefix}gpm.{k}={v}\n"));
    }
    s
}

const H100: &str = "count=1\nlog_calls=1\n0.uuid=GPU-h100\n0.name=NVIDIA H100 80GB HBM3\n0.gpm=1\n\
                    0.mem.total=85899345920\n0.mem.used=21474836480\n0.energy=5000000\n";

/// Every counter at 0 at t = 100 s.
fn first() -> String {
    let zero: Vec<(&str, f64)> = [
        "sm",
        "occupancy",
        "tensor",
        "dfma",
        "hmma",
        "dram",
        "fp16",
        "fp32",
        "fp64",
        "pcie.tx",
        "pcie.rx",
        "nvlink.tx",
        "nvlink.rx",
    ]
    .iter()
    .map(|k| (*k, 0.0))
    .collect();
    format!("{H100}{}", gpm("0.", 100.0, &zero))
}

#[test]
fn gpm_metrics_are_the_drivers_over_each_poll_interval() -> TestResult {
    let h = Harness::start(&first(), |c| c)?;
    // One sample so far: no interval, no GPM series (never a zero).
    let points = h.collect()?;
    for name in [names::GPU_SM_ACTIVITY, names::GPU_TENSOR_ACTIVITY, names::GPU_NVLINK_THROUGHPUT] {
        assert!(find(&points, name, 0, &[]).is_empty(), "{name} before the second sample: {points:#?}");
    }
    // 10 s later: SM busy 7.5 s, tensor 6 s (HMMA 5.5, DFMA 0), 100 MiB sent over PCIe, ...
    let second = format!(
        "{H100}{}",
        gpm(
            "0.",
            110.0,
            &[
                ("sm", 7.5),
                ("occupancy", 3.0),
                ("tensor", 6.0),
                ("dfma", 0.0),
                ("hmma", 5.5),
                ("dram", 2.5),
                ("fp16", 1.0),
                ("fp32", 2.0),
                ("fp64", 0.5),
                ("pcie.tx", 100.0),
                ("pcie.rx", 50.0),
                ("nvlink.tx", 2000.0),
                ("nvlink.rx", 1000.0),
            ]
        )
    );
    let points = h.poll(&second)?;
    let pipe = |p| [(names::GPU_TENSOR_PIPE, p)];
    let fp = |p| [(names::GPU_PIPE, p)];
    let dir = |d| [(names::NETWORK_IO_DIRECTION, d)];
    assert_values(
        &points,
        0,
        &[
            (names::GPU_SM_ACTIVITY, &[], 0.75),
            (names::GPU_SM_OCCUPANCY, &[], 0.3),
            (names::GPU_TENSOR_ACTIVITY, &pipe("any"), 0.6),
            (names::GPU_TENSOR_ACTIVITY, &pipe("hmma"), 0.55),
            (names::GPU_TENSOR_ACTIVITY, &pipe("dfma"), 0.0),
            (names::GPU_DRAM_ACTIVITY, &[], 0.25),
            (names::GPU_PIPE_ACTIVITY, &fp("fp16"), 0.1),
            (names::GPU_PIPE_ACTIVITY, &fp("fp32"), 0.2),
            (names::GPU_PIPE_ACTIVITY, &fp("fp64"), 0.05),
            (names::GPU_NVLINK_THROUGHPUT, &dir("transmit"), 200.0 * MIB),
            (names::GPU_NVLINK_THROUGHPUT, &dir("receive"), 100.0 * MIB),
            // GPM's PCIe rates fill the PCIe family without the opt-in blocking call.
            (names::GPU_PCIE_THROUGHPUT, &dir("transmit"), 10.0 * MIB),
            (names::GPU_PCIE_THROUGHPUT, &dir("receive"), 5.0 * MIB),
        ],
    )?;
    // IMMA has no counter: the driver answers NOT_SUPPORTED for it alone.
    assert!(find(&points, names::GPU_TENSOR_ACTIVITY, 0, &pipe("imma")).is_empty());
    assert_eq!(h.fake.call_count(0, "nvmlDeviceGetPcieThroughput"), 0);
    let unit = |name: &str| points.iter().find(|p| p.name == name).map(|p| (p.unit.clone(), p.kind));
    assert_eq!(unit(names::GPU_SM_ACTIVITY), Some(("1".into(), "gauge")));
    assert_eq!(unit(names::GPU_NVLINK_THROUGHPUT), Some(("By/s".into(), "gauge")));

    // The next interval starts at the previous poll's sample, not the first.
    let third = second.replace("0.gpm.time=110", "0.gpm.time=120").replace("0.gpm.sm=7.5", "0.gpm.sm=9.5");
    let points = h.poll(&third)?;
    assert_values(&points, 0, &[(names::GPU_SM_ACTIVITY, &[], 0.2), (names::GPU_TENSOR_ACTIVITY, &pipe("any"), 0.0)])?;
    // One sample per poll; the previous one freed when replaced; none left after shutdown.
    assert_eq!(h.fake.call_count(0, "nvmlGpmSampleGet"), 3);
    assert_eq!(h.fake.call_count(-1, "nvmlGpmMetricsGet"), 2);
    let fake = h.shutdown("nvmlShutdown")?;
    assert_eq!(fake.call_count(-1, "nvmlGpmSampleAlloc"), fake.call_count(-1, "nvmlGpmSampleFree"));
    Ok(())
}

const MIG: &str = "count=1\n0.uuid=GPU-mig\n0.name=NVIDIA H100\n0.gpm=1\n0.mig=1\n0.mig.uuids=MIG-aaaa,MIG-bbbb\n\
                   0.mig.1.gi=5\n0.mem.total=85899345920\n0.mem.used=3221225472\n\
                   0.mig.0.mem.total=42949672960\n0.mig.0.mem.used=1073741824\n\
                   0.mig.1.mem.total=21474836480\n0.mig.1.mem.used=2147483648\n";

#[test]
fn mig_instances_report_memory_and_gpm_by_their_uuid() -> TestResult {
    let start = format!(
        "{MIG}{}{}",
        gpm("0.mig.0.", 10.0, &[("sm", 0.0), ("tensor", 0.0)]),
        gpm("0.mig.1.", 10.0, &[("sm", 0.0)])
    );
    let h = Harness::start(&start, |c| c)?;
    let points = h.poll(&format!(
        "{MIG}{}{}",
        gpm("0.mig.0.", 12.0, &[("sm", 0.8), ("tensor", 0.5)]),
        gpm("0.mig.1.", 14.0, &[("sm", 0.4)])
    ))?;
    let mig = |id| [(names::GPU_MIG_ID, id)];
    assert_values(
        &points,
        0,
        &[
            (names::GPU_MEMORY_USAGE, &mig("MIG-aaaa"), 1_073_741_824.0),
            (names::GPU_MEMORY_LIMIT, &mig("MIG-aaaa"), 42_949_672_960.0),
            (names::GPU_MEMORY_USAGE, &mig("MIG-bbbb"), 2_147_483_648.0),
            (names::GPU_MEMORY_LIMIT, &mig("MIG-bbbb"), 21_474_836_480.0),
            (names::GPU_SM_ACTIVITY, &mig("MIG-aaaa"), 0.4),
            (names::GPU_TENSOR_ACTIVITY, &[(names::GPU_MIG_ID, "MIG-aaaa"), (names::GPU_TENSOR_PIPE, "any")], 0.25),
            (names::GPU_SM_ACTIVITY, &mig("MIG-bbbb"), 0.1),
        ],
    )?;
    // The whole GPU's memory series has no MIG id; it has no GPM of its own here.
    let whole: Vec<_> = find(&points, names::GPU_MEMORY_USAGE, 0, &[])
        .into_iter()
        .filter(|p| !p.attrs.contains_key(names::GPU_MIG_ID))
        .collect();
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!(whole[0].value, 3_221_225_472.0);
    assert_eq!(find(&points, names::GPU_SM_ACTIVITY, 0, &[]).len(), 2, "two instances, no whole-GPU series");
    assert!(find(&points, names::GPU_TENSOR_ACTIVITY, 0, &mig("MIG-bbbb")).is_empty(), "no tensor counter");
    for p in &points {
        assert_eq!(p.attrs.get(names::HW_ID).map(String::as_str), Some("GPU-mig"), "{p:?}");
    }
    Ok(())
}

#[test]
fn a_mig_id_in_the_device_list_keeps_only_that_instance() -> TestResult {
    let selection: pipetel_gpu::DeviceSelection = "MIG-bbbb".parse()?;
    let h = Harness::start(MIG, |c| c.with_devices(selection))?;
    let points = h.collect()?;
    let mut ids: Vec<_> = find(&points, names::GPU_MEMORY_USAGE, 0, &[])
        .iter()
        .map(|p| p.attrs.get(names::GPU_MIG_ID).cloned().unwrap_or_default())
        .collect();
    ids.sort();
    assert_eq!(ids, ["", "MIG-bbbb"], "the whole GPU and the named instance");
    Ok(())
}

#[test]
fn this_process_reports_its_utilisation_and_memory_by_pid() -> TestResult {
    let me = std::process::id();
    let base = format!(
        "count=1\n0.uuid=GPU-p\n0.name=P\n0.energy=1234567\n0.util.gpu=90\n0.util.mem=40\n0.procs={me}:4096,1:999999\n"
    );
    // Two samples of ours (mean SM 60 %, memory 25 %) and a stranger's.
    let putil = format!("0.putil={me}:1000:50:20:0:0,{me}:2000:70:30:0:0,1:1500:99:99:99:99\n");
    let h = Harness::start(&format!("{base}{putil}"), |c| c)?;
    let pid = me.to_string();
    let task = |t| [(names::PROCESS_PID, pid.as_str()), (names::GPU_TASK, t)];
    let only_pid = [(names::PROCESS_PID, pid.as_str())];
    let points = h.collect()?;
    assert_values(
        &points,
        0,
        &[
            (names::GPU_PROCESS_UTILIZATION, &task("general"), 0.6),
            (names::GPU_PROCESS_UTILIZATION, &task("encoder"), 0.0),
            (names::GPU_PROCESS_UTILIZATION, &task("decoder"), 0.0),
            (names::GPU_PROCESS_MEMORY_BANDWIDTH_UTILIZATION, &only_pid, 0.25),
            (names::GPU_PROCESS_MEMORY_USAGE, &only_pid, 4096.0),
        ],
    )?;
    // The stranger (pid 1) is not ours: no series of it.
    assert_eq!(find(&points, names::GPU_PROCESS_MEMORY_USAGE, 0, &[]).len(), 1);
    assert_eq!(find(&points, names::GPU_PROCESS_UTILIZATION, 0, &[]).len(), 3);

    // A new sample: only the samples since the last poll count.
    let points = h.poll(&format!("{base}{}", putil.replace('\n', &format!(",{me}:3000:10:5:1:2\n"))))?;
    assert_values(
        &points,
        0,
        &[
            (names::GPU_PROCESS_UTILIZATION, &task("general"), 0.1),
            (names::GPU_PROCESS_UTILIZATION, &task("encoder"), 0.01),
            (names::GPU_PROCESS_UTILIZATION, &task("decoder"), 0.02),
            (names::GPU_PROCESS_MEMORY_BANDWIDTH_UTILIZATION, &only_pid, 0.05),
        ],
    )?;
    // Nothing new (the driver answers NOT_FOUND): a process with a context that did nothing
    // used 0 % of the GPU, a real zero, and no warning.
    let points = h.poll(&format!("{base}{putil}"))?;
    assert_eq!(value(&points, names::GPU_PROCESS_UTILIZATION, 0, &task("general"))?, 0.0);

    // The readings the stage attribution reads.
    let readings = h.gpu.readings();
    assert_eq!(readings.len(), 1);
    let r = &readings[0];
    assert!(r.used_by_this_process);
    assert_eq!((r.index, r.id.as_str()), (0, "GPU-p"));
    assert_eq!(r.energy_millijoules, Some(1_234_567));
    assert_eq!(r.process_memory_bytes, Some(4096));
    assert_eq!(r.process_sm_utilization, Some(0.0));
    assert_eq!(r.utilization, Some(0.9));
    assert_eq!((r.sm_active, r.tensor_active), (None, None), "no GPM on this GPU");
    Ok(())
}
