"""One request for every command, mode and surface: parsed and validated in one place.

:meth:`Request.of` takes a command's options by their names in :data:`~perfcast.request.fields.
FIELDS` (the keywords of the Python API, the keys of an HTTP body, what the CLI passes on) and
returns the request tree — ``workload`` (the :class:`~perfcast.workload.Workload`, which holds
the model, batch, shapes, precision, its :class:`~perfcast.workload.Layout` and the serving
fields), ``device``, ``options`` (how perfcast answers) and ``decision`` (the command's own
knobs) — after :meth:`Request.validate`, the one place an option is checked: a known name taken
by the command, of its kind and among its choices, applying to the request's mode, and the
workload's own rules (:meth:`~perfcast.workload.Workload.validate`). :meth:`Request.replace`
derives a variant (another batch, device, mode …), validated the same way.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.request.fields import ALIASES, BY_NAME, Field, fields_of
from perfcast.workload import LAYOUT_KEYWORDS, MAX_SIZE, OPTIMIZER_NOT_GIVEN, Workload

#: Fields whose value lives in the :class:`~perfcast.workload.Workload` (its layout keywords and
#: serving fields included); the rest are options or the decision's own.
WORKLOAD_FIELDS = ("batch_size", "input_size", "seq_len", "mode", "precision", "optimizer",
                   "tf32", "engine", "input_len", "output_len", "n_batch", "n_ubatch",
                   "kv_cache_dtype", "finetune", "lora_rank", "lora_targets", *LAYOUT_KEYWORDS)
#: The options of how perfcast answers (:class:`Options`).
OPTION_FIELDS = ("predictor", "threads", "coverage", "power_limit_w", "store",
                 "runtime_overhead_mb", "use_cache", "cluster")
@dataclass(frozen=True)
class Options:
    """How perfcast answers: ``predictor`` (a registry kind or a saved predictor's directory;
    ``None`` = the route decides), ``threads`` (CPU devices), ``coverage`` of the intervals,
    ``power_limit_w``, ``store`` (measured values first), ``runtime_overhead_mb``, ``use_cache``
    and the ``cluster`` of a layout over GPUs."""

    predictor: str | None = None
    threads: int | None = None
    coverage: float = 0.9
    power_limit_w: float | None = None
    store: str | None = None
    runtime_overhead_mb: float | None = None
    use_cache: bool = True
    cluster: Any = None


@dataclass(frozen=True)
class Request:
    """A parsed, validated request (module docstring). ``given``: the names the user set (the
    rest are defaults); ``command``: whose options these are."""

    command: str
    model: Any
    workload: Workload | None
    device: Any
    options: Options
    decision: dict[str, Any] = field(default_factory=dict, compare=False)
    given: frozenset[str] = frozenset()
    #: every field's value (given or default), by name
    values: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ------------------------------------------------------------------------------ building
    @classmethod
    def of(cls, command: str, values: dict[str, Any] | None = None, **kw: Any) -> Request:
        """Parse ``command``'s options (``values`` and keywords, by field name or alias) into a
        request and :meth:`validate` it. ``model`` may be an ``nn.Module`` or another
        framework's model object (Python API); ``example_inputs`` go with it."""
        raw = {**(values or {}), **kw}
        example = raw.pop("example_inputs", None)
        raw = {ALIASES.get(k, k): v for k, v in raw.items()}
        taken = {f.name: f for f in fields_of(command)}
        unknown = sorted(k for k in raw if k not in BY_NAME)
        if unknown:
            near = difflib.get_close_matches(unknown[0], list(taken), n=1)
            raise PerfcastError(f"unknown option {unknown[0]!r} for perfcast {command}"
                                + (f" — did you mean {near[0]!r}?" if near else "")
                                + f" (options: {', '.join(sorted(taken))})")
        foreign = sorted(k for k, v in raw.items() if k not in taken and v is not None
                         and v != BY_NAME[k].default)
        if foreign:
            f = BY_NAME[foreign[0]]
            takers = [c for c in f.commands]
            raise PerfcastError(f"perfcast {command} takes no {f.flag}"
                                + (f" ({f.flag} is an option of perfcast "
                                   f"{', '.join(takers)})" if takers else ""))
        given = frozenset(k for k, v in raw.items() if v is not None)
        for name, f in taken.items():
            if command in f.required and name not in given:
                raise PerfcastError(f"perfcast {command} needs "
                                    + ("a model (MODEL)" if f.argument else f"{f.flag}"))
        values = {**{n: f.default_for(command) for n, f in taken.items()},
                  **{k: v for k, v in raw.items() if v is not None}}
        return cls._build(command, values, given, example)

    @classmethod
    def build(cls, command: str, model: Any, **options: Any) -> Request:
        """:meth:`of` for the Python API's way of giving a request: ``model`` a spec, an
        ``nn.Module`` or another framework's model, or a :class:`Workload` carrying its own
        fields; ``layout`` a :class:`~perfcast.workload.Layout` (its fields taken as
        options)."""
        layout = options.pop("layout", None)
        if layout is not None:
            from perfcast.workload import Layout

            if not isinstance(layout, Layout):
                raise PerfcastError(f"layout must be a perfcast.workload.Layout, not "
                                    f"{type(layout).__name__}")
            d = layout.to_dict()
            d.pop("gpus", None)
            for k, v in d.items():
                if options.get(k) is None:
                    options[k] = v
        if isinstance(model, Workload):
            given = [k for k, v in options.items() if v is not None and k in WORKLOAD_FIELDS]
            if given:
                raise PerfcastError("give the options in the Workload, not beside it: "
                                    + ", ".join(given))
            options = {**_workload_options(model), **options}
            model = model.model.module if model.model.module is not None else model.spec
        return cls.of(command, model=model, **options)

    @classmethod
    def _build(cls, command: str, values: dict[str, Any], given: frozenset[str],
               example: Any) -> Request:
        for name, v in values.items():
            _check_value(BY_NAME[name], v, command)
        mode = values.get("mode", "infer")
        for name in sorted(given):
            f = BY_NAME[name]
            if not f.applies(mode) and values.get(name) != f.default:
                raise PerfcastError(f"{f.flag} does not apply to --mode {mode} (it applies to "
                                    f"--mode {' / '.join(f.modes)})"
                                    + (f": {f.why}" if f.why else ""))
        model = values.get("model")
        wl = None
        if model is not None:
            wk = {k: values[k] for k in WORKLOAD_FIELDS if k in values}
            if "precision" not in given:
                wk["precision"] = None  # the device's measured one; generate: the engine's
            if "optimizer" not in given:
                wk["optimizer"] = OPTIMIZER_NOT_GIVEN  # the model's source decides
            _finetune_defaults(wk, given)
            if command == "plan" and "pipeline_parallel" not in given:
                # plan searches what the layout leaves unset: a schedule is checked against
                # the pipeline stages each candidate has, not the request's default of one
                wk.pop("schedule", None)
            if command == "plan" and not {"data_parallel", "context_parallel"} <= given:
                # likewise E, which must divide each candidate's D·C
                wk.pop("expert_parallel", None)
            wl = Workload.of(model, example_inputs=example, **wk)
        opts = Options(**{k: values[k] for k in OPTION_FIELDS if k in values})
        decision = {k: v for k, v in values.items()
                    if k not in WORKLOAD_FIELDS and k not in OPTION_FIELDS
                    and k not in ("model", "device")}
        return cls(command=command, model=model, workload=wl, device=values.get("device"),
                   options=opts, decision=decision, given=given, values=dict(values))

    def replace(self, **changes: Any) -> Request:
        """A validated copy with ``changes`` (field names; ``batch_size``, ``device``, ``mode``
        …). A change to the mode keeps only the given options that apply to the new one."""
        changes = {ALIASES.get(k, k): v for k, v in changes.items()}
        values = {**self.values, **changes}
        given = (self.given | {k for k, v in changes.items() if v is not None}) - \
            {k for k, v in changes.items() if v is None}
        if "mode" in changes:
            mode = changes["mode"]
            given = frozenset(g for g in given if BY_NAME[g].applies(mode))
            values = {k: (v if k in given or k == "mode" else BY_NAME[k].default)
                      for k, v in values.items()}
        cmd = changes.pop("command", None) or self.command
        example = self.workload.model.example_inputs if self.workload is not None else None
        return type(self)._build(cmd, values, frozenset(given), example)

    # ------------------------------------------------------------------------------ reading
    @property
    def mode(self) -> str:
        return self.workload.mode if self.workload is not None else \
            self.values.get("mode", "infer")

    @property
    def layout(self):
        return self.workload.layout if self.workload is not None else None

    def value(self, name: str) -> Any:
        """The value of field ``name`` (its default when not given)."""
        name = ALIASES.get(name, name)
        return self.values.get(name, BY_NAME[name].default)

    def to_dict(self) -> dict[str, Any]:
        """The given options by field name (what an HTTP body or a CLI call would carry)."""
        out = {k: self.values[k] for k in sorted(self.given) if k in self.values}
        if "model" in out and not isinstance(out["model"], str):
            out["model"] = self.workload.spec if self.workload is not None else None
        return out


