#!/usr/bin/env python3
"""Checks `onebrain export` against the real consumers; run by
scripts/verify-export.sh, which prepares onebrain's side.

For one case (a base GGUF, an exported Actor, onebrain's logits for each prompt) it loads:
  * transformers: the base model from the same GGUF (dequantized to f32), PEFT's LoRA adapter
    from the export folder, merged, then PEFT's prompt-tuning adapter of the role tokens;
  * llama.cpp (llama-cpp-python): the same GGUF with the exported adapter.gguf, the role
    tokens decoded as one batch of embeddings before the prompt's tokens;
and compares the next-token logits after each prompt and the greedy answer with onebrain's.
Each consumer is fed onebrain's token ids (no BOS), so tokenizers cannot differ; whether
they would have is reported too.

  verify_export.py prompts TRACE.jsonl.gz OUT_DIR
  verify_export.py compare CASE.json OUT.json
"""

import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path

# Domains whose first Actor prompt in the trace is taken: three different tasks.
DOMAINS = ["blocksworld", "logistics", "gripper"]

# Tolerances, set by measurement (results/export/README.md explains them). The consumers'
# arithmetic is not onebrain's (its generation path rounds every matrix product's input to 8
# bits; llama.cpp rounds its own way; transformers runs f32), so their *base* models already
# differ from onebrain's by about as much as an adapter moves the logits. What the export must
# get right is the adapter's effect, which the bar measures.
TOLERANCE = {
    # The bar: the adapter's effect (with minus without) on the consumer against onebrain's
    # (dense path). transformers runs f32 like the dense path: the largest difference must be
    # under 5 % of onebrain's largest effect (1.1-1.5 % measured on SmolLM2). llama.cpp rounds
    # its activations to 8 bits and runs the GGUF's blocks as written, in both of its runs, so
    # its effect carries its own noise twice over: the largest difference must be under 1.5
    # times (about sqrt 2, with room) its base model's own largest gap from onebrain's. That
    # says the export adds no error beyond llama.cpp's arithmetic; transformers is the tight
    # check.
    "adapter_effect": {"transformers": {"relative": 0.05}, "llama.cpp": {"base_gaps": 1.5}},
    # Recorded, not the bar: onebrain's dense path against transformers on the same weights.
    "transformers_vs_dense": 0.05,
}


def extract_prompts(trace: Path, out: Path) -> None:
    """The first Actor prompt of each of DOMAINS in a training trace."""
    out.mkdir(parents=True, exist_ok=True)
    found = {}
    with gzip.open(trace, "rt") as f:
        for line in f:
            rec = json.loads(line)["record"]
            dom = rec["domain"]
            if dom in DOMAINS and dom not in found:
                for step in rec["steps"]:
                    if step["kind"] == "actor":
                        found[dom] = (rec["task_id"], step["prompt"])
                        break
            if len(found) == len(DOMAINS):
                break
    for dom, (task, prompt) in found.items():
        (out / f"{dom}.txt").write_text(prompt)
        print(f"{out / (dom + '.txt')}: {task}, {len(prompt)} characters")


def diff_stats(ours, theirs):
    import numpy as np

    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    d = np.abs(ours - theirs)
    top = np.argsort(-ours)[:10]
    return {
        "max_abs": float(d.max()),
        "mean_abs": float(d.mean()),
        "max_abs_top10": float(d[top].max()),
        "argmax_equal": bool(int(ours.argmax()) == int(theirs.argmax())),
    }


def effect_stats(ours, ours_base, theirs, theirs_base):
    """How the adapter moves the logits on each side (with minus without), compared: the base
    models' own gap cancels, so this is the export's error alone. `relative` is the largest
    difference over the largest effect."""
    import numpy as np

    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    mine, yours = f(ours) - f(ours_base), f(theirs) - f(theirs_base)
    d = np.abs(mine - yours)
    return {"max_abs": float(d.max()), "mean_abs": float(d.mean()), "relative": float(d.max() / np.abs(mine).max())}


def answer_stats(ours, theirs):
    n = len(ours)
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    return {
        "tokens_compared": n,
        "equal": first is None and len(theirs) >= n,
        "first_divergence": first,
    }


# ------------------------------------------------------------------ transformers + PEFT

# GGUF block types onebrain re-quantizes to Q8_0 when it loads them (candle multiplies Q8_0
# faster; docs/performance.md): it never runs these weights as written, so transformers is
# given the same re-quantized weights, or the base models differ before any adapter does
# (SmolLM2's Q4_1: 0.35-0.56 max |Δlogit| on the dense path as written, 0.06-0.10 after).
REQUANTIZED_TO_Q8_0 = {"Q4_1"}

