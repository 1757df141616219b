import timing, os, numpy as np, torch
timing.fix_threads()
import nets
from pycumsum_op.kernels import engine, compiled
for shape, axis, dt in [((90950,1,5),0,"float64"), ((517953,2,1),0,"float64"), ((2,1008,1,75),0,"float64"), ((13,3,2370,2),2,"float32"), ((4096,1024),0,"float32"), ((64,64,64),1,"float32"), ((20000,40),0,"float32"), ((20000,24),0,"float32")]:
    x,g = nets.feed(shape, dtype=dt)
    tx=torch.from_numpy(x)
    def sw(run, on):
        s = "1" if on else "0"
        def call():
            os.environ[compiled.SWITCH] = s; return run()
        return call
    os.environ[compiled.SWITCH]="1"; a = sw(nets.pycumsum(axis), True)
    os.environ[compiled.SWITCH]="0"; b = sw(nets.pycumsum(axis), False)
    s = timing.measure({"on": a, "off": b, "torch": lambda: torch.cumsum(tx, axis), "copy": nets.copy()}, 2.0, 5, 100)
    m = {k: np.median(v) for k,v in s.items()}
    print(shape, axis, dt, "on/torch %.2f off/torch %.2f on/copy %.2f" % (m["on"]/m["torch"], m["off"]/m["torch"], m["on"]/m["copy"]), flush=True)
