"""Eager and torch.compile times of bench/probes/memory_bound_probe.cu's two shapes (RMSNorm
over 64 channels of 112 x 64 x 512 x 512, MaxPool1d(8, 1, 4, 3) over 64 x 192 x 65536),
timed as the probe times its kernels: CUDA events, the L2 flushed before each call,
median of 20.

    python3 bench/probes/memory_bound_probe_torch.py      (on the GPU machine)

Conclusion: the bar the probe's layouts were held against. Its own output was not kept
in the docs; the same two shapes are KernelBench's 36_RMSNorm_ and 41_Max_Pooling_1D,
whose eager and torch.compile times the bench measures (docs/results/kernelbench.csv).
"""
import torch, time
torch.manual_seed(0)
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
def med(f, *a):
    ts = []
    for i in range(23):
        flush.fill_(i)
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        e0.record(); f(*a); e1.record(); e1.synchronize()
        if i >= 3: ts.append(e0.elapsed_time(e1))
    ts.sort(); return ts[len(ts)//2]
def rms(x): return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)
x = torch.rand(112, 64, 512, 512, device="cuda")
c = torch.compile(rms); c(x)
print("rmsnorm eager %.4f compile %.4f" % (med(rms, x), med(c, x)))
del x
p = torch.nn.MaxPool1d(8, 1, 4, 3)
x = torch.rand(64, 192, 65536, device="cuda")
cp = torch.compile(p); cp(x)
print("maxpool1d eager %.4f compile %.4f" % (med(p, x), med(cp, x)))
