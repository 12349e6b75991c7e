"""What this machine computes fast in 16 bits, and the dtype policy that follows.

On a CPU, bfloat16 pays only where the CPU multiplies it in hardware: x86's AVX-512 BF16
or AMX tiles, ARM's BF16 extension. Elsewhere TensorFlow emulates it and a bfloat16 model
runs slower than float32, so a bfloat16 request falls back to float32 there, with one
warning line. float16 is a GPU's format (T4 and V100 have no bfloat16): a CPU emulates it,
slowly, so a float16 request on a machine without a GPU runs, with one warning line.

The CPU's flags only choose what a CPU runs: where TensorFlow sees a GPU, the model
computes there, and a 16-bit request is kept as it is.

Example:
    >>> compute_policy("mixed_bfloat16", "test", flags={"avx2", "fma"}, gpus=())
    'float32'
    >>> compute_policy("mixed_bfloat16", "test", flags={"avx512_bf16"}, gpus=())
    'mixed_bfloat16'
    >>> compute_policy("mixed_bfloat16", "test", flags={"avx2"}, gpus=["/physical_device:GPU:0"])
    'mixed_bfloat16'
"""

import functools
import logging
from collections.abc import Collection, Sequence
from typing import Any

#: CPU flags (as /proc/cpuinfo names them) of hardware bfloat16 matrix products.
FAST_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
BFLOAT16_POLICIES = ("bfloat16", "mixed_bfloat16")
FLOAT16_POLICIES = ("float16", "mixed_float16")

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
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


def has_fast_bfloat16(flags: Collection[str] | None = None) -> bool:
    """Whether the CPU multiplies bfloat16 in hardware; True where its flags are unknown
    (a request is then trusted)."""
    flags = cpu_flags() if flags is None else flags
    return flags is None or any(flag in flags for flag in FAST_BFLOAT16_FLAGS)


@functools.lru_cache(maxsize=None)
def visible_gpus() -> tuple[Any, ...]:
    """The GPUs TensorFlow computes on (``tf.config.list_physical_devices("GPU")``), asked
    once per process: every dropout layer's call reads it."""
    import tensorflow as tf

    return tuple(tf.config.list_physical_devices("GPU"))


def compute_policy(policy: str | None, what: str, flags: Collection[str] | None = None,
                   gpus: Sequence[Any] | None = None, warn: bool = True) -> str | None:
    """The policy a 16-bit request runs under here: ``policy``, or ``"float32"`` where it
    asks for bfloat16 on a machine without a GPU whose CPU has no hardware bfloat16 (a
    warning naming ``what``); float16 without a GPU is kept, with a warning that it is slow.

    Args:
        policy: a Keras dtype policy name, or None (returned as it is).
        what: what asked for it, for the warning (``"--mixed-precision"``).
        flags: the CPU flags to judge by (default: this machine's).
        gpus: the GPUs TensorFlow sees (default: :func:`visible_gpus`); with any, the CPU's
            flags are not read.
        warn: False to decide without the warning (a saved run's precision, read again).

    Returns:
        The policy's name, or None where ``policy`` is None.
    """
    if policy not in BFLOAT16_POLICIES + FLOAT16_POLICIES:
        return policy
    if gpus is None:
        gpus = visible_gpus()
    if gpus:
        return policy
    if policy in FLOAT16_POLICIES:
        if warn:
            log.warning("%s: %s on a CPU is emulated and runs slower than float32 (it runs); "
                        "float16 is for GPUs without bfloat16 (T4, V100), and a CPU with "
                        "AVX-512 BF16 or AMX runs bfloat16", what, policy)
        return policy
    if not has_fast_bfloat16(flags):
        if warn:
            log.warning("%s: this CPU has no hardware bfloat16 (AVX-512 BF16, AMX or ARM BF16), "
                        "where %s runs slower than float32; running in float32", what, policy)
        return "float32"
    return policy
