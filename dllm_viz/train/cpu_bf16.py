"""Whether this CPU does bfloat16 arithmetic natively, for `train-tiny --precision bf16`.

bf16 autocast halved a training step on a Zen 5 with AVX512-BF16 (1.3-1.5 s against 2.5 s fp32,
session 13) and made it several times slower on an AVX2-only EPYC, where torch emulates it
(12.7 s against 2.2-4.5 s fp32, session 14): the same flag, opposite effects, so the trainer says
so when the CPU lacks the instructions.
"""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# x86 flags of native bf16 arithmetic (AVX512-BF16 dot products, AMX tiles); on other CPUs and
# other systems the answer is unknown.
NATIVE_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def native_bf16(cpuinfo: Path = CPUINFO) -> bool | None:
    """True if the CPU reports a native bf16 flag, False if it reports x86 flags without one,
    None if it cannot be told (no /proc/cpuinfo, or no x86 flags line in it)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), None)
    return None if flags is None else bool(NATIVE_FLAGS & set(flags))


def bf16_warning(cpuinfo: Path = CPUINFO) -> str | None:
    """What to tell someone training in bf16 on this CPU, or None when nothing needs saying."""
    if native_bf16(cpuinfo) is not False:
        return None
    return ("warning: this CPU has no native bf16 (no avx512_bf16 or amx_bf16 flag), so bf16 autocast is "
            "emulated and a step can take several times longer than in fp32; use --precision fp32 here")
