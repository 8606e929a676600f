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
:func:`price_table_path`    ``PERFCAST_PRICES``      ``public_data_dir()/prices/gpu_prices.csv`` —
                                                     the public on-demand GPU prices (a CSV)
:func:`local_datasets_dir`  ``PERFCAST_DATASETS``    ``data_home()/datasets`` — perfcast's own
                                                     measurement datasets (``cpu/measurements.db``)
:func:`local_cpu_db`        (``PERFCAST_DATASETS``)  ``local_datasets_dir()/cpu/measurements.db``
:func:`cache_dir`           ``PERFCAST_CACHE_DIR``   ``$XDG_CACHE_HOME/perfcast/graphs``, else
                                                     ``~/.cache/perfcast/graphs`` — the graph cache
:func:`graph_store_dir`     ``PERFCAST_GRAPH_STORE`` ``cache_dir().parent/labeled`` — graphs of
                                                     labeled records (learning)
:func:`corpus_dir`          ``PERFCAST_CORPUS``      ``cache_dir().parent/corpus`` — the unlabeled
                                                     graph corpus (pre-training)
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
profile table), ``PERFCAST_CARBON`` (carbon intensity).

From a repository checkout, point the two data variables at the checkout's copies::

    export PERFCAST_DATA=../shared/data PERFCAST_DATASETS=datasets
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

#: Environment variables, by location.
DATA_HOME_ENV = "PERFCAST_DATA_HOME"
PUBLIC_DATA_ENV = "PERFCAST_DATA"
DATASETS_ENV = "PERFCAST_DATASETS"
CACHE_DIR_ENV = "PERFCAST_CACHE_DIR"
GRAPH_STORE_ENV = "PERFCAST_GRAPH_STORE"
CORPUS_ENV = "PERFCAST_CORPUS"
DEVICES_DIR_ENV = "PERFCAST_DEVICES_DIR"
PRICES_ENV = "PERFCAST_PRICES"


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


def price_table_path() -> Path:
    """The on-demand GPU price table (``perfcast.decisions.prices`` reads it):
    ``$PERFCAST_PRICES`` (a CSV of the same columns), else
    ``public_data_dir()/prices/gpu_prices.csv``."""
    env = _env_path(PRICES_ENV)
    return env if env is not None else public_data_dir() / "prices" / "gpu_prices.csv"


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


def corpus_dir() -> Path:
    """The unlabeled graph corpus for pre-training (``perfcast corpus --out``; the 20k-graph one
    of ``benchmarks/build_trappm_corpus.sh``): ``$PERFCAST_CORPUS``, else
    ``cache_dir().parent/corpus``."""
    env = _env_path(CORPUS_ENV)
    if env is not None:
        return env
    return cache_dir().parent / "corpus"


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


