#!/usr/bin/python3
"""Known answers for POST /v1/plan: for every config under tests/data/configs/, the encodings the
model uses, each with a hand-written query of its table and that table's values at len=8, from a
reading of the config written here independently of src/plan/ (the published transformers /
model-code conventions, as the comments say), and the tables from the independent references of
gen_rope.py and gen_tables.py (float64; T5's buckets in PyTorch as transformers computes them).

Regenerate (from the repository root, with Debian's Python: numpy, mpmath, torch):

    /usr/bin/python3 tests/ref/gen_plan.py

It rewrites tests/data/plan/ (conventions: kat.py); tests/e2e/test_plan_configs.c reads it: it posts each
config with ?len=8, fetches every url of the plan and compares it with ref_f64 (torch_i32 for T5; the listed rows of ViT-MAE 2-D tables),
fetches the hand-written query and compares the two ETags, and checks head_dim, rotary_dim,
softmax_scale and attention_scaling. Cases without a table (learned, none) have no file.
"""
import json
import math
import os
import sys

import kat  # noqa: F401  (before numpy: see kat.py)
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_rope  # noqa: E402
import gen_tables  # noqa: E402

GEN = "tests/ref/gen_plan.py"
LEN = 8
CONFIGS = os.path.join(kat.DATA, "configs")


def num_text(v):
    """A number as a query writes it by hand."""
    v = float(v)
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)


def getter(cfg):
    text = cfg.get("text_config") or cfg

    def get(*keys, default=None):
        for k in keys:
            for src in (text, cfg):
                if src.get(k) is not None:
                    return src[k]
        return default
    return get


def dims(get):
    heads = get("num_attention_heads", "n_head", "num_heads", "n_heads")
    hidden = get("hidden_size", "n_embd", "d_model", "n_embed")
    head_dim = get("head_dim") or hidden // heads
    return heads, hidden, head_dim


def rope_query(get, dim, scaling):
    """The /v1/rope query (without len/layout) for a transformers rope_scaling dict."""
    base = (scaling or {}).get("rope_theta") or get("rope_theta", "rotary_emb_base", default=10000.0)
    q = [f"dim={dim}", f"base={num_text(base)}"]
    s = scaling or {}
    kind = s.get("rope_type") or s.get("type") or "default"
    att = 1.0
    orig = s.get("original_max_position_embeddings") or get("original_max_position_embeddings") \
        or get("max_position_embeddings")
    if kind == "linear":
        q += ["scaling=linear", f"factor={num_text(s['factor'])}"]
    elif kind == "llama3":
        q += ["scaling=llama3", f"factor={num_text(s['factor'])}", f"original_max_position_embeddings={orig}",
              f"low_freq_factor={num_text(s.get('low_freq_factor', 1))}",
              f"high_freq_factor={num_text(s.get('high_freq_factor', 4))}"]
    elif kind == "yarn":
        f = float(s["factor"])
        q += ["scaling=yarn", f"factor={num_text(f)}", f"original_max_position_embeddings={orig}"]
        for k in ("beta_fast", "beta_slow"):
            if k in s:
                q.append(f"{k}={num_text(s[k])}")
        if s.get("mscale") and s.get("mscale_all_dim"):
            q += [f"mscale={num_text(s['mscale'])}", f"mscale_all_dim={num_text(s['mscale_all_dim'])}"]

        def m(scale, ms=1.0):
            return 1.0 if scale <= 1 else 0.1 * ms * math.log(scale) + 1.0
        att = m(f, s["mscale"]) / m(f, s["mscale_all_dim"]) if s.get("mscale") and s.get("mscale_all_dim") else m(f)
    elif kind in ("longrope", "su"):
        f = get("max_position_embeddings") / orig
        q += ["scaling=longrope", f"factor={num_text(f)}", f"original_max_position_embeddings={orig}",
              "short_factor=" + ",".join(repr(float(x)) for x in s["short_factor"]),
              "long_factor=" + ",".join(repr(float(x)) for x in s["long_factor"])]
        att = math.sqrt(1 + math.log(f) / math.log(orig)) if f > 1 else 1.0
    return q, att


