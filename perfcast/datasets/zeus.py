"""The Zeus power traces (NSDI'23; ml-energy/zeus, Apache-2.0): ``zeus-power/summary_power_
{a40,p100,rtx6000,v100}.csv`` — six training workloads on four GPUs over batch sizes,
optimizers and power limits, each row an average board power (W) and a time per epoch (s).

:func:`load_zeus` returns one row per trace row with the perfcast device and workload
(:data:`perfcast.zoo.zeus.ZEUS_WORKLOADS`) attached and, from the workload's samples per epoch,
the time and energy per training step. Nothing is dropped; every value is the file's.

=====================  ====================================================================
``gpu``                the file's GPU (``a40``, ``p100``, ``rtx6000``, ``v100``)
``device``             perfcast device key (:data:`DEVICES`)
``dataset``/``network`` as the file names them; ``workload`` = ``network/dataset``
``model``/``input_size`` the perfcast spec and per-sample input of the workload
``batch_size``         int; ``optimizer`` as the file names it (adadelta, adam, adamw)
``power_limit_w``      the NVML power limit the row ran at (W)
``time_per_epoch_s``   measured (s); ``power_w`` measured average board power (W)
``samples_per_epoch``  the workload's (see :mod:`perfcast.zoo.zeus`); ``steps_per_epoch`` =
                       ⌈samples ÷ batch⌉
``time_ms``            time per step = time per epoch ÷ steps (ms); ``energy_j`` = power ×
                       time per step (J); ``energy_per_epoch_j`` = power × time per epoch
``source``/``source_row`` file name and 0-based data row
=====================  ====================================================================
"""

from __future__ import annotations

import math
import os

import pandas as pd

from perfcast.datasets._base import data_file, resolve_data_dir

#: The traces' GPUs → perfcast device keys. The "v100" file's 100-250 W range is the PCIe
#: card's (see the device row's notes).
DEVICES = {"a40": "a40", "p100": "p100-16gb-pcie", "rtx6000": "quadro-rtx-6000",
           "v100": "v100-32gb-pcie"}
FILES = {g: f"zeus-power/summary_power_{g}.csv" for g in DEVICES}


def load_zeus(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every row of the four Zeus trace files (see the module docstring)."""
    from perfcast.zoo.zeus import zeus_workload

    root = resolve_data_dir(data_dir)
    frames = []
    for gpu, rel in FILES.items():
        raw = pd.read_csv(data_file(root, rel))
        raw["gpu"], raw["device"] = gpu, DEVICES[gpu]
        raw["source"], raw["source_row"] = rel.split("/")[-1], range(len(raw))
        frames.append(raw)
    df = pd.concat(frames, ignore_index=True)
    wl = [zeus_workload(d, n) for d, n in zip(df["dataset"], df["network"])]
    df["workload"] = [w.name for w in wl]
    df["model"] = [w.spec for w in wl]
    df["input_size"] = [",".join(map(str, w.input_size)) for w in wl]
    df["samples_per_epoch"] = [w.samples_per_epoch for w in wl]
    df = df.rename(columns={"power_limit": "power_limit_w", "time_per_epoch": "time_per_epoch_s",
                            "average_power": "power_w"})
    df["batch_size"] = df["batch_size"].astype(int)
    df["steps_per_epoch"] = [math.ceil(n / b) for n, b in
                             zip(df["samples_per_epoch"], df["batch_size"])]
    df["time_ms"] = df["time_per_epoch_s"] / df["steps_per_epoch"] * 1e3
    df["energy_j"] = df["power_w"] * df["time_ms"] / 1e3
    df["energy_per_epoch_j"] = df["power_w"] * df["time_per_epoch_s"]
    cols = ["gpu", "device", "dataset", "network", "workload", "model", "input_size",
            "batch_size", "optimizer", "power_limit_w", "time_per_epoch_s", "power_w",
            "samples_per_epoch", "steps_per_epoch", "time_ms", "energy_j", "energy_per_epoch_j",
            "source", "source_row"]
    return df[cols]


__all__ = ["DEVICES", "FILES", "load_zeus"]
