"""Profile one static Paddle MLP step (Executor.run): CPU time a step, the numpy GEMM floor, cProfile of 3 steps."""
import cProfile, pstats, time, numpy as np
import globaltensor.paddle as paddle
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 1024], "float32"); y = paddle.static.data("y", [-1, 1024], "float32")
    h = paddle.nn.functional.relu(paddle.static.nn.fc(x, 4096))
    loss = paddle.mean(paddle.square(paddle.static.nn.fc(h, 1024) - y))
    paddle.optimizer.SGD(0.01).minimize(loss)
exe = paddle.static.Executor(paddle.CPUPlace()); exe.run(startup)
rng = np.random.default_rng(0); xs = rng.random((128, 1024), np.float32); ys = rng.random((128, 1024), np.float32)
for _ in range(2): exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
t = time.process_time()
for _ in range(5): exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
print("cpu/step ms", (time.process_time() - t) / 5 * 1e3)
a = rng.random((128, 1024), np.float32); w = rng.random((1024, 4096), np.float32); w2 = rng.random((4096, 1024), np.float32)
t = time.process_time()
for _ in range(5):
    hh = a @ w; o = hh @ w2; g = o.copy(); gw2 = hh.T @ g; gh = g @ w2.T; gw = a.T @ gh
print("6 GEMM floor cpu ms", (time.process_time() - t) / 5 * 1e3)
pr = cProfile.Profile(); pr.enable()
for _ in range(3): exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
pr.disable(); st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(14)