def _finetune_defaults(wk: dict[str, Any], given: frozenset[str]) -> None:
    """``--finetune``'s defaults in the workload's keywords ``wk``: the adapters' rank and
    projections only with ``lora`` / ``qlora`` (given without them, the workload refuses them).
    The optimizer not given is the workload's default for ``hf:`` models, AdamW (that of PEFT /
    TRL fine-tuning recipes too: :func:`perfcast.workload.default_optimizer`)."""
    from perfcast.workload.finetune import ADAPTER_METHODS

    method = wk.get("finetune")
    for name in ("lora_rank", "lora_targets"):
        if name not in given and method not in ADAPTER_METHODS:
            wk.pop(name, None)


def _workload_options(w: Workload) -> dict[str, Any]:
    """A :class:`Workload`'s fields as request options (the ones it sets)."""
    d = {"batch_size": w.batch_size, "input_size": w.input_size, "seq_len": w.seq_len,
         "mode": w.mode, "precision": w.precision,
         "optimizer": None if w.optimizer_defaulted else w.optimizer,
         "tf32": w.tf32, "engine": w.engine, "input_len": w.input_len,
         "output_len": w.output_len, "n_batch": w.n_batch, "n_ubatch": w.n_ubatch,
         "kv_cache_dtype": w.kv_cache_dtype, "finetune": w.finetune,
         "lora_rank": w.lora_rank, "lora_targets": w.lora_targets}
    lay = w.layout.to_dict()
    lay.pop("gpus", None)
    d.update(lay)
    if w.model.example_inputs is not None:
        d["example_inputs"] = w.model.example_inputs
    return {k: v for k, v in d.items() if v is not None}


