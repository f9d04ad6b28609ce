"""Per-run telemetry: what the machine was doing just before and just after each run.

Recorded for every run (in summary.json under the arm's ``runs`` and in
metadata.json): the host's load average (``os.getloadavg``, 1/5/15 minutes)
and core count, the CPU frequency (MHz, the mean of
``/sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq``, else ``cpu MHz`` of
``/proc/cpuinfo``; None where neither exists, as in many VMs), and on NVIDIA
GPUs, through NVML (``nvidia-ml-py``, NVIDIA's own binding; API reference:
https://docs.nvidia.com/deploy/nvml-api/): SM and memory clocks (MHz),
temperature (°C), power (W), utilisation (%), the clock-event (throttle)
reasons, and the processes using the GPU. No NVML (no NVIDIA driver, no
binding) is recorded as a fact (``{"available": false, "reason": ...}``), not
an error.

A run is *contaminated* (:func:`contamination`) when the telemetry shows
something other than the workload could have moved its numbers: a 1-minute
load average above the core count before the run, another process on a GPU,
or GPU clocks held down by a thermal, power or hardware slowdown. Such runs are
flagged in the table; ``capshim bench --exclude-contaminated`` leaves them out
of the statistics (still listed, never silently).
"""

from __future__ import annotations

import glob
import os

__all__ = ["Telemetry", "contamination", "cpu_mhz"]

# NVML clock-event reasons that mean the clocks were held down (nvml.h,
# nvmlClocksEventReason*): SW power cap, HW slowdown, SW and HW thermal, HW power brake.
_THROTTLE = {0x4: "power cap", 0x8: "hardware slowdown", 0x20: "software thermal slowdown",
             0x40: "hardware thermal slowdown", 0x80: "hardware power brake"}


def cpu_mhz() -> float | None:
    """Mean current CPU frequency in MHz, or None when the system does not say."""
    vals = []
    for f in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            vals.append(int(open(f).read().strip()) / 1000.0)
        except (OSError, ValueError):
            continue
    if not vals:
        try:
            with open("/proc/cpuinfo") as fh:
                for line in fh:
                    if line.lower().startswith("cpu mhz"):
                        vals.append(float(line.split(":", 1)[1]))
        except (OSError, ValueError):
            pass
    return round(sum(vals) / len(vals), 1) if vals else None


class Telemetry:
    """Snapshots of the host and its NVIDIA GPUs; NVML is opened once and closed by :meth:`close`."""

    def __init__(self):
        self._nvml = None
        self.nvml_reason = None
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self._nvml = pynvml
        except ImportError:
            self.nvml_reason = "nvidia-ml-py is not installed"
        except Exception as exc:  # pynvml.NVMLError: no driver, no GPU
            self.nvml_reason = f"NVML not available: {exc}"

    def close(self) -> None:
        """Shut NVML down (safe to call twice)."""
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down, nothing to report
                pass
            self._nvml = None

    def snapshot(self) -> dict:
        """``{"load": [1, 5, 15 min], "cores": int, "cpu_mhz": float|None, "nvml": {"available": bool,
        "reason"?: str, "gpus"?: [{"index", "name", "sm_clock_mhz", "mem_clock_mhz", "temperature_c",
        "power_w", "utilization_gpu_pct", "utilization_mem_pct", "throttle": [str], "pids": [int]}]}}``;
        a value NVML cannot read is None."""
        try:
            load = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            load = None
        snap = {"load": load, "cores": os.cpu_count(), "cpu_mhz": cpu_mhz()}
        if self._nvml is None:
            snap["nvml"] = {"available": False, "reason": self.nvml_reason}
            return snap
        snap["nvml"] = {"available": True, "gpus": self._gpus()}
        return snap

    def _gpus(self) -> list[dict]:
        n = self._nvml
        out = []
        try:
            count = n.nvmlDeviceGetCount()
        except Exception:  # noqa: BLE001
            return out
        for i in range(count):
            def read(fn, *args):
                try:
                    return fn(*args)
                except Exception:  # noqa: BLE001 - not supported on this GPU
                    return None
            h = read(n.nvmlDeviceGetHandleByIndex, i)
            if h is None:
                continue
            util = read(n.nvmlDeviceGetUtilizationRates, h)
            power = read(n.nvmlDeviceGetPowerUsage, h)  # milliwatts
            events = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                      or getattr(n, "nvmlDeviceGetCurrentClocksThrottleReasons", None))  # the pre-12.5 name
            reasons = read(events, h) if events else None
            procs = (read(n.nvmlDeviceGetComputeRunningProcesses, h) or []) + \
                (read(n.nvmlDeviceGetGraphicsRunningProcesses, h) or [])
            name = read(n.nvmlDeviceGetName, h)
            out.append({
                "index": i,
                "name": name.decode() if isinstance(name, bytes) else name,
                "sm_clock_mhz": read(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
                "mem_clock_mhz": read(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM),
                "temperature_c": read(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
                "power_w": round(power / 1000.0, 1) if power is not None else None,
                "utilization_gpu_pct": util.gpu if util is not None else None,
                "utilization_mem_pct": util.memory if util is not None else None,
                "throttle": [why for bit, why in _THROTTLE.items() if reasons is not None and reasons & bit],
                "pids": sorted({int(p.pid) for p in procs}),
            })
        return out


def contamination(before: dict, after: dict, own_pids: set[int] | None = None) -> list[str]:
    """Why a run's numbers may be disturbed, from its before/after snapshots; [] when clean.

    Args:
        before, after: :meth:`Telemetry.snapshot` results.
        own_pids: pids of capshim and the run's process (not counted as "another process").
    """
    own = own_pids or set()
    out = []
    load, cores = before.get("load"), before.get("cores")
    if load and cores and load[0] > cores:
        out.append(f"load {load[0]:g} > {cores} cores")
    for when, snap in (("before", before), ("after", after)):
        for g in (snap.get("nvml") or {}).get("gpus") or []:
            others = [p for p in g.get("pids") or [] if p not in own]
            if others:
                out.append(f"GPU {g['index']}: another process {when} (pid {', '.join(map(str, others[:3]))})")
            if g.get("throttle"):
                out.append(f"GPU {g['index']}: clocks held down {when} ({', '.join(g['throttle'])})")
    return list(dict.fromkeys(out))
