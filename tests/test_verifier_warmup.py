"""The reference's torch.compile warmed up in a worker of its own while the search works
(Verifier.warm_compile), so that a whole network's first timed check does not compile on its
critical path; and the claim that keeps it from deadlocking on a lock the check holds."""

import shutil
import threading

import pytest

from drtriton.problem import from_source
from drtriton.verify.verifier import _WarmUp
from verifier_cases import RELU


def test_the_first_to_claim_compiles():
    warm = _WarmUp()
    assert warm.claim() and not warm.claim() and not warm.claim()


def test_a_check_calls_off_a_warm_up_that_has_not_begun(cpu_verifier):
    key = "warmup-called-off"
    warm = cpu_verifier._warmups[key] = _WarmUp()
    cpu_verifier.wait_warm_compile(key)  # returns at once: nothing is compiling
    assert warm.done.is_set() and warm.outcome.startswith("called off")
    assert not warm.claim()  # the warm-up, reaching its claim later, stands down


def test_a_check_waits_for_a_warm_up_that_is_compiling(cpu_verifier):
    key = "warmup-compiling"
    warm = cpu_verifier._warmups[key] = _WarmUp()
    assert warm.claim()  # the warm-up holds its locks and compiles
    waited = threading.Event()
    t = threading.Thread(target=lambda: (cpu_verifier.wait_warm_compile(key), waited.set()))
    t.start()
    assert not waited.wait(0.3)  # still compiling: the check waits
    warm.done.set()
    t.join(5)
    assert waited.is_set()


def test_warm_compile_is_off_the_gpu_a_no_op(cpu_verifier):
    before = dict(cpu_verifier._warmups)
    cpu_verifier.warm_compile(from_source(RELU, name="relu_warm"))
    assert cpu_verifier._warmups == before  # nothing is timed on a CPU


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="torch.compile on the CPU needs a C compiler")
def test_the_warm_up_compiles_in_its_own_worker(cpu_verifier):
    problem = from_source(RELU, name="relu_warm_worker")
    warm = _WarmUp()
    cpu_verifier._warm_compile(problem, warm)  # what warm_compile runs in the background on CUDA
    assert warm.done.is_set()
    assert warm.outcome == "compiled", warm.outcome
    assert not cpu_verifier.pool._spares  # its worker is gone


def test_a_cancelled_check_stops_waiting_for_a_warm_up(cpu_verifier):
    import time

    key = "warmup-cancelled"
    warm = cpu_verifier._warmups[key] = _WarmUp()
    assert warm.claim()  # compiling, and it will not end soon
    cancel = threading.Event()
    cancel.set()
    t0 = time.monotonic()
    cpu_verifier.wait_warm_compile(key, cancel)
    assert time.monotonic() - t0 < 2 and not warm.done.is_set()