def _bound(x) -> str:
    """A field's limit as the message prints it: whole numbers in full (``1,048,576``, not
    ``1.04858e+06``; below 100,000 without separators), others in ``%g``."""
    if x is None:
        return ""
    if float(x).is_integer():
        return f"{int(x):,}" if abs(x) >= 100_000 else str(int(x))
    return f"{x:g}"


#: The longest name or path a text option may be (bytes of UTF-8): Linux's PATH_MAX, and its
#: NAME_MAX for each part between slashes — longer, every look-up of it as a file fails.
MAX_TEXT_BYTES, MAX_NAME_BYTES = 4096, 255


def _check_text(flag: str, v: str) -> None:
    """A text option (a name, a path, a list of them): UTF-8 text (a lone surrogate, which
    JSON's ``\\ud800`` can carry, is not) within the file system's length limits."""
    try:
        data = v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PerfcastError(f"{flag} is not valid text: it holds a lone surrogate "
                            f"{v[exc.start]!r} at character {exc.start}") from None
    if "://" in v:  # a URL (--store): its parts are not file names
        return
    long_part = max((len(p) for p in data.replace(b"\\", b"/").split(b"/")), default=0)
    if len(data) > MAX_TEXT_BYTES or long_part > MAX_NAME_BYTES:
        raise PerfcastError(f"{flag} is too long to name anything ({len(data):,} bytes"
                            + (f", a part of {long_part:,} between slashes"
                               if len(data) <= MAX_TEXT_BYTES else "")
                            + f"): a name or path is at most {MAX_TEXT_BYTES:,} bytes, each part "
                              f"at most {MAX_NAME_BYTES}; got {v[:40]!r}…")


