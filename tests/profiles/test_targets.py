"""Device targets (issue 32): the one spelling PROFILE@TARGET[,TARGET...] and its checks against the
devices an API lists (capshim.profiles.targets, roles.place_targeted), without any device."""

from __future__ import annotations

import pytest

from capshim import profiles
from capshim.profiles import roles, targets
from capshim.profiles.targets import Device, Placement, TargetError

U0 = "ca950000000040008000000000000000"
U1 = "ca950000000040008000000000000001"
TWO = [Device(0, U0, "NVIDIA H200"), Device(1, U1, "NVIDIA H200 (stand-in 1)")]


@pytest.mark.parametrize("ref, base, specs", [
    ("t4-class", "t4-class", []),
    ("t4-class@1", "t4-class", ["1"]),
    ("t4-class@0,1", "t4-class", ["0", "1"]),
    (f"t4-class@GPU-{targets.uuid_text(U1)}", "t4-class", [f"uuid:{U1}"]),
    (f"t4-class@{U1.upper()}", "t4-class", [f"uuid:{U1}"]),
    (f"t4-class@{targets.uuid_text(U1)}", "t4-class", [f"uuid:{U1}"]),
    ("dir@x/p.toml@1", "dir@x/p.toml", ["1"]),  # the last '@' splits
])
def test_split_reads_the_spelling(ref, base, specs):
    got, ts = targets.split(ref, "--profile")
    assert got == base and [t.spec for t in ts] == specs


@pytest.mark.parametrize("ref, words", [
    ("t4-class@", "an empty device"),
    ("t4-class@0,", "an empty device"),
    ("@1", "no profile before '@'"),
    ("t4-class@01", "'01' is not a device index"),
    ("t4-class@64", "'64' is not a device index"),
    ("t4-class@-1", "'-1' is not a device index"),
    ("t4-class@GPU-12", "'GPU-12' is not a device index"),
    ("t4-class@1,1", "device '1' given twice"),
    ("t4-class@0,1,2,3,4,5,6,7,8", "more than 8 devices"),
])
def test_split_refuses_bad_spellings_naming_the_flag(ref, words):
    with pytest.raises(TargetError) as exc:
        targets.split(ref, "--profile")
    assert str(exc.value).startswith(f"--profile {ref}: ") and words in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_profile_file_whose_name_holds_an_at_is_a_file(tmp_path):
    f = tmp_path / "mine@1"
    f.write_text("x")
    assert targets.split(str(f), "--profile") == (str(f), ())


def _placed(*refs, role="profile"):
    return [Placement(role, f"--{role}", *targets.split(r, f"--{role}")[:1], r, targets.split(r, f"--{role}")[1])
            for r in refs]


def test_resolve_places_each_reference_on_its_devices_and_writes_uuid_specs():
    a, b = targets.resolve(_placed("t4-class@0", f"a100-class@GPU-{targets.uuid_text(U1)}"), TWO, "CUDA")
    assert [d.index for d in a.devices] == [0] and [d.index for d in b.devices] == [1]
    assert a.specs == [f"uuid:{U0}"] and b.specs == [f"uuid:{U1}"]  # the UUID names it in any order
    assert targets.on_device([a, b], 1)["profile"] is b and targets.on_device([a, b], 1)["simulate"] is None


@pytest.mark.parametrize("refs, devices, words", [
    (["t4-class@2"], TWO, "no CUDA device 2: this machine has 2 CUDA devices (0: NVIDIA H200"),
    ([f"t4-class@{'f' * 32}"], TWO, f"no CUDA device {'f' * 32}"),
    (["t4-class@1"], TWO[:1], "t4-class@1: this machine has 1 CUDA device (0: NVIDIA H200"),
    (["t4-class@0", "a100-class@0"], TWO, "is already given --profile t4-class@0"),
    (["t4-class@1", f"a100-class@{U1}"], TWO, "is already given --profile t4-class@1"),  # index and UUID: one device
    ([f"t4-class@1,{U1}"], TWO, "device 1 named twice"),
    (["t4-class", "a100-class@1"], TWO, "targets every device, and --profile a100-class@1 is given too"),
    ([f"t4-class@{U0}"], [Device(0, U0, "llvmpipe"), Device(1, U0, "llvmpipe")], "is shared by CUDA devices 0, 1"),
])
def test_resolve_refuses_in_one_line_naming_flag_and_value(refs, devices, words):
    with pytest.raises(TargetError) as exc:
        targets.resolve(_placed(*refs), devices, "CUDA")
    msg = str(exc.value)
    assert msg.startswith("--profile ") and words in msg and "\n" not in msg, msg


