# What `make test` had left after recorded_update, on the same build. test-bins.txt lists the
# test executables: `cargo test --workspace --release --no-run --message-format=json`, each
# artifact's package folder, target name and executable.
cd /tmp/cold
s=$(date +%s)
grep -E '^(transfer|verifier) ' /work/logs/test-bins.txt | while read dir name exe fresh; do
  echo "== $dir $name"; (cd host/$dir && $exe) 2>&1 | grep -E '^test result|FAILED|panicked'
done
echo "bins secs=$(( $(date +%s)-s ))"
s=$(date +%s); cargo test --workspace --release --doc --no-fail-fast 2>&1 | grep -E 'Doc-tests|^test result|FAILED|error'; echo "doc secs=$(( $(date +%s)-s ))"
s=$(date +%s); cargo test --manifest-path guests/Cargo.toml --workspace --profile native-test --no-fail-fast 2>&1 | grep -E 'Running|^test result|FAILED|error|Finished'; echo "guests secs=$(( $(date +%s)-s ))"
