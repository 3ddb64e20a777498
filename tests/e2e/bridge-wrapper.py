"""PI_MEMORY_BRIDGE for the kill test: the real bridge, unless the flag file named by
PI_MEMORY_E2E_BROKEN exists, in which case it fails at start as a missing package would."""

import os
import sys

flag = os.environ.get("PI_MEMORY_E2E_BROKEN", "")
if flag and os.path.exists(flag):
    print("bridge-wrapper: the archive is unavailable (test flag set)", file=sys.stderr)
    sys.exit(3)
os.execv(sys.executable, [sys.executable, "-m", "pi_memory", "bridge"])