def test_a_shared_uuid_is_never_a_spec_the_index_is():
    devices = [Device(0, U0, "llvmpipe"), Device(1, U0, "llvmpipe")]
    (p,) = targets.resolve(_placed("vulkan-paravirt@1", role="simulate"), devices, "Vulkan")
    assert p.specs == ["1"]


def test_roles_are_checked_apart_one_device_may_take_both_roles():
    placed = _placed("vulkan-paravirt@1", role="simulate") + _placed("vulkan-paravirt@1")
    targets.resolve(placed, TWO, "Vulkan")
    assert targets.on_device(placed, 1) == {"simulate": placed[0], "profile": placed[1]}


def test_place_targeted_loads_each_profile_and_asks_the_devices_once():
    asked = []

    def devices_of(api):
        asked.append(api)
        return TWO

    firsts, placed = roles.place_targeted({"profile": ["t4-class@1"], "simulate": []},
                                          {"profile": "--profile", "simulate": "--simulate"}, profiles.load,
                                          devices_of)
    assert asked == ["cuda"] and firsts["profile"].name == "t4-class" and firsts["simulate"] is None
    assert placed[0].profile.name == "t4-class" and placed[0].devices == [TWO[1]]


def test_place_targeted_refuses_a_bad_profile_and_mixed_apis_before_listing_devices():
    never = lambda api: pytest.fail("listed the devices")  # noqa: E731
    spell = {"profile": "--profile", "simulate": "--simulate"}
    with pytest.raises(roles.RoleError, match=r"^--profile nosuch@1: "):
        roles.place_targeted({"profile": ["nosuch@1"]}, spell, profiles.load, never)
    with pytest.raises(roles.RoleError, match="are for different APIs"):
        roles.place_targeted({"profile": ["t4-class@0", "vulkan-paravirt@1"]}, spell, profiles.load, never)


def test_is_targeted():
    assert not roles.is_targeted({"profile": ["t4-class"], "simulate": []})
    assert roles.is_targeted({"profile": ["t4-class@1"], "simulate": []})
    assert roles.is_targeted({"profile": ["a@0", "b"], "simulate": []})


def test_targets_event_names_each_device_with_its_references():
    placed = targets.resolve(_placed("t4-class@1"), TWO, "CUDA")
    ev = targets.targets_event("cuda", placed, 7)
    assert ev["event"] == "targets" and ev["devices"] == [
        {"index": 1, "uuid": targets.uuid_text(U1), "name": "NVIDIA H200 (stand-in 1)", "profile": "t4-class@1",
         "simulate": None}]


def test_a_bench_arm_carries_the_same_spelling(monkeypatch):
    from capshim import backends
    from capshim.bench import arms

    monkeypatch.setattr(type(backends.get("cuda")), "devices", lambda self: TWO)
    a = arms.parse("mixed=profile:t4-class@0,profile:a100-class@1")
    assert [(p.text, [d.index for d in p.devices]) for p in a.placements] == [("t4-class@0", [0]), ("a100-class@1", [1])]
    assert a.profile.name == "t4-class" and a.simulate is None
    assert [t["ref"] for t in a.spec()["targets"]] == ["profile:t4-class@0", "profile:a100-class@1"]
    both = arms.parse("both=profile:t4-class@0,1")  # a device list is one item
    assert [d.index for d in both.placements[0].devices] == [0, 1]
    assert arms.parse("plain=profile:t4-class").placements is None
    with pytest.raises(Exception, match=r"^--arm x=profile:t4-class@2: no CUDA device 2"):
        arms.parse("x=profile:t4-class@2")
    with pytest.raises(Exception, match=r"^--arm x=profile:a100-class@.*is already given --arm x=profile:t4-class@1"):
        arms.parse(f"x=profile:t4-class@1,profile:a100-class@{U1}")


@pytest.mark.parametrize("tail", ["01", "", "64", "x", "GPU-ca95", "0,0"])
def test_a_bench_arm_spelling_error_starts_with_the_arm_and_reference(tail):
    from capshim.bench import arms
    from capshim.errors import EXIT_USAGE, UsageError

    option = f"b=simulate:vulkan-paravirt@{tail}"
    with pytest.raises(UsageError) as exc:
        arms.parse(option)  # refused before any device is listed
    assert str(exc.value).startswith(f"--arm {option}: ") and "\n" not in str(exc.value), str(exc.value)
    assert exc.value.exit_code == EXIT_USAGE