GGUF_TO_HF = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def q8_0_round_trip(w):
    """`w` quantized as ggml's Q8_0 (blocks of 32 along a row, one f16 scale each) and back."""
    import torch

    rows, cols = w.shape
    blocks = w.reshape(rows, cols // 32, 32)
    scale = (blocks.abs().amax(-1, keepdim=True) / 127.0).to(torch.float16).to(torch.float32)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(blocks / safe).clamp(-127, 127) * (scale > 0)
    return (q * scale).reshape(rows, cols)


def requantize_as_onebrain(model, gguf_path):
    """Applies onebrain's load-time re-quantization to the matrices the GGUF stores in one of
    REQUANTIZED_TO_Q8_0; returns how many."""
    import torch
    from gguf import GGUFReader

    kinds = {t.name: t.tensor_type.name for t in GGUFReader(gguf_path).tensors}
    params = dict(model.named_parameters())
    n = 0
    with torch.no_grad():
        for name, kind in kinds.items():
            parts = name.split(".")
            if kind not in REQUANTIZED_TO_Q8_0 or len(parts) != 4 or parts[2] not in GGUF_TO_HF:
                continue
            hf = f"model.layers.{parts[1]}.{GGUF_TO_HF[parts[2]]}.weight"
            params[hf].copy_(q8_0_round_trip(params[hf]))
            n += 1
    return n



def transformers_run(case, prompts):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(case.get("threads", 2))
    gguf = Path(case["gguf"])
    t0 = time.time()
    base = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    base.eval()
    requantized = requantize_as_onebrain(base, str(gguf))
    load_s = time.time() - t0
    out = {"load_seconds": load_s, "requantized_to_q8_0": requantized, "base_logits": [], "logits": [],
           "answers": [], "first_step_agrees": []}
    with torch.no_grad():
        # The base model first: merging the adapter below changes its weights in place.
        for p in prompts:
            ids = torch.tensor([p["prompt_tokens"]])
            out["base_logits"].append(base(input_ids=ids).logits[0, -1].tolist())
        lora = PeftModel.from_pretrained(base, case["peft"])
        model = lora.merge_and_unload()
        tokens_dir = Path(case["peft"]) / "role_tokens"
        if tokens_dir.is_dir():
            model = PeftModel.from_pretrained(model, str(tokens_dir))
        model.eval()
        for p in prompts:
            ids = torch.tensor([p["prompt_tokens"]])
            # PEFT's own forward: role tokens before the prompt, LoRA merged.
            logits = model(input_ids=ids).logits[0, -1]
            out["logits"].append(logits.tolist())
            # The greedy answer with a KV cache: the same embeddings, then one token a step.
            lm = model.base_model if tokens_dir.is_dir() else model
            x = lm.get_input_embeddings()(ids)
            if tokens_dir.is_dir():
                x = torch.cat([model.get_prompt(batch_size=1).to(x.dtype), x], dim=1)
            step = lm(inputs_embeds=x, use_cache=True)
            out["first_step_agrees"].append(float((step.logits[0, -1] - logits).abs().max()))
            answer = []
            for _ in range(p["max_tokens"]):
                tok = int(step.logits[0, -1].argmax())
                answer.append(tok)
                step = lm(input_ids=torch.tensor([[tok]]), past_key_values=step.past_key_values, use_cache=True)
            out["answers"].append(answer)
    out["versions"] = versions(["torch", "transformers", "peft", "gguf", "safetensors", "numpy"])
    return out


def transformers_tokens_agree(case, prompts):
    from transformers import AutoTokenizer

    gguf = Path(case["gguf"])
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return [tok(p["text"], add_special_tokens=False)["input_ids"] == p["prompt_tokens"] for p in prompts]


# ------------------------------------------------------------------ llama.cpp


def llama_logits(llm, role_tokens, ids):
    """Next-token logits after `role_tokens` (embeddings, may be None) and `ids`, from a
    cleared context; returns (logits, position after the prompt)."""
    import ctypes

    import llama_cpp
    import numpy as np

    ctx = llm.ctx
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    pos = 0
    if role_tokens is not None:
        n, hidden = role_tokens.shape
        batch = llama_cpp.llama_batch_init(n, hidden, 1)
        flat = np.ascontiguousarray(role_tokens, dtype=np.float32).ravel()
        ctypes.memmove(batch.embd, flat.ctypes.data, flat.nbytes)
        for i in range(n):
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 0
        batch.n_tokens = n
        rc = llama_cpp.llama_decode(ctx, batch)
        llama_cpp.llama_batch_free(batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode of the role tokens returned {rc}")
        pos = n
    logits = decode_tokens(ctx, ids, pos)
    return logits, pos + len(ids)


def decode_tokens(ctx, ids, pos):
    import llama_cpp
    import numpy as np

    batch = llama_cpp.llama_batch_init(len(ids), 0, 1)
    for i, t in enumerate(ids):
        batch.token[i] = t
        batch.pos[i] = pos + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1 if i == len(ids) - 1 else 0
    batch.n_tokens = len(ids)
    rc = llama_cpp.llama_decode(ctx, batch)
    llama_cpp.llama_batch_free(batch)
    if rc != 0:
        raise RuntimeError(f"llama_decode returned {rc}")
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llama_cpp.llama_get_model(ctx)))
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).copy()