def rope_enc(get, layers, dim, head_dim, layout, scaling, softmax_scale):
    q, att = rope_query(get, dim, scaling)
    q += [f"layout={layout}", f"len={LEN}"]
    return {"kind": "rope", "table": "rope", "layers": layers, "query": "&".join(q), "head_dim": head_dim,
            "rotary_dim": dim, "softmax_scale": softmax_scale, "attention_scaling": att}


def plan_of(cfg):
    """[encoding dict] for a config, by its model_type."""
    get = getter(cfg)
    mt = cfg["model_type"]
    heads, hidden, head_dim = dims(get)
    sm = 1 / math.sqrt(head_dim)
    scaling = get("rope_parameters", "rope_scaling")
    if mt in ("llama", "mistral", "mixtral", "qwen2", "falcon", "phi", "phi3", "gpt_neox", "gptj") and not get("alibi"):
        rot = head_dim
        if get("rotary_dim"):
            rot = get("rotary_dim")
        elif get("partial_rotary_factor") or get("rotary_pct"):
            rot = int(head_dim * (get("partial_rotary_factor") or get("rotary_pct")))
        layout = "interleaved" if mt == "gptj" else "half"
        return [rope_enc(get, "all", rot, head_dim, layout, scaling, sm)]
    if mt == "gemma2":
        return [rope_enc(get, "all", head_dim, head_dim, "half", scaling, get("query_pre_attn_scalar") ** -0.5)]
    if mt in ("gemma3", "gemma3_text"):
        sm = get("query_pre_attn_scalar") ** -0.5
        local = dict(cfg, rope_theta=get("rope_local_base_freq"))
        local.pop("text_config", None)
        return [rope_enc(getter(local), "sliding_attention", head_dim, head_dim, "half", None, sm),
                rope_enc(get, "full_attention", head_dim, head_dim, "half", scaling, sm)]
    if mt == "llama4":
        n = get("num_hidden_layers")
        nope = [i for i in range(n) if (i + 1) % 4 == 0]  # no_rope_layers is empty: every 4th layer
        e = rope_enc(get, [i for i in range(n) if i not in nope], head_dim, head_dim, "interleaved", scaling, sm)
        return [e, {"kind": "none", "table": "", "layers": nope, "head_dim": head_dim, "softmax_scale": sm}]
    if mt in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl"):
        sec = scaling["mrope_section"]
        il = 1 if scaling.get("mrope_interleaved") else 0
        q = (f"dim={head_dim}&base={num_text(get('rope_theta'))}&mrope_section={sec[0]},{sec[1]},{sec[2]}"
             f"&interleaved={il}&segments=text:{LEN}")
        if mt == "qwen2_5_vl":  # its own get_rope_index (time-scaled videos); text alone is the same
            q += "&variant=qwen25vl"
        if mt == "qwen3_vl":  # its videos' timestamps; text alone is the same
            q += "&variant=qwen3vl"
        return [{"kind": "mrope", "table": "rope/mrope", "layers": "all", "query": q, "head_dim": head_dim,
                 "rotary_dim": head_dim, "softmax_scale": sm, "attention_scaling": 1.0,
                 "same_as": f"dim={head_dim}&base={num_text(get('rope_theta'))}&len={LEN}"}]
    if mt in ("deepseek_v2", "deepseek_v3"):
        qk = get("qk_nope_head_dim") + get("qk_rope_head_dim")
        f, mad = scaling["factor"], scaling.get("mscale_all_dim", 0)
        m = 0.1 * mad * math.log(f) + 1.0 if mad and f > 1 else 1.0
        return [rope_enc(get, "all", get("qk_rope_head_dim"), qk, "interleaved", scaling, m * m / math.sqrt(qk))]
    if mt in ("bloom", "falcon", "mpt"):
        mb = (get("attn_config") or {}).get("alibi_bias_max", 8)
        return [{"kind": "alibi", "table": "alibi", "layers": "all", "head_dim": head_dim, "softmax_scale": sm,
                 "query": f"heads={heads}&max_bias={num_text(mb)}&q_len={LEN}", "heads": heads, "max_bias": mb}]
    if mt == "t5":
        nb, md = get("relative_attention_num_buckets", default=32), get("relative_attention_max_distance", default=128)
        return [{"kind": "relative/t5", "table": "relative/t5", "layers": stack, "head_dim": get("d_kv"),
                 "softmax_scale": 1.0, "query": f"q_len={LEN}&num_buckets={nb}&max_distance={md}&bidirectional={bd}",
                 "bidirectional": bd, "num_buckets": nb, "max_distance": md}
                for stack, bd in (("encoder", 1), ("decoder", 0))]
    if mt in ("bert", "gpt2", "vit"):
        return [{"kind": "learned", "table": "", "layers": "all", "head_dim": head_dim, "softmax_scale": sm}]
    if mt == "vit_mae":
        side = get("image_size") // get("patch_size")
        dec = get("decoder_hidden_size")
        dh = dec // get("decoder_num_attention_heads")
        return [{"kind": "sinusoidal2d", "table": "sinusoidal2d", "layers": name, "side": side, "dim": d,
                 "head_dim": hd, "softmax_scale": 1 / math.sqrt(hd),
                 "query": f"height={side}&width={side}&dim={d}&cls_token=1&variant=mae"}
                for name, d, hd in (("encoder", hidden, head_dim), ("decoder", dec, dh))]
    raise SystemExit(f"no rule for {mt}")


