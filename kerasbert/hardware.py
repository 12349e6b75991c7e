"""What this CPU computes fast, from the kernel's CPU flags, and the dtype policy that follows.

bfloat16 pays only where the CPU multiplies it in hardware: x86's AVX-512 BF16 or AMX tiles,
ARM's BF16 extension. Elsewhere TensorFlow emulates it and a bfloat16 model runs slower than
float32, so a bfloat16 request falls back to float32 there, with one warning line.

Example:
    >>> compute_policy("mixed_bfloat16", "test", flags={"avx2", "fma"})
    'float32'
    >>> compute_policy("mixed_bfloat16", "test", flags={"avx512_bf16"})
    'mixed_bfloat16'
"""

import functools
import logging

#: CPU flags (as /proc/cpuinfo names them) of hardware bfloat16 matrix products.
FAST_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
BFLOAT16_POLICIES = ("bfloat16", "mixed_bfloat16")

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def cpu_flags(path="/proc/cpuinfo"):
    """The CPU's feature flags, or None where the system does not list them (not Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                # x86 lists "flags", ARM "Features".
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return None


def has_fast_bfloat16(flags=None):
    """Whether the CPU multiplies bfloat16 in hardware; True where its flags are unknown
    (a request is then trusted)."""
    flags = cpu_flags() if flags is None else flags
    return flags is None or any(flag in flags for flag in FAST_BFLOAT16_FLAGS)


def compute_policy(policy, what, flags=None):
    """``policy``, or ``"float32"`` (with a warning naming ``what``) where it asks for
    bfloat16 on a CPU without hardware bfloat16.

    Args:
        policy: a Keras dtype policy name, or None (returned as it is).
        what: what asked for it, for the warning (``"--mixed-precision"``).
        flags: the CPU flags to judge by (default: this machine's).
    """
    if policy in BFLOAT16_POLICIES and not has_fast_bfloat16(flags):
        log.warning("%s: this CPU has no hardware bfloat16 (AVX-512 BF16, AMX or ARM BF16), "
                    "where %s runs slower than float32; running in float32", what, policy)
        return "float32"
    return policy
