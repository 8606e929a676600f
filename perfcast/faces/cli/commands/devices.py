"""``perfcast devices``: the device registry; ``devices add`` / ``devices remove`` keep the
user's own specs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from perfcast.faces.cli._common import PANEL_PREDICT, Json, examples, out, print_json

app = typer.Typer()

# `perfcast devices` lists (as it always did); `devices add` / `devices remove` keep the user's
# own device specs (perfcast.paths.user_devices_dir()).
devices_app = typer.Typer(no_args_is_help=False)
app.add_typer(devices_app, name="devices", rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast devices", "perfcast devices --json", "perfcast devices add my-gpu.json",
    "perfcast devices remove my-gpu"))


@devices_app.callback(invoke_without_command=True)
def devices(ctx: typer.Context, as_json: Json = False):
    """List the devices perfcast knows; add or remove your own.

    Peak TFLOPS, memory GB, bandwidth GB/s and MIG profiles of every registry device; `devices
    add SPEC.json` keeps a spec of your own (the keys of a registry row, perfcast devices
    --json shows them), `devices remove KEY` deletes it."""
    if ctx.invoked_subcommand is not None:
        return
    from perfcast.devices import list_devices

    rows = list_devices()
    if as_json:
        print_json([d.to_dict() for d in rows])
        return
    t = Table(title="devices")
    for col in ("key", "name", "FP32 TFLOPS", "FP16 TFLOPS", "memory GB", "GB/s", "MIG"):
        t.add_column(col)
    for d in rows:
        t.add_row(d.key, d.name, f"{d.peak_fp32_tflops:g}" if d.peak_fp32_tflops else "-",
                  f"{d.peak_fp16_tflops:g}" if d.peak_fp16_tflops else "-",
                  f"{d.memory_gb:g}" if d.memory_gb else "-",
                  f"{d.bandwidth_gbs:g}" if d.bandwidth_gbs else "-",
                  str(len(d.mig_profiles)) if d.mig_profiles else "-")
    out.print(t)


@devices_app.command("add", epilog=examples("perfcast devices add my-gpu.json",
                                            "perfcast devices add a100-40gb.json --replace"))
def devices_add(
    spec: Annotated[str, typer.Argument(
        help="Device spec: a JSON object with the keys of a devices.json row (perfcast devices "
             "--json shows them); key defaults to the file name.", show_default=False)],
    replace: Annotated[bool, typer.Option(
        "--replace", help="Overwrite a user device or override a built-in one of that key.")] = False,
    as_json: Json = False,
):
    """Keep a device spec of your own (then --device KEY works).

    Validates SPEC.json and stores it in $PERFCAST_DEVICES_DIR, else <data home>/devices."""
    from perfcast.devices import add_user_device

    dev, path = add_user_device(spec, replace=replace)
    if as_json:
        print_json({"key": dev.key, "path": str(path), "device": dev.to_dict()})
        return
    out.print(f"added device [bold]{dev.key}[/bold] ({dev.name}) → {path}", highlight=False)


@devices_app.command("remove", epilog=examples("perfcast devices remove my-gpu"))
def devices_remove(
    key: Annotated[str, typer.Argument(help="Key of a user device (perfcast devices add).",
                                       show_default=False)],
    as_json: Json = False,
):
    """Delete a device of your own.

    Built-in devices stay; a built-in the user device overrode comes back."""
    from perfcast.devices import remove_user_device

    files = remove_user_device(key)
    if as_json:
        print_json({"key": key.strip().lower(), "removed": [str(f) for f in files]})
        return
    out.print(f"removed device [bold]{key.strip().lower()}[/bold] "
              f"({', '.join(str(f) for f in files)})", highlight=False)


__all__ = ["app"]