def llama_run(case, prompts):
    import llama_cpp
    from safetensors.numpy import load_file

    n_ctx = max(len(p["prompt_tokens"]) for p in prompts) + 64 + 16
    params = dict(n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, n_threads=case.get("threads", 2), verbose=False,
                  # f32 KV cache, as onebrain keeps it (llama.cpp's default is f16).
                  type_k=0, type_v=0)
    out = {"base_logits": [], "logits": [], "answers": [], "tokens_agree": []}
    base = llama_cpp.Llama(model_path=case["gguf"], **params)
    for p in prompts:
        logits, _ = llama_logits(base, None, p["prompt_tokens"])
        out["base_logits"].append(logits.tolist())
        ids = base.tokenize(p["text"].encode("utf-8"), add_bos=False, special=True)
        out["tokens_agree"].append(list(ids) == p["prompt_tokens"])
    del base
    adapter = str(Path(case["gguf_export"]) / "adapter.gguf")
    llm = llama_cpp.Llama(model_path=case["gguf"], lora_path=adapter, **params)
    tokens_file = Path(case["gguf_export"]) / "role_tokens.safetensors"
    role_tokens = load_file(str(tokens_file))["role_tokens"] if tokens_file.is_file() else None
    for p in prompts:
        logits, pos = llama_logits(llm, role_tokens, p["prompt_tokens"])
        out["logits"].append(logits.tolist())
        answer = []
        for _ in range(p["max_tokens"]):
            tok = int(logits.argmax())
            answer.append(tok)
            logits = decode_tokens(llm.ctx, [tok], pos)
            pos += 1
        out["answers"].append(answer)
    out["versions"] = versions(["llama_cpp_python"])
    return out


def versions(names):
    from importlib.metadata import version

    v = {}
    for n in names:
        try:
            v[n] = version(n.replace("_", "-"))
        except Exception:  # noqa: BLE001 - a missing package is reported as such
            v[n] = None
    return v


# ------------------------------------------------------------------ the comparison


