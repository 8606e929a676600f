"""Device registry: peak numbers of known GPUs/CPUs and the detected local CPU."""

from perfcast.devices.registry import (
    LOCAL_CPU_KEY,
    PEAK_PRECISIONS,
    Device,
    device_keys,
    get_device,
    list_devices,
    local_cpu,
    register_device,
    unregister_device,
)

__all__ = [
    "LOCAL_CPU_KEY",
    "PEAK_PRECISIONS",
    "Device",
    "device_keys",
    "get_device",
    "list_devices",
    "local_cpu",
    "register_device",
    "unregister_device",
]
