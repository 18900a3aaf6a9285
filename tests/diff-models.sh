# tests/diff-models.sh — sourced (after tests/lib.sh) by test-diff.sh and test-presets.sh: the
# shared models they run `engine diff` on. diff_models sets $models to the paths of those
# present; each one missing is a skip (lib.sh: exit 77, a failure in CI), never dropped
# silently. Under the sanitizers (lib.sh's sanitized: CI's second run) the
# two models with Qwen's 151936-token vocabulary are left to the Release run, said so (N/A): their
# output heads make a run ~30x slower under ASan, and test-qwen3 runs them there on ref and cpu.
diff_models() {
  local f
  models=""
  for f in stories260K/stories260K.gguf qwen3/qwen3-micro-f16.gguf qwen3/qwen3-micro-q8_0.gguf \
           qwen3/qwen3-tern-f16.gguf qwen3/qwen3-tern-tq2_0.gguf misc/llama-2-tiny-random.gguf; do
    need_file "$D/$f" || continue
    if sanitized && [[ $f == qwen3/qwen3-micro-* ]]; then
      na "$(basename "$f"): left to the Release run under the sanitizers"
      continue
    fi
    models="$models $D/$f"
  done
}
