"""The light engine's threads: its large passes split across the process's cores give the bits
of one thread, at every precision; how many threads follows LightEngine(threads=...), else
OMP_NUM_THREADS, else the cores; a pool made before a fork works in the child."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import warnings
from typing import Any

import numpy as np
import pytest

from deepsharp.core import SGD, Adam, Conv2D, CrossEntropy, Dense, Flatten, Network, Relu, Trainer
from deepsharp.engines.light import LightEngine, _erf
from deepsharp.engines.light._threads import PARALLEL, pool, thread_count


def conv_steps(
    precision: str, threads: int, optimizer: Any
) -> tuple[list[float], dict[str, bytes]]:
    """Three convolution steps over 64 images (346,112 values a ReLU: split into parts)."""
    rng = np.random.default_rng(0)
    images = rng.random((64, 1, 28, 28)).astype(np.float32)
    classes = rng.integers(0, 10, 64)
    network = Network([Conv2D(8, 3), Relu(), Flatten(), Dense(10)], inputs=(1, 28, 28))
    engine = LightEngine(precision, threads=threads)
    with Trainer(network, CrossEntropy(), optimizer, engine=engine, seed=0) as trainer:
        losses = [trainer.step(images, classes) for _ in range(3)]
    return losses, {name: value.tobytes() for name, value in network.slots.items()}


@pytest.mark.parametrize("precision", ["strict", "float32", "mixed_bfloat16"])
def test_a_step_split_across_threads_gives_the_bits_of_one_thread(precision: str) -> None:
    assert 64 * 8 * 26 * 26 >= 2 * PARALLEL  # the step's large passes are split
    for optimizer in (lambda: Adam(0.01), lambda: SGD(0.1, momentum=0.9)):
        alone = conv_steps(precision, 1, optimizer())
        for threads in (2, 3):
            assert conv_steps(precision, threads, optimizer()) == alone, (precision, threads)


def test_the_value_by_value_passes_split_give_the_bits_of_one_pass() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(3 * PARALLEL + 7).astype(np.float32).reshape(-1, 1)
    grad = rng.standard_normal(x.shape).astype(np.float32)
    one, three = LightEngine(threads=1), LightEngine(threads=3)
    assert one.relu(x).tobytes() == three.relu(x).tobytes()
    assert one.relu_back(x, grad).tobytes() == three.relu_back(x, grad).tobytes()
    assert len(pool(3).spans(x.size)) == 3 and len(pool(3).spans(PARALLEL)) == 1


@pytest.mark.parametrize("precision", ["strict", "float32"])
def test_erf_split_across_threads_and_blocks_gives_the_bits_of_one_whole_pass(
    precision: str,
) -> None:
    """erf (GELU's costly pass) is worked in cache-sized blocks and, on a large array, across
    the threads: each value's bits are those of the formula over the whole array at once, the
    float64 result rounded once to the engine's type, whatever the intervals' mix in a block."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(3 * PARALLEL + 7) * 2).astype(np.float32)
    x[:: 1 << 12] = 5.0  # beyond 4: gathered apart
    x[: 1 << 15] = np.clip(x[: 1 << 15], -0.4, 0.4)  # a block of small values only
    x[-3:] = (np.nan, np.inf, -0.0)
    one, three = LightEngine(precision, threads=1), LightEngine(precision, threads=3)
    whole = _whole_erf(x.astype(np.float64)).astype(one.dtype)
    assert one.erf(x).tobytes() == whole.tobytes()
    assert three.erf(x).tobytes() == whole.tobytes()
    strided = x[::3]  # not C-ordered: one thread, its values copied
    assert three.erf(strided).tobytes() == whole[::3].tobytes()


def _whole_erf(x: Any) -> Any:
    """Cody's formulas (the module's helpers) over the whole array at once, each value's
    interval chosen by np.where: what the blocks must give."""
    y = np.abs(x)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        middle = (0.5 - _erf._erfc_middle(np.minimum(y, 4.0))) + 0.5
        large = (0.5 - _erf._erfc_large(np.clip(y, 4.0, 6.0))) + 0.5
        near = x * _erf._ratio(x * x, _erf.SMALL)
    tail = np.copysign(np.where(y > 4.0, np.where(y < 6.0, large, 1.0), middle), x)
    return np.where(y <= 0.46875, near, tail)


def test_the_thread_count_follows_the_engine_then_omp_num_threads_then_the_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert thread_count() == 3 and LightEngine().threads == 3
    assert LightEngine(threads=1).threads == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "4,2")  # OpenMP's list: the outer level counts
    assert thread_count() == 4
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert thread_count() >= 1
    with pytest.raises(ValueError, match="threads is a whole number from 1"):
        LightEngine(threads=0)