def test_one_device_takes_a_target_on_it_and_refuses_another_by_name():
    (p,) = targets.resolve(_placed("t4-class@0"), TWO[:1], "CUDA")
    assert p.devices == [TWO[0]] and p.specs == [f"uuid:{U0}"]
    (p,) = targets.resolve(_placed(f"t4-class@GPU-{targets.uuid_text(U0)}"), TWO[:1], "CUDA")
    assert p.devices == [TWO[0]]
    with pytest.raises(TargetError) as exc:
        targets.resolve(_placed("t4-class@1"), TWO[:1], "CUDA")
    assert str(exc.value).startswith("--profile t4-class@1: this machine has 1 CUDA device (0: NVIDIA H200 (")
    assert "drop '@1'" in str(exc.value) and "\n" not in str(exc.value)


def test_an_api_with_one_device_by_nature_refuses_every_target():
    spell = {"profile": "--profile", "simulate": "--simulate"}
    with pytest.raises(TargetError, match=r"^--profile metal-apple9@0: Metal has one device per process: .*drop '@0'"):
        roles.place_targeted({"profile": ["metal-apple9@0"]}, spell, profiles.load, lambda api: None)


def test_devices_that_cannot_be_listed_refuse_the_target_with_exit_2():
    from capshim.errors import EXIT_USAGE, CapshimError

    def no_driver(api):
        raise CapshimError("CUDA probe: no CUDA driver", exit_code=1)

    spell = {"profile": "--profile", "simulate": "--simulate"}
    with pytest.raises(TargetError) as exc:
        roles.place_targeted({"profile": ["t4-class@1"]}, spell, profiles.load, no_driver)
    msg = str(exc.value)
    assert msg.startswith("--profile t4-class@1: CUDA probe: no CUDA driver; drop '@1', or run where the CUDA")
    assert exc.value.exit_code == EXIT_USAGE


def test_the_cli_keeps_the_flag_in_spelling_errors():
    from click.testing import CliRunner

    from capshim.cli import main
    for tail in ("01", "", "64", "x", "GPU-ca95", "0,0"):
        r = CliRunner().invoke(main, ["run", "--profile", f"t4-class@{tail}", "--", "true"])
        assert r.exit_code == 2, r.output
        assert f"capshim: --profile t4-class@{tail}: " in r.output, r.output


def test_a_study_refuses_a_device_target_in_one_line():
    from capshim.errors import UsageError
    from capshim.studies import ablate, common

    for call in (lambda: ablate.load_lowering("t4-class@1"), lambda: common.load_profile("t4-class@1", "x")):
        with pytest.raises(UsageError, match=r"^--profile t4-class@1: a study measures one profile on the device"):
            call()


@pytest.mark.parametrize("ref, arm", [("vulkan-paravirt@1", "simulate:vulkan-paravirt@1"),
                                      ("t4-class@1", "profile:t4-class@1")])
def test_a_study_refusal_suggests_the_role_the_profile_takes(ref, arm):
    from capshim.errors import UsageError
    from capshim.studies import common

    with pytest.raises(UsageError, match=f"capshim bench --arm NAME={arm};"):
        common.refuse_targets(ref)


def test_a_uuid_has_all_four_dashes_or_none_and_gpu_in_any_case():
    """A hostile review: ``@gpu-...`` was refused while ``@GPU-`` passed, and dashes in the wrong places
    (``ca950000-00004000-...``) were accepted as a UUID."""
    from capshim.profiles.targets import normal_uuid

    want = "ca950000000040008000000000000001"
    for text in ("GPU-ca950000-0000-4000-8000-000000000001", "gpu-CA950000-0000-4000-8000-000000000001",
                 "ca950000-0000-4000-8000-000000000001", want):
        assert normal_uuid(text) == want, text
    for text in ("ca950000-00004000-8000000000000001", "GPU-" + want[:-1], "GPU--" + want):
        assert normal_uuid(text) is None, text


def test_a_file_named_like_a_target_spelling_is_refused_as_ambiguous(tmp_path, monkeypatch):
    """A hostile review: a file ``t4-class@1`` in the folder silently replaced the spelling (another
    profile, every device). A bare name that is both is refused; ``./t4-class@1`` is the file."""
    from capshim.profiles.targets import TargetError, split

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t4-class@1").write_text("x")
    with pytest.raises(TargetError, match=r"--profile t4-class@1: both a file.*write \./t4-class@1"):
        split("t4-class@1", "--profile")
    assert split("./t4-class@1", "--profile") == ("./t4-class@1", ())
    (tmp_path / "my@home.toml").write_text("x")  # '@' but no target after it: the file
    assert split("my@home.toml", "--profile") == ("my@home.toml", ())
