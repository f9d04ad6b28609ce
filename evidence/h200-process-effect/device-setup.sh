# sourced on the device: loaders, wheels, the layer, the model
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
vulkaninfo --summary 2>&1 | grep -E "deviceName|driverInfo|apiVersion" | head -4
python3 -m capshim.cli build >/dev/null 2>$OUT/build.log || { tail -20 $OUT/build.log; exit 1; }
MODEL=$(python3 -c "from capshim.bench.workloads.builtin import resolve_model; print(resolve_model('tinyllama-1.1b'))") || exit 1
echo model $MODEL
