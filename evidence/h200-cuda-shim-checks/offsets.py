import re, sys, subprocess, os
inc = sys.argv[1]; out = sys.argv[2]
t = open(inc + "/driver_types.h").read()
m = re.search(r"struct\s+__device_builtin__\s+cudaDeviceProp\s*\{(.*?)\n\};", t, re.S)
body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
fields = []
for line in body.split(";"):
    line = line.strip()
    if not line: continue
    name = re.split(r"[\s\*]+", re.sub(r"\[.*", "", line))[-1]
    fields.append(name)
c = ['#include <stdio.h>', '#include <stddef.h>', '#include <cuda_runtime_api.h>', 'int main(void){',
     'printf("sizeof %zu\\n", sizeof(struct cudaDeviceProp));']
for f in fields:
    c.append(f'printf("{f} %zu %zu\\n", offsetof(struct cudaDeviceProp, {f}), sizeof(((struct cudaDeviceProp*)0)->{f}));')
c.append('return 0;}')
open("/tmp/off.c", "w").write("\n".join(c))
subprocess.run(["gcc", "-I" + inc, "/tmp/off.c", "-o", "/tmp/off"], check=True)
open(out, "w").write(subprocess.run(["/tmp/off"], capture_output=True, text=True).stdout)
