"""Every location perfcast reads or writes, in one place.

Each location has an environment variable that overrides it; the defaults follow the XDG base
directory convention (as scikit-learn's ``get_data_home`` does), so nothing depends on where
perfcast is installed or on the layout of a repository checkout. Nothing here creates a
directory: the functions only say where things are (or would be).

==========================  =======================  ================================================
location                    environment variable     default
==========================  =======================  ================================================
:func:`data_home`           ``PERFCAST_DATA_HOME``   ``$XDG_DATA_HOME/perfcast``, else
                                                     ``~/.local/share/perfcast``
:func:`public_data_dir`     ``PERFCAST_DATA``        ``data_home()/public`` — the public
                                                     measurements (``timm-benchmarks/``,
                                                     ``gpumemnet-timm-train-memory-a100.csv``, ...)
:func:`local_datasets_dir`  ``PERFCAST_DATASETS``    ``data_home()/datasets`` — perfcast's own
                                                     measurement datasets (``cpu/measurements.db``)
:func:`local_cpu_db`        (``PERFCAST_DATASETS``)  ``local_datasets_dir()/cpu/measurements.db``
:func:`cache_dir`           ``PERFCAST_CACHE_DIR``   ``$XDG_CACHE_HOME/perfcast/graphs``, else
                                                     ``~/.cache/perfcast/graphs`` — the graph cache
:func:`graph_store_dir`     ``PERFCAST_GRAPH_STORE`` ``cache_dir().parent/labeled`` — graphs of
                                                     labeled records (learning)
:func:`user_devices_dir`    ``PERFCAST_DEVICES_DIR`` ``data_home()/devices`` — the user's device
                                                     specs (one ``<key>.json`` each, written by
                                                     ``perfcast devices add``)
:func:`user_models_dir`     ``PERFCAST_USER_MODELS`` ``data_home()/calibrated`` — the user's own
                                                     fitted models (``manifest.json`` as the
                                                     shipped one; written by ``perfcast
                                                     calibrate``, answer before shipped ones)
:func:`package_data`        (see below)              files shipped inside the ``perfcast`` package
==========================  =======================  ================================================

Shipped files a variable replaces (each read by its own module; default: the packaged copy):
``PERFCAST_SHIPPED_DIR`` (the directory of trained predictors), ``PERFCAST_MIG_PROFILES`` (MIG
profile table), ``PERFCAST_PRICES`` (cloud prices), ``PERFCAST_CARBON`` (carbon intensity).

From a repository checkout, point the two data variables at the checkout's copies::

    export PERFCAST_DATA=../shared/data PERFCAST_DATASETS=datasets
"""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variables, by location.
DATA_HOME_ENV = "PERFCAST_DATA_HOME"
PUBLIC_DATA_ENV = "PERFCAST_DATA"
DATASETS_ENV = "PERFCAST_DATASETS"
CACHE_DIR_ENV = "PERFCAST_CACHE_DIR"
GRAPH_STORE_ENV = "PERFCAST_GRAPH_STORE"
DEVICES_DIR_ENV = "PERFCAST_DEVICES_DIR"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def data_home() -> Path:
    """perfcast's data root: ``$PERFCAST_DATA_HOME``, else ``$XDG_DATA_HOME/perfcast``, else
    ``~/.local/share/perfcast`` (not created)."""
    env = _env_path(DATA_HOME_ENV)
    if env is not None:
        return env
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "perfcast"


def public_data_dir() -> Path:
    """The public measurements (timm benchmarks, GPUMemNet, torchvision benchmark ...):
    ``$PERFCAST_DATA``, else ``data_home()/public``."""
    env = _env_path(PUBLIC_DATA_ENV)
    return env if env is not None else data_home() / "public"


def local_datasets_dir() -> Path:
    """perfcast's own measurement datasets (``cpu/measurements.db`` ...): ``$PERFCAST_DATASETS``,
    else ``data_home()/datasets``."""
    env = _env_path(DATASETS_ENV)
    return env if env is not None else data_home() / "datasets"


def local_cpu_db() -> Path:
    """The project's CPU measurement store: ``local_datasets_dir()/cpu/measurements.db``."""
    return local_datasets_dir() / "cpu" / "measurements.db"


def cache_dir() -> Path:
    """The graph cache: ``$PERFCAST_CACHE_DIR``, else ``$XDG_CACHE_HOME/perfcast/graphs``, else
    ``~/.cache/perfcast/graphs``."""
    root = os.environ.get(CACHE_DIR_ENV)
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "perfcast" / "graphs"


def graph_store_dir() -> Path:
    """Graphs of labeled records (for learning): ``$PERFCAST_GRAPH_STORE``, else
    ``cache_dir().parent/labeled``."""
    env = os.environ.get(GRAPH_STORE_ENV)
    if env:
        return Path(env)
    return cache_dir().parent / "labeled"


def user_devices_dir() -> Path:
    """The user's device specs (``<key>.json``, the keys of a ``devices.json`` row; written by
    ``perfcast devices add``, loaded into the registry on first use): ``$PERFCAST_DEVICES_DIR``,
    else ``data_home()/devices`` (not created here)."""
    env = _env_path(DEVICES_DIR_ENV)
    return env if env is not None else data_home() / "devices"


def user_models_dir() -> Path:
    """``$PERFCAST_USER_MODELS`` or ``data_home()/calibrated``: models fitted on the user's own
    machine (``perfcast calibrate``), with a ``manifest.json`` in the shipped format."""
    return _env_path("PERFCAST_USER_MODELS") or data_home() / "calibrated"


def write_dir_atomically(path: str | os.PathLike, fill) -> Path:
    """Write a directory all at once: ``fill(tmp)`` writes into a temporary sibling directory,
    which then replaces ``path`` (a crash or Ctrl-C leaves the old directory, never half a new
    one). Returns ``path``."""
    import shutil
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        fill(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def package_data(*parts: str) -> Path:
    """A file or directory shipped inside the ``perfcast`` package, e.g.
    ``package_data("predictors", "shipped")``.

    Located with :func:`importlib.resources.files`; the Traversable is converted with
    ``Path(str(...))``, which is valid because perfcast is always installed as regular files
    (a wheel or an editable install, never run from a zip archive)."""
    from importlib.resources import files

    res = files("perfcast")
    for part in parts:
        res = res.joinpath(part)
    return Path(str(res))


__all__ = [
    "CACHE_DIR_ENV", "DATASETS_ENV", "DATA_HOME_ENV", "DEVICES_DIR_ENV", "GRAPH_STORE_ENV",
    "PUBLIC_DATA_ENV", "cache_dir", "data_home", "graph_store_dir", "local_cpu_db",
    "local_datasets_dir", "package_data", "public_data_dir", "user_devices_dir", "user_models_dir",
    "write_dir_atomically",
]
