"""PyTorch int8 peer of cnnc's --precision int8 (bench/run.py --int8): a torchvision model
quantised by FX graph mode post-training quantisation, timed like the anchors' torch_bench.py.

Usage: torch_int8.py NAME BATCH [THREADS] [CALIB_BATCHES]

The model (seed-0 random weights, as torch_bench.py) is prepared with the engine's default
qconfig mapping (per-channel weights, histogram observers for activations), calibrated on
CALIB_BATCHES (default 2) batches of N(0,1) inputs, converted, then run for >= 20 s after two
warm-up steps.  Engine: x86 fbgemm where this PyTorch has it, else onednn (Debian's 1.13 build
ships onednn and qnnpack only); the line printed names it."""
import sys, time, torch, torchvision
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

if len(sys.argv) < 3:
    sys.exit(__doc__)
name, batch = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 2)
calib = int(sys.argv[4]) if len(sys.argv) > 4 else 2
engines = torch.backends.quantized.supported_engines
engine = next((e for e in ("fbgemm", "x86", "onednn") if e in engines), None)
if engine is None:
    sys.exit(f"torch_int8.py: no x86 quantized engine in this PyTorch (has {engines})")
torch.backends.quantized.engine = engine
torch.manual_seed(0)
m = getattr(torchvision.models, name)().eval()
x = torch.randn(batch, 3, 224, 224)
with torch.no_grad():
    p = prepare_fx(m, get_default_qconfig_mapping(engine), example_inputs=(x,))
    for _ in range(calib):
        p(torch.randn(batch, 3, 224, 224))
    q = convert_fx(p)
    def step():
        q(x)
    step(); step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 20 or n < 3:
        step(); n += 1
dt = (time.perf_counter() - t0) / n
print(f"torch {torch.__version__} {name} int8 ({engine}, FX PTQ) batch={batch} threads={torch.get_num_threads()}: "
      f"{batch/dt:.2f} img/s ({dt*1000:.1f} ms/step)")
