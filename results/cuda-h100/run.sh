#!/usr/bin/env bash
# One GPU check of the CUDA build: SmolLM2 greedy generation on cuda:0 and on the CPU.
# As run on 2026-11-25 through the workplace's device tool, from an ignored folder .gpu/:
# .gpu/bin held this script and `xz -6` of target/cuda/release/onebrain, .gpu/p1..p3 the
# SmolLM2 GGUF in 39 MiB pieces (`split -b 39M -d`), one carry per call (64 MiB at most);
# the two earlier calls copied their piece to /tmp/stash. $OUT is where outputs come back.
set -u
cp .gpu/p3/smol.02 /tmp/stash/; ls -la /tmp/stash; cat /tmp/stash/smol.00 /tmp/stash/smol.01 /tmp/stash/smol.02 > /tmp/smol.gguf
sha256sum /tmp/smol.gguf
python3 -c 'import lzma,shutil; shutil.copyfileobj(lzma.open(".gpu/bin/onebrain.xz"), open("/tmp/onebrain","wb"))'
chmod +x /tmp/onebrain
LIBS=$(dirname "$(find / -xdev -name 'libcublas.so.13*' 2>/dev/null | head -n1)")
echo "cuda libs: $LIBS"; ls "$LIBS" | head -30
export LD_LIBRARY_PATH=$LIBS
ldd /tmp/onebrain | grep -E "cuda|cublas|curand|not found"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
P="Write a PDDL problem for BlocksWorld with 3 blocks a, b, c: all on the table and clear, the hand empty; the goal is a on b and b on c."
i=0
for dev in cuda:0 cpu cuda:0; do
  i=$((i+1)); name=gen-$i-${dev/:/}
  echo "== generate on $dev ($name)"
  TIMEFORMAT="wall %R s"; time /tmp/onebrain generate --model /tmp/smol.gguf --device $dev --json --max-tokens 256 --prompt "$P" > $OUT/$name.json 2> $OUT/$name.err
  echo "rc $?"; cat $OUT/$name.json; tail -3 $OUT/$name.err
done
echo "== judge on cuda:0"
/tmp/onebrain generate --model /tmp/smol.gguf --device cuda:0 --role judge --json --prompt "$P"
echo "== judge on cpu"
/tmp/onebrain generate --model /tmp/smol.gguf --device cpu --role judge --json --prompt "$P"