def _fsync_path(path: Path) -> None:
    """Flush ``path`` (a file, or a directory's entries) to disk; best effort where the OS
    cannot (e.g. directories on Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomically(path: str | os.PathLike, write) -> Path:
    """Write one file all at once: ``write(tmp)`` writes a temporary file in the same folder
    (same suffix, so writers that infer the format from it — ``savefig``, ``to_parquet`` —
    work), which is ``fsync``-ed and renamed over ``path``. A crash, Ctrl-C or full disk
    leaves the old file (or none), never half a new one. ``write`` may also be ``str`` or
    ``bytes`` (the content). The file gets the umask's mode. Returns ``path``."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    tmp = Path(name)
    try:
        if isinstance(write, (str, bytes)):
            with os.fdopen(fd, "wb") as f:
                f.write(write.encode() if isinstance(write, str) else write)
        else:
            os.close(fd)
            write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp (and safetensors) create 0600 files
        _fsync_path(tmp)
        os.replace(tmp, path)
        _fsync_path(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    """The process umask (read once: reading it means setting it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_json_file(path: str | os.PathLike, what: str):
    """The JSON document of a file the user named (a cluster, a device spec): one line naming
    ``what`` and the file when it is missing, unreadable or not JSON (exit 2)."""
    import json

    from perfcast.errors import PerfcastError

    p = Path(path).expanduser()
    if not p.is_file():
        raise PerfcastError(f"{what} not found: {path}")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PerfcastError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno} column "
                            f"{exc.colno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PerfcastError(f"cannot read {what} {path}: {exc}") from None


def check_output_file(path: str | os.PathLike, *, suffixes: tuple[str, ...] = (),
                      option: str = "output", default_name: str | None = None) -> Path:
    """Validate an output file path before any work is done (one place for every command):
    its folder must exist and be writable; an existing directory becomes
    ``<dir>/<default_name>`` when a ``default_name`` is given; ``suffixes`` (e.g.
    ``(".png", ".svg")``) are the formats the writer knows. Returns the path to write;
    raises :class:`~perfcast.errors.PerfcastError` (exit 2) naming ``option`` otherwise."""
    from perfcast.errors import PerfcastError

    p = Path(path).expanduser()
    if p.is_dir():
        if default_name is None:
            raise PerfcastError(f"{option} {str(path)!r} is a directory; give a file name")
        p = p / default_name
    if suffixes and p.suffix.lower() not in suffixes:
        raise PerfcastError(f"{option} {str(path)!r}: the file name must end in "
                            f"{' or '.join(suffixes)}")
    folder = p.parent
    if not folder.is_dir():
        probe = folder  # a regular file on the way is not a missing folder
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            raise PerfcastError(f"{option} {str(path)!r}: {str(probe)!r} is a file, not a "
                                f"folder")
        raise PerfcastError(f"{option} {str(path)!r}: folder {str(folder)!r} does not exist "
                            f"(create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PerfcastError(f"{option} {str(path)!r}: folder {str(folder)!r} is not writable")
    if p.exists() and not os.access(p, os.W_OK):
        raise PerfcastError(f"{option} {str(path)!r} exists and is not writable")
    return p


def check_output_dir(path: str | os.PathLike, *, option: str = "output") -> Path:
    """Validate an output directory before any work is done: it is a directory or can be
    created (its nearest existing ancestor is a writable directory). Returns it (not
    created)."""
    from perfcast.errors import PerfcastError

    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise PerfcastError(f"{option} {str(path)!r} exists and is not a directory")
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise PerfcastError(f"{option} {str(path)!r}: {str(probe)!r} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PerfcastError(f"{option} {str(path)!r}: {str(probe)!r} is not writable")
    return p


def read_dir_config(path: str | os.PathLike, name: str, what: str) -> dict:
    """The JSON config ``name`` of the saved directory ``path`` (the other half of
    :func:`write_dir_atomically`): "not a saved <what>" when it has none, else
    :func:`read_json_file`'s one-line errors."""
    from perfcast.errors import PerfcastError

    cfg_path = Path(path) / name
    if not cfg_path.is_file():
        raise PerfcastError(f"{path}: not a saved {what} (no {name})")
    return read_json_file(cfg_path, f"{what} config")


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
        for f in tmp.rglob("*"):  # on disk before the rename makes them visible
            if f.is_file():
                _fsync_path(f)
        old = None
        if path.exists():  # moved aside, so that some complete version exists at every moment
            old = path.parent / f".{path.name}.old-{os.getpid()}-{os.urandom(4).hex()}"
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            if old is not None and not path.exists():
                os.replace(old, path)
            raise
        _fsync_path(path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
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
    "PRICES_ENV", "PUBLIC_DATA_ENV", "cache_dir", "data_home", "graph_store_dir",
    "local_cpu_db", "local_datasets_dir", "package_data", "price_table_path", "public_data_dir",
    "user_devices_dir", "user_models_dir",
    "check_output_dir", "check_output_file", "write_dir_atomically", "write_file_atomically",
]