def table_of(e):
    """(field, array) of the encoding's table at len=LEN."""
    if e["table"] == "rope":
        return "ref_f64", gen_rope.rope_f64(gen_rope.Cfg(e["query"], "rope"))[0]
    if e["table"] == "rope/mrope":  # text alone: the three position rows are equal, the table is RoPE's
        return "ref_f64", gen_rope.rope_f64(gen_rope.Cfg(e["same_as"], "rope"))[0]
    if e["table"] == "alibi":
        return "ref_f64", gen_tables.bias_ref(e["heads"], LEN, LEN, 0, float(e["max_bias"]), False)
    if e["table"] == "relative/t5":
        return "torch_i32", gen_tables.t5_torch(LEN, LEN, bool(e["bidirectional"]), e["num_buckets"], e["max_distance"])
    if e["table"] == "sinusoidal2d":  # some rows only (the whole tables are 2 MB): "rows" says which
        return "ref_f64", gen_tables.mae_2d(e["side"], e["side"], e["dim"], 10000.0, 1)[ROWS]
    return None, None


ROWS = [0, 1, 2, 14, 15, 100, 196]
KEEP = ("kind", "layers", "head_dim", "rotary_dim", "softmax_scale", "attention_scaling")


def main():
    m = kat.Manifest("plan", GEN)
    for fname in sorted(os.listdir(CONFIGS)):
        with open(os.path.join(CONFIGS, fname)) as f:
            cfg = json.load(f)
        for i, e in enumerate(plan_of(cfg)):
            field, arr = table_of(e)
            files = {field: arr} if field else {}
            extra = {k: e[k] for k in KEEP if k in e}
            if e["table"] == "sinusoidal2d":
                extra["rows"] = ROWS
            name = f"{fname[:-5]}.{i}"
            m.add(name, e["table"], e.get("query", ""), arr.shape if field else (), files, config=fname, index=i, **extra)
    total = m.save({"numpy": np.__version__})
    print(f"{len(m.cases)} cases, {total} bytes in {m.dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
