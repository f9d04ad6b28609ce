set -x
cd .dev/cuda
nvidia-smi -L; python3 --version; which nvcc; nvcc --version | tail -2
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.__file__)" 
python3 - > $OUT/maps.txt <<'PY'
import torch
x = torch.zeros(1, device="cuda")
seen = set()
for l in open("/proc/self/maps"):
    p = l.split()[-1]
    if p.startswith("/") and p not in seen and (".so" in p): seen.add(p); print(p)
PY
grep -iE 'cuda|cudnn|cublas|torch|nvrtc|flash' $OUT/maps.txt
CUDART=$(grep -m1 'libcudart' $OUT/maps.txt); LIBCUDA=$(grep -m1 'libcuda\.so' $OUT/maps.txt); echo "cudart=$CUDART libcuda=$LIBCUDA"
TDIR=$(python3 -c "import torch,os; print(os.path.dirname(torch.__file__))")
{ echo "## cudart exports"; nm -D --defined-only $CUDART | grep -E 'GetDeviceProp|DeviceGetAttribute|DriverEntryPoint|RuntimeGetVersion|cudaGetDeviceCount' ;
  echo "## libcuda exports"; nm -D --defined-only $LIBCUDA | grep -E ' cuDeviceGet|cuGetProcAddress|cuDeviceComputeCapability|cuDeviceTotalMem|cuGetExportTable' ;
  for L in $TDIR/lib/*.so $(dirname $CUDART)/*.so* ; do echo "## UND in $L"; readelf -d $L 2>/dev/null | grep NEEDED | tr -s ' ' | cut -d' ' -f6 | tr '\n' ' '; echo; nm -D --undefined-only $L 2>/dev/null | grep -E 'GetDeviceProp|DeviceGetAttribute|DriverEntryPoint|cuDeviceGet|cuGetProcAddress|cuDeviceComputeCapability|dlsym|dlopen' ; done ; } > $OUT/symbols.txt 2>&1
head -60 $OUT/symbols.txt
for L in $(grep -lE 'cudart|cublas|cudnn' $OUT/maps.txt); do :; done
INC=$(dirname $(dirname $(which nvcc)))/include; ls $INC | head -3
python3 offsets.py $INC $OUT/offsets13.txt; cat $OUT/offsets13.txt | head -100
tar czf $OUT/headers.tgz -C $INC driver_types.h cuda_runtime_api.h cuda.h cudaTypedefs.h cuda_runtime.h 2>&1 | tail -1
gcc -shared -fPIC -O1 -o /tmp/trace.so trace.c -ldl && echo built
TRACE_OUT=$OUT/trace.txt LD_PRELOAD=/tmp/trace.so python3 torchprobe.py > $OUT/probe_traced.json 2>$OUT/probe_err.txt; tail -3 $OUT/probe_err.txt
python3 torchprobe.py > $OUT/probe_stock.json 2>>$OUT/probe_err.txt; cat $OUT/probe_stock.json
cat $OUT/trace.txt
# is cudart in torch static? python sdpa compiled kernels arch
cuobjdump --list-elf $TDIR/lib/libtorch_cuda.so 2>/dev/null | awk -F. '{print $(NF-1)}' | sort | uniq -c | head
