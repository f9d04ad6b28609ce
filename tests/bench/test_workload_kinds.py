"""The workload registry (issue 29 item 3): each workload module declares its kind, API, defaults
row, options, flag-check words and attestation; the plan, the runner and the CLI look it up."""

from __future__ import annotations

import pytest

from capshim.bench import plan as plan_mod
from capshim.bench.request import DEFAULTS, BenchRequest
from capshim.bench.workloads import builtin, command, kinds, llama_bench, ncnn, torch_sdpa
from capshim.errors import UsageError


def test_every_workload_module_declares_its_kind_once():
    mods = (builtin, llama_bench, command, ncnn, torch_sdpa)
    assert [kinds.get(m.KIND.name) for m in mods] == [m.KIND for m in mods]
    assert len({m.KIND.name for m in mods}) == len(mods)
    for m in mods:  # its defaults row is in the one table, for both device classes
        assert (m.KIND.defaults, "gpu") in DEFAULTS and (m.KIND.defaults, "cpu") in DEFAULTS, m.KIND.name
    assert kinds.attested("builtin") and kinds.attested("ncnn") and not kinds.attested("command")
    assert not kinds.attested("no-such-kind")


def test_the_plan_and_the_cli_read_the_registry():
    from capshim.cli.bench import bench_cmd as bench

    chosen = next(p for p in bench.params if p.name == "workload_name")
    assert list(chosen.type.choices) == list(kinds.selectable()) == ["ncnn", "torch-sdpa"]
    assert plan_mod.WORKLOAD_API == {"ncnn": "vulkan", "torch-sdpa": torch_sdpa.API}
    for name, k in kinds.selectable().items():
        assert k.build is not None and k.problem is not None and k.options, name


@pytest.mark.parametrize("req, said", [
    (BenchRequest(network="tiny"), "--network is for --workload ncnn"),
    (BenchRequest(workload="ncnn", shape="1x1x8x8"), "--shape is for --workload torch-sdpa"),
    (BenchRequest(workload="torch-sdpa", block=False, network="tiny"), "--network is for --workload ncnn"),
    (BenchRequest(workload="ncnn", command=("true",)), "--workload ncnn runs its own network"),
    (BenchRequest(workload="torch-sdpa", metric="wall"), "--workload torch-sdpa reports TFLOP/s per call"),
    (BenchRequest(workload="nccn"), "did you mean"),
])
def test_a_kind_specific_flag_is_refused_by_the_registry_s_words(req, said, monkeypatch):
    monkeypatch.setattr(plan_mod, "_arms", lambda req, platform: ([], "a", None, None, None))
    with pytest.raises(UsageError, match=said):
        plan_mod.make_plan(req, platform="linux")
