"""The CUDA part of the capability table: the C table of the CUDA shim and the docs section.

The ``[[cuda]]`` entries of ``capabilities.toml`` (parsed by
:func:`capshim.profiles.table.parse` into :class:`~capshim.profiles.table.Key`
values with a :class:`~capshim.profiles.table.CudaPlace`) give each key its
cudaDeviceAttr / CUdevice_attribute numbers (the same numbers: CUDA 13.0
driver_types.h and cuda.h), its cudaDeviceProp members and their byte offsets in
the CUDA 13 layout (``cudaGetDeviceProperties`` of ``libcudart.so.13``) and the
CUDA 12 layout (``cudaGetDeviceProperties_v2``; CUDA 12.6 driver_types.h), and
the CUdevprop offset where the driver's ``cuDeviceGetProperties`` holds it.

:func:`render_cuda_table_h` writes ``native/cuda/cuda_table.h``;
:func:`render_cuda_docs` the CUDA section of ``docs/capabilities.md``
(:mod:`capshim.profiles.generate` writes both).
"""

from __future__ import annotations

from capshim.profiles.table import Key, Table

#: [[cuda]] type -> the configuration parser's value type (config.h, enum capshim_kind).
_C_KIND = {"cc": "CAPSHIM_U32", "u32": "CAPSHIM_U32", "u64": "CAPSHIM_U64"}
#: C type of a cudaDeviceProp member -> the shim's width code.
_C_WIDTH = {"int": "CAPSHIM_CUDA_INT", "size_t": "CAPSHIM_CUDA_SIZE"}


def numeric_keys(table: Table) -> list[Key]:
    """The CUDA keys a configuration sets with a number (all but the device name), table order."""
    return [k for k in table.keys["cuda"] if k.type != "string"]


def name_key(table: Table) -> Key:
    """The CUDA key of the device name (type "string": ``name``)."""
    return next(k for k in table.keys["cuda"] if k.type == "string")


def _macro(name: str, comment: str, rows: list[str]) -> list[str]:
    out = [f"/* {comment} */", f"#define {name}(X) \\"]
    out += [f"    {r} \\" for r in rows[:-1]] + [f"    {rows[-1]}", ""]
    return out


def render_cuda_table_h(table: Table) -> str:
    """The text of ``native/cuda/cuda_table.h`` for ``table``.

    Defines ``CAPSHIM_CUDA_PROP13_SIZE`` / ``PROP12_SIZE`` / ``PROP11_SIZE`` / ``DEVPROP_SIZE``
    (bytes), ``CAPSHIM_CUDA_NAME_OFFSET``, ``CAPSHIM_CUDA_KEYS(X)`` with
    ``X(key, type)`` (the configuration keyspec), ``CAPSHIM_CUDA_FIELDS(X)`` with
    ``X(key, index, attribute, width, offset13, offset12, offset11)`` (one row per cudaDeviceProp
    member; attribute -1 when no attribute answers it; index 0 = major, 1 = minor for
    computeCapability), ``CAPSHIM_CUDA_OFF(layout, offset13, offset12, offset11)`` (the offset
    of a layout: 13, 12 or 11) and ``CAPSHIM_CUDA_DEVPROP(X)`` with ``X(key, offset)``.
    """
    lay = table.cuda_layouts
    keys = numeric_keys(table)
    name = name_key(table)
    o = [
        "/* capshim CUDA shim: the keys it lowers and where it finds them.",
        " *",
        " * GENERATED from src/capshim/profiles/capabilities.toml by",
        " * `python -m capshim.profiles.generate --write`: edit the table, not this file",
        " * (a test fails when they differ). Sources of every number: the table's [[cuda]]",
        " * entries and docs/capabilities.md (CUDA 13.0 driver_types.h and cuda.h; CUDA 12.6",
        " * driver_types.h for the CUDA 12 layout).",
        " */",
        "#ifndef CAPSHIM_CUDA_TABLE_H",
        "#define CAPSHIM_CUDA_TABLE_H",
        "",
        "/* sizeof(cudaDeviceProp) of each layout and sizeof(CUdevprop), in bytes. */",
        f"#define CAPSHIM_CUDA_PROP13_SIZE {lay['cuda13_size']}",
        f"#define CAPSHIM_CUDA_PROP12_SIZE {lay['cuda12_size']}",
        f"#define CAPSHIM_CUDA_PROP11_SIZE {lay['cuda11_size']}",
        f"#define CAPSHIM_CUDA_DEVPROP_SIZE {lay['devprop_size']}",
        f"/* cudaDeviceProp.{name.cuda.members[0]}: {name.cuda.ctype} at the same offset in both layouts. */",
        f"#define CAPSHIM_CUDA_NAME_OFFSET {name.cuda.offsets13[0]}",
        f"#define CAPSHIM_CUDA_NAME_SIZE {name.cuda.ctype.partition('[')[2].rstrip(']')}",
        "",
        "/* The offset of a member in layout 13, 12 or 11 (the pre-12 one). */",
        "#define CAPSHIM_CUDA_OFF(layout, off13, off12, off11) \\",
        "    ((layout) == 13 ? (off13) : (layout) == 12 ? (off12) : (off11))",
        "",
        "/* Widths of a cudaDeviceProp member. */",
        "enum capshim_cuda_width { CAPSHIM_CUDA_INT = 4, CAPSHIM_CUDA_SIZE = 8 };",
        "",
    ]
    o += _macro("CAPSHIM_CUDA_KEYS", "X(key, type): the configuration keys (config.h keyspec), table order.",
                [f"X({k.key}, {_C_KIND[k.type]})" for k in keys])
    rows = []
    for k in keys:
        place = k.cuda
        for i, member in enumerate(place.members):
            attr = place.attributes[i] if place.attributes else -1
            rows.append(f"X({k.key}, {i}, {attr}, {_C_WIDTH[place.ctype]}, {place.offsets13[i]}, "
                        f"{place.offsets12[i]}, {place.offsets11[i]}) /* {member} */")
    o += _macro("CAPSHIM_CUDA_FIELDS",
                "X(key, index, attribute, width, offset13, offset12, offset11): each cudaDeviceProp member of a key.",
                rows)
    o += _macro("CAPSHIM_CUDA_DEVPROP", "X(key, offset): the int members of the driver's CUdevprop.",
                [f"X({k.key}, {k.cuda.devprop})" for k in keys if k.cuda.devprop is not None])
    o += ["#endif", ""]
    return "\n".join(o)