def test_an_omp_num_threads_that_is_no_number_is_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failed before: OMP_NUM_THREADS=abc (or 0) was passed over without a word, the engine
    taking every core where one thread was meant (libgomp itself warns of it)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "four")
    with pytest.warns(RuntimeWarning, match=r"OMP_NUM_THREADS='four' is not a number of threads"):
        assert LightEngine().threads >= 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LightEngine()  # said once a value
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    with pytest.warns(RuntimeWarning, match=r"OMP_NUM_THREADS='0'"):
        thread_count()


def _relu_in_child(queue: Any) -> None:
    x = np.arange(4 * PARALLEL, dtype=np.float32) - PARALLEL
    queue.put(float(LightEngine(threads=2).relu(x).sum(dtype=np.float64)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork here")
def test_a_pool_made_before_a_fork_works_in_the_child() -> None:
    LightEngine(threads=2).relu(np.ones(4 * PARALLEL, np.float32))  # the workers exist here
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_relu_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0, "the child hung or failed on the pool its parent made"
    assert queue.get(timeout=5) == float(np.arange(3 * PARALLEL, dtype=np.float64).sum())


@pytest.mark.parametrize("spec", ["light", "light:float32", "onnx"])
def test_an_engine_pickles_and_copies_as_its_settings(spec: str) -> None:
    """Failed before (trial AF): a light engine (its thread pool's lock) and the onnx engine
    (onnxruntime's module) raised 'cannot pickle' on pickle and deepcopy, so an estimator or
    FitOptions holding one could not be cloned (cross_val_score, GridSearchCV) nor saved."""
    if spec == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnx")
    from deepsharp.core import make_engine

    engine = make_engine(spec)
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    engine.relu(x)
    for made in (pickle.loads(pickle.dumps(engine)), copy.deepcopy(engine)):
        assert made.identity == engine.identity
        assert np.array_equal(made.get(made.relu(made.put(x))), engine.get(engine.relu(x)))


def test_a_trainer_is_refused_a_pickle_or_a_copy_saying_what_to_keep() -> None:
    """Before (trial AF): the thread pool's 'cannot pickle _thread.lock object'."""
    trainer = Trainer(Network([Dense(2)], inputs=2), CrossEntropy(), Adam())
    for copied in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(TypeError, match=r"a Trainer is not pickled or copied: .*Network\.save"):
            copied(trainer)


def test_blocks_of_images_go_a_run_a_thread_their_results_in_order() -> None:
    """A convolution's blocks of images are shared as runs of consecutive blocks, one a thread:
    the pool took one item a thread at once, and handed 28 of 29 blocks to its one worker while
    the calling thread waited (two threads were slower than one)."""
    import threading

    totals = LightEngine("float32", threads=2).totals
    caller, seen = threading.get_ident(), []

    def work(item: int) -> int:
        seen.append((item, threading.get_ident() == caller))
        return item * item

    assert totals._runs(work, list(range(29))) == [i * i for i in range(29)]
    here = sorted(item for item, on_caller in seen if on_caller)
    assert here == list(range(15))  # the first run, here; the second on the worker


@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16"])
def test_a_large_product_is_worked_in_pieces_its_shape_sets(
    precision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A product of twice 16.8 M multiply-adds or more is worked in pieces its shape alone sets,
    NumPy's BLAS held to one thread meanwhile: its bits are the same at any count of threads,
    and within float32's bound of the float64 product."""
    from deepsharp.engines.light import _totals

    rng = np.random.default_rng(3)
    tall = rng.standard_normal((300, 12000)).astype(np.float32)  # 36 M multiply-adds a product
    grads = rng.standard_normal((300, 10)).astype(np.float32)
    weights = rng.standard_normal((12000, 10)).astype(np.float32)
    assert 300 * 12000 * 10 >= 2 * _totals.PRODUCT  # two pieces of PRODUCT at least
    held = []
    real = _totals.one_blas_thread
    monkeypatch.setattr(_totals, "one_blas_thread", lambda: held.append(1) or real())
    one = LightEngine(precision, threads=1)
    cases = [
        (tall, weights, False, False),
        (tall, grads, True, False),
        (grads, weights, False, True),
    ]
    for a, b, ta, tb in cases:
        alone = one.matmul(a, b, ta, tb)
        for threads in (2, 3):
            assert LightEngine(precision, threads=threads).matmul(a, b, ta, tb).tobytes() == (
                alone.tobytes()
            ), (a.shape, b.shape, ta, tb, threads)
        if precision == "float32":
            exact = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
            inner = a.shape[0] if ta else a.shape[1]
            magnitude = np.abs(a.T if ta else a).astype(np.float64) @ np.abs(b.T if tb else b)
            assert (np.abs(alone - exact) <= inner * 2.0**-24 * magnitude * 1.01).all()
    assert len(held) == 3 * len(cases)


def test_blas_is_held_to_one_thread_until_the_last_hold_ends() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from deepsharp.engines.light._threads import one_blas_thread

    def counts() -> list[int]:
        return [
            info["num_threads"]
            for info in threadpoolctl.threadpool_info()
            if info["user_api"] == "blas"
        ]

    before = counts()
    with one_blas_thread():
        assert set(counts()) <= {1}
        with one_blas_thread():
            assert set(counts()) <= {1}
        assert set(counts()) <= {1}  # the outer hold still holds
    assert counts() == before


def test_a_mixed_precisions_overflow_on_a_worker_thread_is_not_warned() -> None:
    """A mixed precision lets a product overflow (the loss scale looks for it): NumPy's error
    settings are each thread's own, and the pool's workers warned 'invalid value encountered in
    matmul' for the blocks they took."""
    engine = LightEngine("mixed_float16", threads=2)
    images = np.full((64, 1, 28, 28), 1e6, np.float32)  # infinity in float16
    filters = np.zeros((8, 1, 3, 3), np.float32)  # infinity times 0: NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = engine.conv2d(images, filters, 1, ((0, 0), (0, 0)))
    assert np.isnan(out).all()


def test_a_product_blas_would_share_has_one_threads_bits_whatever_blas_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A product large enough for OpenBLAS to share among its threads, too small or too narrow
    to split, runs whole with BLAS held to one thread: OpenBLAS 0.3.31 adds 64 x 5,000 by
    5,000 x 10 in another order on two threads, and the engine's bits followed BLAS's count
    (OMP_NUM_THREADS, or another thread's engine holding BLAS meanwhile)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from deepsharp.engines.light import _totals

    held: list[int] = []
    real = _totals.one_blas_thread
    monkeypatch.setattr(_totals, "one_blas_thread", lambda: held.append(1) or real())
    rng = np.random.default_rng(4)
    cases = [
        (rng.standard_normal((64, 5000), np.float32), rng.standard_normal((5000, 10), np.float32)),
        (
            rng.standard_normal((100, 3000), np.float32),
            rng.standard_normal((3000, 120), np.float32),
        ),
    ]
    for a, b in cases:
        work = a.size * b.shape[1]  # large enough to share, too small or narrow to split
        assert work >= _totals.SHARED
        assert work < 2 * _totals.PRODUCT or max(a.shape[0], b.shape[1]) < 2 * _totals.PIECE
        with threadpoolctl.threadpool_limits(1, user_api="blas"):
            alone = np.matmul(a, b).tobytes()
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            for threads in (1, 2):
                assert LightEngine("float32", threads).matmul(a, b).tobytes() == alone
    assert len(held) == 2 * len(cases)
    small = rng.standard_normal((32, 14), np.float32), rng.standard_normal((14, 16), np.float32)
    LightEngine("float32", 2).matmul(*small)  # OpenBLAS keeps it on one thread: no hold
    assert len(held) == 2 * len(cases)


def test_a_fork_while_blas_is_held_gives_the_child_blas_its_count_back() -> None:
    """The thread that held BLAS is not in the child to let go."""
    import threading

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from deepsharp.engines.light import _threads

    def counts() -> list[int]:
        return [
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        ]

    context = multiprocessing.get_context("fork")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        before = counts()
        holding, done = threading.Event(), threading.Event()

        def hold() -> None:
            with _threads.one_blas_thread():
                holding.set()
                done.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        holding.wait(30)
        try:
            reader, writer = context.Pipe(duplex=False)
            child = context.Process(target=_send_blas_counts, args=(writer,))
            child.start()
            got = reader.recv()
            child.join(30)
        finally:
            done.set()
            holder.join()
        assert got == (before, 0) and counts() == before


def _send_blas_counts(writer: Any) -> None:
    from threadpoolctl import threadpool_info

    from deepsharp.engines.light import _threads

    counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    writer.send((counts, _threads._BLAS._held))


@pytest.mark.parametrize("failing", [0, 1])
def test_a_failed_part_waits_for_the_other_parts(failing: int) -> None:
    """The caller hears of a failure, the caller's part's (0) or a worker's (1), only once no
    part is still at work (those not started are cancelled): else a hold on BLAS ended, and the
    output was still written to, after the exception."""
    import time

    done: list[int] = []

    def part(item: int) -> None:
        if item == failing:
            raise MemoryError(f"part {item}")
        time.sleep(0.2)
        done.append(item)

    with pytest.raises(MemoryError, match=f"part {failing}"):
        pool(3).map(part, [0, 1, 2])
    heard = list(done)
    time.sleep(0.5)
    assert done == heard  # no part ran on (one not started is cancelled)
    assert set(heard) <= {0, 1, 2} - {failing}


def test_an_install_without_threadpoolctl_is_told_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from deepsharp.engines.light import _threads

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import fails
    lost = _threads._Blas()
    with pytest.warns(RuntimeWarning, match="threadpoolctl is not installed"):
        lost.hold()
    lost.release()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lost.hold()
        lost.release()


def test_a_strict_products_blocks_go_a_run_a_thread_with_the_bits_of_one() -> None:
    rng = np.random.default_rng(5)
    tall = rng.standard_normal((256, 21632), np.float32)
    grads = rng.standard_normal((256, 10), np.float32)
    weights = rng.standard_normal((21632, 10), np.float32)
    one, two = LightEngine(threads=1), LightEngine(threads=2)
    for a, b, ta, tb in ((grads, weights, False, True), (tall, weights, False, False)):
        got = two.matmul(a, b, ta, tb)
        assert got.tobytes() == one.matmul(a, b, ta, tb).tobytes()
        exact = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
        assert np.array_equal(got, exact.astype(np.float32))  # one float64 total, rounded once


def test_a_hold_taken_in_another_thread_than_the_first_holds() -> None:
    """threadpoolctl (3.7 and later) lets only the first thread that set OpenBLAS's count set
    it while that thread lives: a hold taken in another thread (the light engine in a server's
    worker thread) set nothing, and its product ran on BLAS's threads, with their bits."""
    import threading

    threadpoolctl = pytest.importorskip("threadpoolctl")

    def counts() -> list[int]:
        return [
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        ]

    from deepsharp.engines.light import _threads

    seen: list[list[int]] = []

    def hold() -> None:
        with _threads.one_blas_thread():
            seen.append(counts())

    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # this thread sets it first
        before = counts()
        worker = threading.Thread(target=hold)
        worker.start()
        worker.join()
        assert seen == [[1] * len(before)] and counts() == before


def test_a_strict_long_dot_product_has_one_threads_bits() -> None:
    """OpenBLAS 0.3.31 shares a float64 dot product of over 10,000 terms among its threads and
    adds the parts in another order: a Dense(1)'s weight gradient over one feature and a large
    batch (50,000 x 1 by 50,000 x 1, under 2^18 multiply-adds) followed BLAS's count, by a unit
    of the last place where the total cancels (27 of 300 differed)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    engine, rng = LightEngine(threads=1), np.random.default_rng(6)
    for _ in range(60):
        x = rng.standard_normal((50_000, 1)).astype(np.float32)
        gy = rng.standard_normal((50_000, 1)).astype(np.float32)
        gy -= np.float32(x.ravel() @ gy.ravel() / (x.ravel() @ x.ravel())) * x  # near cancelling
        got = []
        for threads in (1, 2):
            with threadpoolctl.threadpool_limits(threads, user_api="blas"):
                got.append(engine.matmul(x, gy, transpose_a=True).tobytes())
        assert got[0] == got[1]


def test_a_fork_during_holds_in_another_thread_gives_every_child_blas_back() -> None:
    """A fork waits for a hold or a release under way: a child forked between a hold's setting
    one thread and its count of holds kept BLAS at one thread for good (117 of 200 children)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import threading

    from deepsharp.engines.light import _threads

    context = multiprocessing.get_context("fork")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                with _threads.one_blas_thread():
                    pass

        spinner = threading.Thread(target=spin)
        spinner.start()
        try:
            children = []
            for _ in range(25):
                reader, writer = context.Pipe(duplex=False)
                child = context.Process(target=_send_blas_counts, args=(writer,))
                child.start()
                children.append(reader.recv()[0])
                child.join(30)
        finally:
            stop.set()
            spinner.join()
        assert all(counts == [2] * len(counts) for counts in children), children


def test_ctrl_c_while_waiting_for_the_parts_lets_none_run_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while the caller waited returned at once: a part queued behind another caller's
    work started after the caller heard of it, the hold on BLAS already ended."""
    import time

    from deepsharp.engines.light import _threads

    shared = pool(2)
    busy = shared._workers().submit(time.sleep, 0.3)  # another caller's part on the worker
    real, calls = _threads.wait, []

    def interrupted(futures: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(futures)

    monkeypatch.setattr(_threads, "wait", interrupted)
    ran: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        shared.map(ran.append, [0, 1])
    busy.result()
    time.sleep(0.05)
    assert ran == [0]  # the queued part was cancelled, not run after


def _cancelling(n: int, rng: Any) -> tuple[Any, Any]:
    """Two columns whose float64 total nearly cancels: its last bits show the order it was
    added in."""
    half = n // 2
    x = (rng.standard_normal(half) * np.exp(rng.uniform(-6, 6, half))).astype(np.float32)
    y = rng.standard_normal(half).astype(np.float32)
    order = rng.permutation(n)
    return np.concatenate([x, x])[order], np.concatenate([y, -y])[order]


@pytest.mark.parametrize("path", ["rows", "conv2d", "weight_grad", "fold"])
def test_a_strict_long_dot_product_on_every_path_has_one_threads_bits(path: str) -> None:
    """A float64 dot product of over 10,000 terms arises on other paths than a whole product:
    a product's blocks of rows, one filter over one place, one filter's gradient, a fold from
    one channel. Each followed BLAS's count (30 of 30 trials differed)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    engine, rng = LightEngine(threads=1), np.random.default_rng(7)
    none = ((0, 0), (0, 0))
    a, g = _cancelling(150_000 if path == "rows" else 12_288, rng)

    def run() -> bytes:
        if path == "rows":
            out = engine.matmul(a[:, None], g[:, None], transpose_a=True)
        elif path == "conv2d":
            out = engine.conv2d(a.reshape(1, 3, 64, 64), g.reshape(1, 3, 64, 64), 1, none)
        elif path == "weight_grad":
            images, grads = a.reshape(1, 1, 96, 128), g.reshape(1, 1, 96, 128)
            out = np.concatenate(
                [x.ravel() for x in engine.conv2d_weight_bias_grad(images, grads, (1, 1), 1, none)]
            )
        else:
            out = engine.conv2d_fold(
                a.reshape(1, -1, 1, 1), g.reshape(-1, 1, 1, 1), (1, 1), 1, none
            )
        return np.asarray(out).tobytes()

    got = []
    for threads in (1, 2):
        with threadpoolctl.threadpool_limits(threads, user_api="blas"):
            got.append(run())
    assert got[0] == got[1]


def test_a_fork_inside_a_hold_leaves_the_childs_holds_working() -> None:
    """The forking thread goes on in the child inside its hold: the child let go of it, the
    block's end drove the count of holds to -1, and no later hold held."""
    import os

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from deepsharp.engines.light import _threads

    def first_count() -> int:
        return next(
            i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
        )

    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        reader, writer = os.pipe()
        with _threads.one_blas_thread():
            pid = os.fork()
            if pid == 0:
                in_block = first_count()
        if pid == 0:  # the child, out of the block it forked in
            try:
                with _threads.one_blas_thread():
                    later = first_count()
                said = f"{in_block} {later} {_threads._BLAS._held} {first_count()}"
                os.write(writer, said.encode())
            finally:
                os._exit(0)
        os.close(writer)
        os.waitpid(pid, 0)
        got = os.read(reader, 100).decode()
        os.close(reader)
    assert got == "1 1 0 2", got


def test_a_fork_while_a_pools_lock_is_held_leaves_the_childs_pool_working() -> None:
    shared = pool(2)
    context = multiprocessing.get_context("fork")
    with shared._lock:  # as a thread making the pool's workers holds it
        child = context.Process(target=_map_once)
        child.start()
    child.join(30)
    assert child.exitcode == 0


def _map_once() -> None:
    assert pool(2).map(lambda i: i * 2, [1, 2]) == [2, 4]


def test_a_pass_at_interpreter_exit_runs_on_this_thread() -> None:
    import subprocess
    import sys

    code = (
        "import atexit, numpy as np\n"
        "from deepsharp.engines.light import LightEngine\n"
        "engine = LightEngine('float32', threads=2)\n"
        "engine.relu(np.ones(1 << 20, np.float32))\n"
        "atexit.register(lambda: print(float(engine.relu(-np.ones(1 << 20, np.float32)).sum())))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "0.0", done.stderr


def test_a_fork_in_a_signal_handler_inside_a_hold_does_not_hang() -> None:
    import subprocess
    import sys

    code = (
        "import os, signal, numpy as np\n"
        "from deepsharp.engines.light import LightEngine, _threads\n"
        "def handler(s, f):\n"
        "    pid = os.fork()\n"
        "    if pid == 0: os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "signal.signal(signal.SIGUSR1, handler)\n"
        "real = _threads._Blas._found\n"
        "_threads._Blas._found = lambda self: (signal.raise_signal(signal.SIGUSR1), real(self))[1]\n"
        "LightEngine('float32').matmul(np.ones((300, 300), np.float32), np.ones((300, 300), np.float32))\n"
        "print('done')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "done", done.stderr