def _check_value(f: Field, v: Any, command: str | None = None) -> None:
    """A field's value on its own: its kind, its choices, a positive size or count, text that
    can name a file."""
    if v is None:
        return
    flag = f.flag
    if f.kind in ("str", "list"):
        texts = [v] if isinstance(v, str) else v if isinstance(v, (list, tuple)) else ()
        if f.kind == "list":  # a comma-separated list: each name on its own
            texts = [t for x in texts if isinstance(x, str) for t in x.split(",")]
        for text in texts:
            if isinstance(text, str):
                _check_text(flag, text)
    if f.kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise PerfcastError(f"{flag} must be an integer, got {v!r}")
        if abs(v) > MAX_SIZE and f.group != "decision":  # a size; a job's counts may be more
            raise PerfcastError(f"{flag} must be ≤ {MAX_SIZE:,}, got {v:,}")
    elif f.kind == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise PerfcastError(f"{flag} must be a number, got {v!r}")
    elif f.kind == "bool":
        if not isinstance(v, bool):
            raise PerfcastError(f"{flag} must be true or false, got {v!r}")
    if f.kind in ("int", "float") and (f.minimum is not None or f.maximum is not None):
        lo, hi = f.minimum, f.maximum
        low_bad = lo is not None and (v <= lo if f.exclusive and hi is None else v < lo)
        high_bad = hi is not None and (v >= hi if f.exclusive else v > hi)
        if f.exclusive and lo is not None and hi is not None:
            low_bad = v <= lo
        if low_bad or high_bad:
            lo_s, hi_s = _bound(lo), _bound(hi)
            if lo is not None and hi is not None:
                what = (f"between {lo_s} and {hi_s} (exclusive)" if f.exclusive
                        else f"in {lo_s}..{hi_s}")
            elif lo is not None:
                what = ("positive" if lo == 0 and f.exclusive else
                        f"≥ {lo_s}" if not f.exclusive else f"> {lo_s}")
            else:
                what = f"≤ {hi_s}"
            raise PerfcastError(f"{flag} must be {what}"
                                + (f" ({f.unit})" if f.unit else "") + f", got {v!r}")
    allowed = f.allowed(command) if f.name not in ("model",) else None
    if f.name == "precision" and command not in ("memory", "power-limit", "report"):
        allowed = None  # which precisions a mode takes: the workload says (its messages)
    if allowed and f.kind != "list" and v not in allowed:
        from perfcast.errors import unknown_choice

        if "choices" in f.overrides.get(command, {}) and v in (f.allowed() or ()):
            from perfcast.request.fields import _or

            where = (" (LLM serving: perfcast predict, fit, cost, rank, mig and plan --mode "
                     "generate)" if f.name == "mode" and v == "generate" else "")
            raise PerfcastError(f"perfcast {command} takes {flag} {_or(allowed)}, not "
                                f"{v!r}{where}")
        raise unknown_choice(flag.lstrip("-").replace("-", " "), v, allowed)


__all__ = ["OPTION_FIELDS", "Options", "Request", "WORKLOAD_FIELDS"]
