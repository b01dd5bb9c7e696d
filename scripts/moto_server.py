"""moto's S3 server (`moto_server`'s arguments), with conditional writes that hold.

moto 5.2.5's threaded server checks `If-None-Match: *` and stores the object as two steps,
so two concurrent puts of one key can both succeed: 1 key in 200 under six-way contention
on an idle machine. S3 never allows that, and Delta relies on it: a commit is a
put-if-absent of the log's next entry, and two winners at one version lose a commit.
Object writes (single and multipart) run one at a time here; reads stay concurrent.

`BRONZE_MOTO_SWITCH_INTERVAL` (seconds) sets Python's thread switch interval: the
emulator test makes switches frequent with it, which shows the race on plain moto (8 keys
in 100 there).
"""

import os
import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_WRITE = threading.Lock()


def _one_at_a_time(method):
    def run(self, *args, **kwargs):
        with _WRITE:
            return method(self, *args, **kwargs)

    return run


S3Response.put_object = _one_at_a_time(S3Response.put_object)
S3Response._key_response_post = _one_at_a_time(S3Response._key_response_post)

if __name__ == "__main__":
    if interval := os.environ.get("BRONZE_MOTO_SWITCH_INTERVAL"):
        sys.setswitchinterval(float(interval))
    sys.exit(main())
