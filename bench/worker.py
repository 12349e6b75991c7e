"""``python -m bench.worker SUITE NAME OPTIONS_JSON``: one measurement in its own process.

Looks up ``WORKERS[NAME]`` in ``bench.<SUITE>``, calls it with the options, and prints
its result as one JSON line. A :class:`bench.runner.Skipped` or a missing import
becomes ``{"skipped": reason}`` so the parent can report it and go on.
"""

import importlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv):
    suite, name, options = argv[0], argv[1], json.loads(argv[2]) if len(argv) > 2 else {}
    from bench.runner import Skipped

    module = importlib.import_module(f"bench.{suite}")
    try:
        result = module.WORKERS[name](**options)
    except (Skipped, ImportError) as error:
        result = {"skipped": str(error) or type(error).__name__}
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
