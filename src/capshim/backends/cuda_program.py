"""What the CUDA backend says about the program of a ``capshim run``, from its file (issue 27, item 3).

Before the run (:func:`program_notes`): why the shim cannot load into it, a statically linked
CUDA runtime, what the program's own CUDA code was built for. After an inert run
(:func:`unreachable`, :func:`no_call`, used by :func:`capshim.backends.cuda.classify`): the cause,
named as the Vulkan and Metal backends name theirs (the loader setting, SIP, the hardened
runtime). The facts come from :mod:`capshim.program` and :mod:`capshim.cuda_binary`, read in
bounded bytes and time; a file that cannot be read gets the general words.
"""

from __future__ import annotations

import platform

from capshim import cuda_binary, program
from capshim.errors import CapshimError
from capshim.profiles import Profile

__all__ = ["program_notes", "unreachable", "no_call", "who", "loaded_into_program"]


#: What the shim's entry points answer (named when a program linking the runtime reached none).
_QUERIES = "cudaGetDeviceProperties, cudaDeviceGetAttribute, cuDeviceGetAttribute and the driver's name queries"


def who(prog: program.Program) -> str:
    """How a reason names the file the dynamic linker loads: the program, or a script's interpreter."""
    image = prog.image()
    if image is prog:
        return prog.label()
    return f"{prog.label()} (a script run by {program.show(image.path or image.given)})"


def unreachable(prog: program.Program) -> str | None:
    """Why the dynamic linker will not load the shim into ``prog`` (its image: a script's interpreter),
    or None when nothing in the file stops it. One clause, naming the file and the cause:
    secure-execution mode (ld.so(8): ``LD_PRELOAD`` entries with a slash are ignored), a statically
    linked program (no ``PT_INTERP``: no dynamic linker runs), or an ELF class or machine other than
    the shim's (the dynamic linker skips a preloaded library of another class)."""
    image = prog.image()
    subject = who(prog)
    if image.secure:
        return (f"{subject} is {image.secure}: the kernel starts it in secure-execution mode, where the dynamic "
                "linker ignores LD_PRELOAD entries that contain a slash (ld.so(8)); run a copy without that bit")
    elf = image.elf
    if elf is None or elf.refusal:
        return None
    if elf.interpreter is None:
        return (f"{subject} is statically linked (no program interpreter, PT_INTERP): no dynamic linker runs for it, "
                "so LD_PRELOAD is never read")
    host = platform.machine()
    if elf.bits != 64 or (host in ("x86_64", "aarch64") and elf.machine != host):
        return (f"{subject} is a {elf.bits}-bit {elf.machine} program; the shim is a 64-bit {host} library, which "
                "the dynamic linker skips for it (wrong ELF class or machine)")
    return None


def no_call(prog: program.Program) -> str:
    """Why a program the shim loaded into reached none of its entry points, as far as the file tells:
    a statically linked CUDA runtime, no CUDA library linked (one loaded later made no call either),
    or a linked runtime that made none of the queries the shim answers."""
    image = prog.image()
    subject = who(prog)
    if image.kind != "elf" or image.path is None:
        return ("the program made no CUDA call, or its runtime is statically linked, which LD_PRELOAD cannot "
                "reach")
    if cuda_binary.static_runtime(image.path):
        return (f"{subject} has its CUDA runtime statically linked (nvcc's default, -cudart static), which LD_PRELOAD "
                "cannot reach; build it with -cudart shared")
    libs = [n for n in image.elf.needed if n.startswith(("libcudart.so", "libcuda.so"))]
    if not libs and image is not prog:
        return (f"{subject}: the interpreter links no CUDA library (no libcudart or libcuda among its DT_NEEDED), and "
                "nothing it loaded or ran made a CUDA call through the shim")
    if not libs:
        return (f"{subject} links no CUDA library (no libcudart or libcuda among its DT_NEEDED), and no library it "
                "loaded later made a CUDA call through the shim")
    return f"{subject} links {', '.join(program.show(n) for n in libs)} but made none of the queries the shim " \
           f"answers ({_QUERIES})"


def loaded_into_program(events: list[dict], wrapped: bool) -> bool:
    """Whether the program itself loaded the shim: under the launcher's pid wrapper the wrapper's
    ``/bin/sh`` loads it first in the same pid, so the program's own ``loaded`` event is the second."""
    skipped = {e.get("pid") for e in events if e.get("event") == "skipped"}
    loaded = [e.get("pid") for e in events if e.get("event") == "loaded" and e.get("pid") not in skipped]
    if not loaded:
        return False
    return not wrapped or loaded.count(loaded[0]) > 1



def program_notes(profile: Profile | None, argv: list[str], stock=None) -> list[str]:
    """What ``capshim run`` says about the program before it starts (issue 22, "honest limits";
    issue 27, "any program, clear words").

    (Why the shim cannot load into it at all, :func:`unreachable`, is said once by
    :func:`capshim.backends.cuda.nvml_notes`, with what that means for NVML too.)

    - A statically linked CUDA runtime (:func:`capshim.cuda_binary.static_runtime`, nvcc's
      default): ``LD_PRELOAD`` cannot reach its calls, so a run of it stays inert (never a result).
    - The CUDA code the program itself embeds (:func:`capshim.cuda_binary.embedded_architectures`):
      what was lowered and what the code was built for (:func:`capshim.cuda_binary.status_line`);
      a lower answer changes what the program chooses, the kernels still run as built.

    A script is read through to its interpreter (what the dynamic linker loads). Every read is
    bounded (:mod:`capshim.program`); a file that cannot be read gets no sentence.

    Args:
        profile: the ``--profile``; argv: the command; stock: a callable returning the device's
            stock answers (:meth:`capshim.backends.cuda.CudaBackend.stock_answers`), asked only when the program embeds
            CUDA code; its failure (no device) leaves the stock capability out of the sentence.

    Returns:
        Sentences, each naming the program; none for a program without CUDA code of its own (a
        Python interpreter: the libraries it loads later are not read here).
    """
    if not argv:
        return []
    prog = program.inspect(argv[0])
    image = prog.image()
    if image.path is None or image.kind in ("missing", "folder", "special"):
        return []
    name = program.show(argv[0])
    out = []
    if cuda_binary.static_runtime(image.path):
        out.append(f"{who(prog)} links the CUDA runtime statically (nvcc's default, -cudart static): LD_PRELOAD "
                   "cannot reach its calls, so the shim stays inert for it and a run of it is no shim result; "
                   "build it with -cudart shared")
    targets = cuda_binary.embedded_architectures(image.path)
    if not targets or not (targets.sass or targets.ptx):
        return out
    lowered = profile.capabilities.get("computeCapability") if profile is not None else None
    have = None
    if stock is not None:
        try:
            have = (stock().get("capabilities") or {}).get("computeCapability")
        except CapshimError:
            have = None
    if isinstance(have, int):
        out.append(f"{name}: {cuda_binary.status_line(have, lowered, targets)}")
    else:
        answer = f"answers compute capability {lowered // 10}.{lowered % 10}; " if isinstance(lowered, int) else ""
        out.append(f"{name}: {answer}code built for {targets.text()}")
    return out
