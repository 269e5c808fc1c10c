"""A worker that raises, and whose supervisor then kills it with SIGKILL while it is still
shutting down (an exit hook that hangs): the log ends in the shell's `Killed`."""

import atexit
import os
import signal
import threading
import time


def hang():
    time.sleep(30)


def kill_me_soon():
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # the job's own watchdog, run in-process here


atexit.register(hang)
threading.Thread(target=kill_me_soon, daemon=True).start()
shards = {0: "a", 1: "b"}
print("step 1 loss 0.93", flush=True)
print(shards[7])
