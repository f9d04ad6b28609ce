set -o pipefail
source .dev/h200/setup.sh >/dev/null 2>&1 || { echo setup failed; exit 1; }
C="python3 -m capshim.cli"
echo "=== done-when"; timeout 90 $C run --profile t4-class -- python3 -c "import torch; print(torch.cuda.get_device_capability(), torch.cuda.get_device_name())" 2>&1 | tail -3
echo "=== worker stock"; s=$(date +%s.%N); timeout 120 python3 -m capshim.bench.workloads.torch_sdpa_worker --repetitions 3 > $OUT/w_stock.json 2>$OUT/w_stock.err; echo rc=$? $(echo "$(date +%s.%N) - $s" | bc); head -c 600 $OUT/w_stock.json; echo; tail -3 $OUT/w_stock.err | cut -c1-300
echo "=== worker t4"; s=$(date +%s.%N); timeout 150 $C run --profile t4-class --status-file $OUT/s_t4.jsonl -- python3 -m capshim.bench.workloads.torch_sdpa_worker --repetitions 3 > $OUT/w_t4.json 2>$OUT/w_t4.err; echo rc=$? $(echo "$(date +%s.%N) - $s" | bc); head -c 600 $OUT/w_t4.json; echo; tail -3 $OUT/w_t4.err | cut -c1-300
python3 -c "
import json,collections,sys
ev=[json.loads(l) for l in open('$OUT/s_t4.jsonl')]
print(collections.Counter(e['event'] for e in ev))
for e in ev:
    if e['event'] in ('called','layout_mismatch'): print(json.dumps(e)[:900])
print(sorted({(e.get('query'),e.get('key'),e.get('stock'),e.get('reported')) for e in ev if e['event']=='changed'},key=str))
"
echo "=== probe compare"; timeout 60 $C probe --api cuda --compare --profile t4-class 2>&1 | tail -22
echo "=== bench"; timeout 330 $C bench --workload torch-sdpa --arm native --arm t4-class --aa --out /tmp/benchB 2>&1 | tail -45
tar czf $OUT/benchB.tgz -C /tmp benchB 2>/dev/null; ls -la $OUT
