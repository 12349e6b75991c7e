"""Installs packages into this Python's environment: with uv when it can, else with pip.

    python tools/install_env.py [pip install arguments...]

uv (pinned in constraints.txt) installs the same requirements as ``pip install`` several
times faster: it unpacks and compiles the packages in parallel and keeps them unpacked in
its cache (TensorFlow, torch and the rest are 4.4 GB in place). uv does not read pip's
configuration, so the indexes, extra indexes, find-links, constraint files, certificate
and timeout pip is configured with (``pip config list``: its files and ``PIP_*``) are
handed to it, and it chooses among all indexes as pip does (the best match, not the first
index's). The bytecode is compiled, as pip compiles it. When uv cannot be installed or
fails, ``pip install`` runs the same arguments instead.
"""

import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONSTRAINTS = os.path.join(os.path.dirname(HERE), "constraints.txt")

#: pip's configuration key -> uv's option (each value may list several, space-separated).
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
           "find-links": "--find-links", "constraint": "--constraint"}


def pip(*arguments, check=True):
    return subprocess.run([sys.executable, "-m", "pip", *arguments], check=check,
                          capture_output=True, text=True)


def pip_configuration():
    """``{key: value}`` of pip's configuration (``pip config list``; later scopes win)."""
    found = {}
    for line in pip("config", "list", check=False).stdout.splitlines():
        name, _, value = line.partition("=")
        key = name.rpartition(".")[2]
        if value:
            found[key] = value.strip().strip("'\"")
    return found


def uv_command(arguments):
    """The ``uv pip install`` command of ``arguments`` and its environment, or None when uv
    cannot be installed."""
    if pip("install", "--quiet", "--constraint", CONSTRAINTS, "uv", check=False).returncode:
        return None
    configured = pip_configuration()
    command = [sys.executable, "-m", "uv", "pip", "install", "--python", sys.executable,
               "--compile-bytecode", "--index-strategy", "unsafe-best-match"]
    for key, option in OPTIONS.items():
        for value in configured.get(key, "").split():
            command += [option, value]
    environment = dict(os.environ)
    if "cert" in configured:
        environment["SSL_CERT_FILE"] = configured["cert"]
    if "timeout" in configured or "default-timeout" in configured:
        environment["UV_HTTP_TIMEOUT"] = configured.get("timeout",
                                                        configured.get("default-timeout"))
    return command + list(arguments), environment


def main(arguments):
    found = uv_command(arguments)
    if found is not None:
        command, environment = found
        if subprocess.run(command, env=environment).returncode == 0:
            return 0
        print(f"uv could not install {shlex.join(arguments)}; pip installs it", file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "pip", "install", *arguments]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