def compare(case_file: Path, out_file: Path) -> int:
    case = json.loads(case_file.read_text())
    prompts = []
    for task in case["tasks"]:
        ours = json.loads(Path(task["onebrain"]).read_text())
        base = json.loads(Path(task["onebrain_base"]).read_text())
        prompts.append({
            "task": task["task"],
            "text": Path(task["prompt_file"]).read_text(),
            "prompt_tokens": ours["prompt_tokens"],
            "max_tokens": case["max_tokens"],
            "ours": ours,
            "base": base,
        })
        assert base["prompt_tokens"] == ours["prompt_tokens"]
    report = {"case": case["name"], "model": case["gguf"], "checkpoint": case["checkpoint"], "role": "actor",
              "tolerance": TOLERANCE, "python": platform.python_version(), "tasks": []}
    # The consumers' raw outputs are kept beside the case, so that the comparison can be
    # redone without rerunning them (VERIFY_EXPORT_REUSE=1).
    cache = case_file.with_name("consumers.json")
    if os.environ.get("VERIFY_EXPORT_REUSE") == "1" and cache.is_file():
        consumers = json.loads(cache.read_text())
    else:
        consumers = {}
        for name, run in [("transformers", transformers_run), ("llama.cpp", llama_run)]:
            t0 = time.time()
            try:
                consumers[name] = run(case, prompts)
                consumers[name]["seconds"] = time.time() - t0
            except Exception as e:  # noqa: BLE001 - what failed is the result
                import traceback

                traceback.print_exc()
                consumers[name] = {"error": f"{type(e).__name__}: {e}"}
        cache.write_text(json.dumps(consumers))
    try:
        t_agree = transformers_tokens_agree(case, prompts)
    except Exception as e:  # noqa: BLE001
        t_agree = [f"{type(e).__name__}: {e}"] * len(prompts)
    report["versions"] = {k: v.get("versions") for k, v in consumers.items()}
    report["errors"] = {k: v["error"] for k, v in consumers.items() if "error" in v}
    ok = not report["errors"]
    for i, p in enumerate(prompts):
        ours, base = p["ours"], p["base"]
        row = {
            "task": p["task"],
            "prompt_tokens": len(p["prompt_tokens"]),
            "onebrain_answer_tokens": len(ours["answer_tokens"]),
            # How far the adapter and role tokens move onebrain's logits: a match is only
            # evidence that they loaded when this is well above the tolerance.
            "adapter_effect_max_abs": diff_stats(ours["next_token_logits"], base["next_token_logits"])["max_abs"],
            "tokenizer_agrees": {"transformers": t_agree[i], "llama.cpp": consumers.get("llama.cpp", {}).get("tokens_agree", [None] * len(prompts))[i]},
        }
        for name, c in consumers.items():
            if "error" in c:
                continue
            logits = diff_stats(ours["next_token_logits"], c["logits"][i])
            base_gap = diff_stats(base["next_token_logits"], c["base_logits"][i])
            answer = answer_stats(ours["answer_tokens"], c["answers"][i])
            # onebrain's effect from its dense path where it has one: its generation path rounds
            # activations to 8 bits, and that rounding differs between the runs with and without
            # the adapter, so its effect carries noise of the size of the effect itself.
            dense = ours.get("dense_next_token_logits") is not None and base.get("dense_next_token_logits") is not None
            mine = (ours["dense_next_token_logits"], base["dense_next_token_logits"]) if dense else (ours["next_token_logits"], base["next_token_logits"])
            effect = effect_stats(*mine, c["logits"][i], c["base_logits"][i])
            effect["onebrain_path"] = "dense" if dense else "generation"
            effect["generation_path"] = effect_stats(ours["next_token_logits"], base["next_token_logits"], c["logits"][i], c["base_logits"][i])
            # The consumer's own numerical distance from onebrain, on the base model alone (the
            # same onebrain path as the effect): what any comparison of the two carries.
            base_floor = diff_stats(base["dense_next_token_logits"] if dense else base["next_token_logits"], c["base_logits"][i])["max_abs"]
            effect["base_model_gap"] = base_floor
            bar = TOLERANCE["adapter_effect"][name]
            within = effect["relative"] <= bar["relative"] if "relative" in bar else effect["max_abs"] <= bar["base_gaps"] * base_floor
            entry = {
                "logits": logits,
                "base_model_logits": base_gap,
                "adapter_effect": effect,
                "answer": answer,
                "within_tolerance": within,
            }
            if name == "transformers":
                entry["cached_greedy_first_step_vs_peft_forward"] = c["first_step_agrees"][i]
                if ours.get("dense_next_token_logits") is not None:
                    entry["onebrain_dense_path"] = diff_stats(ours["dense_next_token_logits"], c["logits"][i])
                    entry["onebrain_dense_path"]["within_tolerance"] = entry["onebrain_dense_path"]["max_abs"] <= TOLERANCE["transformers_vs_dense"]
                    if base.get("dense_next_token_logits") is not None:
                        entry["onebrain_dense_base_model"] = diff_stats(base["dense_next_token_logits"], c["base_logits"][i])
            ok &= entry["within_tolerance"] and logits["argmax_equal"]
            row[name] = entry
        report["tasks"].append(row)
    report["seconds"] = {k: v.get("seconds") for k, v in consumers.items()}
    report["all_within_tolerance"] = ok
    out_file.write_text(json.dumps(report, indent=2) + "\n")
    print_summary(report)
    return 0 if ok else 1


def print_summary(r):
    print(f"\n{r['case']}: {r['model']} + {r['checkpoint']} (actor)")
    for name, err in r["errors"].items():
        print(f"  {name}: FAILED: {err}")
    for t in r["tasks"]:
        print(f"  {t['task']}: {t['prompt_tokens']} prompt tokens, adapter effect {t['adapter_effect_max_abs']:.3f} (generation path)")
        for name in ["transformers", "llama.cpp"]:
            e = t.get(name)
            if not e:
                continue
            dense = e.get("onebrain_dense_path")
            extra = f", dense path {dense['max_abs']:.4f}" if dense else ""
            print(f"    {name:12} max|Δlogit| {e['logits']['max_abs']:.4f} (base model {e['base_model_logits']['max_abs']:.4f}){extra}, "
                  f"adapter effect gap {e['adapter_effect']['max_abs']:.4f} ({e['adapter_effect']['relative']:.1%} of the "
                  f"{e['adapter_effect']['onebrain_path']} path's effect; base models' gap {e['adapter_effect']['base_model_gap']:.4f}), "
                  f"within the bar {e['within_tolerance']}, "
                  f"argmax equal {e['logits']['argmax_equal']}, answer equal {e['answer']['equal']} "
                  f"(first divergence {e['answer']['first_divergence']})")
    print(f"  all within tolerance: {r['all_within_tolerance']}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "prompts":
        extract_prompts(Path(sys.argv[2]), Path(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        print(__doc__)
        sys.exit(2)
