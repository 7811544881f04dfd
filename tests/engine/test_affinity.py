"""split_cores: the child gets the last allowed core, the calling thread the others, and
the caller's mask comes back afterwards."""

import os
import subprocess
import sys
import threading

import pytest

from posttrain.engine.affinity import split_cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                                reason="needs sched_setaffinity and two cores")


def test_child_and_caller_get_disjoint_cores_and_the_mask_is_restored():
    me = threading.get_native_id()
    before = os.sched_getaffinity(me)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with split_cores(child.pid) as engine_cores:
            assert engine_cores == {max(before)}
            assert os.sched_getaffinity(child.pid) == engine_cores
            assert os.sched_getaffinity(me) == before - engine_cores
            started = []
            t = threading.Thread(target=lambda: started.append(os.sched_getaffinity(0)))
            t.start()
            t.join()
            assert started == [before - engine_cores]  # threads started inside inherit the mask
        assert os.sched_getaffinity(me) == before
    finally:
        child.kill()
        child.wait()


def test_a_child_that_is_gone_is_left_to_its_owner():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with split_cores(child.pid) as engine_cores:
        assert engine_cores is None
    assert os.sched_getaffinity(0) == os.sched_getaffinity(threading.get_native_id())
