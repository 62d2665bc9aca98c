//! The NVML queries of a device, each the unit of "this device cannot do that, stop asking".

use crate::source::policy;

policy::fields!(
    /// One NVML query of a device; the unit of "this device cannot do that, stop asking".
    pub(super) Field {
        Utilization => "nvmlDeviceGetUtilizationRates",
        Encoder => "nvmlDeviceGetEncoderUtilization",
        Decoder => "nvmlDeviceGetDecoderUtilization",
        Memory => "nvmlDeviceGetMemoryInfo_v2",
        Power => "nvmlDeviceGetPowerUsage",
        Energy => "nvmlDeviceGetTotalEnergyConsumption",
        Temperature => "nvmlDeviceGetTemperature",
        EccCorrected | EccUncorrected => "nvmlDeviceGetTotalEccErrors",
        ClockGraphics | ClockSm | ClockMemory | ClockVideo => "nvmlDeviceGetClockInfo",
        FanSpeed => "nvmlDeviceGetFanSpeed_v2",
        PcieTx | PcieRx => "nvmlDeviceGetPcieThroughput",
        ComputeProcesses => "nvmlDeviceGetComputeRunningProcesses_v3",
        GraphicsProcesses => "nvmlDeviceGetGraphicsRunningProcesses_v3",
        PowerLimit => "nvmlDeviceGetEnforcedPowerLimit",
        Throttle => "nvmlDeviceGetCurrentClocksThrottleReasons",
        RemappedRows => "nvmlDeviceGetRemappedRows",
        RetiredSingleBit | RetiredDoubleBit => "nvmlDeviceGetRetiredPages_v2",
        RetiredPending => "nvmlDeviceGetRetiredPagesPendingStatus",
        Gpm => "nvmlGpmSampleGet",
        GpmMig => "nvmlGpmMigSampleGet",
        MigMemory => "nvmlDeviceGetMemoryInfo_v2 (MIG device)",
        ProcessUtilization => "nvmlDeviceGetProcessUtilization",
    }
);