def render_cuda_docs(table: Table) -> str:
    """The CUDA section of ``docs/capabilities.md`` (appended after Metal's)."""
    lay = table.cuda_layouts
    o = ["", "## CUDA", "",
         "Lower-only: a CUDA profile (`api = \"cuda\"`) must say `direction = \"lower\"`; the",
         "device's real kernels must still run. The shim answers min(device, profile) for each",
         "key; `computeCapability` is one key, `major * 10 + minor` (a profile may write",
         "`\"7.5\"` or `75`), lowered as a pair: 9.0 under 7.5 answers major 7 and minor 5, 7.0",
         "under 7.5 stays 7.0. `deviceName` (a string, off by default) replaces the device name.",
         "Attribute numbers are the same for `cudaDeviceGetAttribute` (cudaDeviceAttr) and",
         "`cuDeviceGetAttribute` (CUdevice_attribute). Offsets are bytes into `cudaDeviceProp`:",
         f"CUDA 13 ({lay['cuda13_size']} bytes, `cudaGetDeviceProperties` of `libcudart.so.13`),",
         f"CUDA 12 ({lay['cuda12_size']} bytes, `cudaGetDeviceProperties_v2` of `libcudart.so.12`) and",
         f"the pre-12 layout ({lay['cuda11_size']} bytes, CUDA 11.8: the plain `cudaGetDeviceProperties` of",
         "`libcudart.so.12` and of 11.x runtimes; every member here sits where CUDA 12 has it).",
         "A runtime before 11.0 fills a layout the table does not hold: the shim writes nothing",
         "through it and reports `layout_mismatch`. `CUdevprop` is the driver's `cuDeviceGetProperties`.",
         "",
         "| key | kind | type | unit | attribute | cudaDeviceProp member (13 / 12 / 11 offset) | CUdevprop | description | source |",
         "|---|---|---|---|---|---|---|---|---|"]
    for k in table.keys["cuda"]:
        p = k.cuda
        attrs = ", ".join(str(a) for a in p.attributes) or "none"
        members = ", ".join(f"`{m}` ({a} / {b} / {c})"
                            for m, a, b, c in zip(p.members, p.offsets13, p.offsets12, p.offsets11))
        devprop = "—" if p.devprop is None else str(p.devprop)
        o.append(f"| `{k.key}` | {k.kind} | {k.type} | {k.unit} | {attrs} | {members} | {devprop} | "
                 f"{k.description} | {k.source} |")
    return "\n".join(o) + "\n"


__all__ = ["render_cuda_table_h", "render_cuda_docs", "numeric_keys", "name_key"]
