"""Device registry: peak numbers of known GPUs/CPUs, the detected local CPU, device spec files
(``get_device("my.json")``) and the user's devices (``perfcast devices add``)."""

from perfcast.devices.registry import (
    LOCAL_CPU_KEY,
    PEAK_PRECISIONS,
    REQUIRED_FIELDS,
    Device,
    add_user_device,
    device_keys,
    device_origin,
    get_device,
    key_from_file_name,
    list_devices,
    load_device_spec,
    local_cpu,
    register_device,
    remove_user_device,
    unregister_device,
    user_devices,
)

__all__ = [
    "LOCAL_CPU_KEY",
    "PEAK_PRECISIONS",
    "REQUIRED_FIELDS",
    "Device",
    "add_user_device",
    "device_keys",
    "device_origin",
    "get_device",
    "key_from_file_name",
    "list_devices",
    "load_device_spec",
    "local_cpu",
    "register_device",
    "remove_user_device",
    "unregister_device",
    "user_devices",
]
