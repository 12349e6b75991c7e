"""Records the peers' answers that the tests replay (``tests/fixtures/peers/``).

Runs every test marked ``peer`` with ``KERASBERT_PEERS=record``: each question to bert4keras
0.11.5 or transformers 4.57 is asked live and its answer written; then removes the
recordings no test asked for. Run it after changing a peer question (a test's script, or
what kerasbert writes for a peer to read) and commit the folder::

    .venv/bin/python tests/record_peers.py            # all peer tests
    .venv/bin/python tests/record_peers.py -k t5      # some, keeping the other recordings
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from peers import RECORDINGS, ROOT  # noqa: E402


def main(argv):
    with tempfile.NamedTemporaryFile(prefix="kerasbert-peers-", suffix=".log") as log:
        env = dict(os.environ, KERASBERT_PEERS="record", KERASBERT_PEERS_LOG=log.name)
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "peer", "-n", "2",
                                "-p", "no:cacheprovider", *argv], cwd=ROOT, env=env)
        used = {line.split()[1] for line in open(log.name) if line.strip()}
    if code == 0 and not argv:
        stale = sorted(set(os.listdir(RECORDINGS)) - used)
        for name in stale:
            os.remove(os.path.join(RECORDINGS, name))
        print(f"{len(used)} recordings written, {len(stale)} no longer asked for removed")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
