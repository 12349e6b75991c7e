"""Runs peer libraries as oracles in their own interpreter.

bert4keras 0.11.5 needs Keras 2 (``tf-keras``) and must never share a process with Keras 3.
"""

import json
import os
import subprocess
import sys
import textwrap


def run_bert4keras(script, timeout=600):
    """Runs ``script`` under bert4keras (tf_keras) and returns the JSON it prints last.

    The script sees ``from bert4keras...`` working and prints one JSON line at its end.
    """
    env = dict(os.environ, TF_KERAS="1", TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode:
        raise RuntimeError(f"bert4keras subprocess failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_python(script, timeout=600, **env_overrides):
    """Runs ``script`` in a fresh interpreter and returns the JSON it prints last."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env_overrides)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            capture_output=True, text=True, timeout=timeout,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if result.returncode:
        raise RuntimeError(f"subprocess failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
