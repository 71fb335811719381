#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the ONNX `Attention` operator's own node tests through hwyattn.sdpa.

    python3 tests/onnx/run_onnx_attention.py [-v] [-k SUBSTRING] [VECTORS_DIR]

An external conformance check: the ONNX test vectors (onnx/onnx's
onnx/backend/test/data/node/test_attention_*, opsets 23 and 24; see their
SOURCE.md) were produced by ONNX's own numpy reference, so they are an opinion
independent of hwyattn and of its oracles. They are NOT part of this
repository. They are looked for in
  1. VECTORS_DIR, if given;
  2. $HWYATTN_ONNX_VECTORS;
  3. <repo>/../shared/onnx_attention, and the same next to the main checkout
     when <repo> is a git worktree.
When none exists (a user's clone) the runner says so and exits with 77, which
ctest reports as skipped. It also skips (77) when numpy or google.protobuf
(Debian's python3-protobuf) is not importable. `onnx` itself is not needed:
model.onnx and the .pb tensors are decoded with a few message descriptors
built at run time (only the fields used here).

Each case directory holds model.onnx (one Attention node) and
test_data_set_0/{input,output}_N.pb. The node's inputs and attributes map onto
one hwyattn.sdpa call:

  Q, K, V           4-d [B, H, L, D] as is; 3-d [B, L, H*D] viewed as
                    [B, H, L, D] with q_num_heads / kv_num_heads (a strided
                    view, no copy); float32 or float16 (read by hwyattn as is)
  past_key/value    concatenated before K/V on the sequence axis; the
                    present_key/present_value outputs are that concatenation
                    (checked exactly: they test the mapping, not hwyattn)
  attn_mask         bool (True = attend) or float (additive; float16 widened
                    to float32), broadcast right-aligned as ONNX does; a last
                    dimension shorter than the total key length is padded with
                    False / -inf, as the spec says
  is_causal         key j is visible to query i iff j <= i + offset, offset =
                    past length (past_key given), else nonpad_kv_seqlen[b] - Lq
                    (nonpad_kv_seqlen given), else 0. Mapped to hwyattn's
                    causal="top_left" when every offset is 0,
                    causal="bottom_right" when every offset is Lk - Lq, and
                    otherwise built into the mask (combined with attn_mask)
  nonpad_kv_seqlen  kv_len
  scale, softcap    scale, softcap (the softcap before the mask in both)
  GQA               query head h reads KV head h // (Hq / Hkv) in both
  qk_matmul_output  mode 3 (the softmax) is hwyattn's `weights` and is
                    compared; modes 0-2 (scores before the softmax) are not
                    hwyattn outputs: that OUTPUT is reported as skipped
  softmax_precision absent or FLOAT (1): hwyattn's softmax is fp32. DOUBLE is
                    accepted (fp32 is within the tolerance); FLOAT16/BFLOAT16
                    would need a reduced-precision softmax: the case is skipped

Tolerance: |got - want| <= 1e-5 + 1e-3 * |want| elementwise (ONNX's backend
tests use rtol 1e-3), for float32 and float16 outputs alike. hwyattn returns
float32; a float16 expected value carries ONNX's own float16 arithmetic and
its final rounding (half an ulp: 2.4e-4 just below 1, 4.9e-4 relative at
most), which this tolerance admits with margin: the float16 cases' largest
error is 2.4e-4 on values below 1, the float32 cases' about 2e-7.

Output: one line per case, PASS / FAIL (why) / SKIP (the feature hwyattn cannot
express), with the maximum error of each compared output, then a summary
with the skip reasons grouped. Exit status: 0 when no case failed and one
passed, 1 when one failed, 77 when the vectors or a module are missing or
every case was skipped.

What is covered (76 cases): 3-d and 4-d layouts, MHA and GQA, different head
sizes for V, explicit scale, softcap (also with a -inf mask and with huge
values behind the mask), bool and float masks of rank 2/3/4 and short masks
padded to the key length, causal with and without past (bottom-right with
the past offset) and with nonpad_kv_seqlen (per-batch offsets, including
negative ones that empty whole rows), past/present KV caches, fully masked
rows (zeros), float16 inputs, and the softmax output (mode 3).
"""

import argparse
import collections
import glob
import os
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# ONNX TensorProto.DataType values this runner reads.
ONNX_FLOAT, ONNX_UINT8, ONNX_INT8, ONNX_INT32, ONNX_INT64 = 1, 2, 3, 6, 7
ONNX_BOOL, ONNX_FLOAT16, ONNX_DOUBLE, ONNX_BFLOAT16 = 9, 10, 11, 16
ONNX_DTYPE_NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
                    7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE",
                    12: "UINT32", 13: "UINT64", 16: "BFLOAT16"}
# AttributeProto.AttributeType
ATTR_FLOAT, ATTR_INT, ATTR_STRING = 1, 2, 3

# The Attention node's inputs and outputs, by position (opset 23/24).
INPUTS = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")
OUTPUTS = ("Y", "present_key", "present_value", "qk_matmul_output")
KNOWN_ATTRIBUTES = ("is_causal", "scale", "softcap", "q_num_heads", "kv_num_heads",
                    "qk_matmul_output_mode", "softmax_precision")
# What modes 0-2 hold, as ONNX's vectors have them (checked against numpy):
# scores before the softmax, at three stages. hwyattn never returns those.
QK_MODES = {0: "the scaled Q K^T scores",
            1: "the scores after softcap, before the mask",
            2: "the scores plus the mask, before the softmax"}

RTOL, ATOL = 1e-3, 1e-5


class CaseSkip(Exception):
    """The case asks for something hwyattn cannot express (the message says what)."""


class CaseFail(Exception):
    """The case cannot be run as the spec describes it (a malformed case)."""


# ---------------------------------------------------------------------------
# The few ONNX protobuf messages needed, built at run time (field numbers and
# types from onnx/onnx.proto). Unknown fields are skipped by the parser.
# ---------------------------------------------------------------------------

def build_messages():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    pkg = "hwyattn_onnx_subset"
    fd = descriptor_pb2.FileDescriptorProto(name=pkg + ".proto", package=pkg, syntax="proto2")
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED

    def message(name, fields):
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = ".%s.%s" % (pkg, type_name)

    message("TensorProto", [
        ("dims", 1, F.TYPE_INT64, rep, None),
        ("data_type", 2, F.TYPE_INT32, opt, None),
        ("float_data", 4, F.TYPE_FLOAT, rep, None),
        ("int32_data", 5, F.TYPE_INT32, rep, None),
        ("int64_data", 7, F.TYPE_INT64, rep, None),
        ("name", 8, F.TYPE_STRING, opt, None),
        ("raw_data", 9, F.TYPE_BYTES, opt, None),
        ("double_data", 10, F.TYPE_DOUBLE, rep, None),
        ("data_location", 14, F.TYPE_INT32, opt, None)])
    message("AttributeProto", [
        ("name", 1, F.TYPE_STRING, opt, None),
        ("f", 2, F.TYPE_FLOAT, opt, None),
        ("i", 3, F.TYPE_INT64, opt, None),
        ("s", 4, F.TYPE_BYTES, opt, None),
        ("type", 20, F.TYPE_INT32, opt, None)])  # an enum on the wire: a varint
    message("NodeProto", [
        ("input", 1, F.TYPE_STRING, rep, None),
        ("output", 2, F.TYPE_STRING, rep, None),
        ("name", 3, F.TYPE_STRING, opt, None),
        ("op_type", 4, F.TYPE_STRING, opt, None),
        ("attribute", 5, F.TYPE_MESSAGE, rep, "AttributeProto"),
        ("domain", 7, F.TYPE_STRING, opt, None)])
    message("ValueInfoProto", [("name", 1, F.TYPE_STRING, opt, None)])
    message("GraphProto", [
        ("node", 1, F.TYPE_MESSAGE, rep, "NodeProto"),
        ("input", 11, F.TYPE_MESSAGE, rep, "ValueInfoProto"),
        ("output", 12, F.TYPE_MESSAGE, rep, "ValueInfoProto")])
    message("OperatorSetIdProto", [
        ("domain", 1, F.TYPE_STRING, opt, None),
        ("version", 2, F.TYPE_INT64, opt, None)])
    message("ModelProto", [
        ("graph", 7, F.TYPE_MESSAGE, opt, "GraphProto"),
        ("opset_import", 8, F.TYPE_MESSAGE, rep, "OperatorSetIdProto")])

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    classes = {}
    for name in ("ModelProto", "TensorProto"):
        desc = pool.FindMessageTypeByName("%s.%s" % (pkg, name))
        if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
            classes[name] = message_factory.GetMessageClass(desc)
        else:  # Debian 12's 3.21
            classes[name] = message_factory.MessageFactory(pool).GetPrototype(desc)
    return classes


def tensor_to_numpy(t, np):
    """A decoded TensorProto as an ndarray (raw_data or the typed fields)."""
    dtypes = {ONNX_FLOAT: np.float32, ONNX_UINT8: np.uint8, ONNX_INT8: np.int8,
              ONNX_INT32: np.int32, ONNX_INT64: np.int64, ONNX_BOOL: np.bool_,
              ONNX_FLOAT16: np.float16, ONNX_DOUBLE: np.float64}
    if t.data_location == 1:
        raise CaseFail("tensor %r keeps its data in an external file" % t.name)
    if t.data_type not in dtypes:
        raise CaseSkip("tensor %r has data type %s" % (
            t.name, ONNX_DTYPE_NAMES.get(t.data_type, t.data_type)))
    dt = np.dtype(dtypes[t.data_type])
    shape = tuple(int(d) for d in t.dims)
    if t.HasField("raw_data"):
        a = np.frombuffer(t.raw_data, dtype=dt.newbyteorder("<")).astype(dt)
    elif t.data_type == ONNX_FLOAT:
        a = np.array(t.float_data, dtype=np.float32)
    elif t.data_type == ONNX_DOUBLE:
        a = np.array(t.double_data, dtype=np.float64)
    elif t.data_type == ONNX_INT64:
        a = np.array(t.int64_data, dtype=np.int64)
    elif t.data_type == ONNX_FLOAT16:  # the 16 bits of each value in int32_data
        a = np.array(t.int32_data, dtype=np.uint16).view(np.float16)
    else:  # BOOL, INT8, UINT8, INT32 live in int32_data
        a = np.array(t.int32_data, dtype=np.int32).astype(dt)
    if a.size != int(np.prod(shape, dtype=np.int64)):
        raise CaseFail("tensor %r: %d values for shape %s" % (t.name, a.size, shape))
    return a.reshape(shape)


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------

class Case(object):
    """model.onnx and test_data_set_0 of one case, decoded."""

    def __init__(self, path, messages, np):
        self.path = path
        self.name = os.path.basename(path.rstrip("/"))
        model = messages["ModelProto"]()
        with open(os.path.join(path, "model.onnx"), "rb") as f:
            model.ParseFromString(f.read())
        self.opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
                         or [0])
        nodes = list(model.graph.node)
        attention = [n for n in nodes if n.op_type == "Attention" and n.domain in ("", "ai.onnx")]
        if not attention:
            raise CaseSkip("no Attention node (an *_expanded function body; its .pb files "
                           "repeat the plain case's)")
        if len(nodes) != 1 or len(attention) != 1:
            raise CaseSkip("a graph of several nodes around the Attention node")
        node = attention[0]
        self.attrs = {}
        for a in node.attribute:
            if a.name not in KNOWN_ATTRIBUTES:
                raise CaseSkip("attribute %r is not one this runner maps" % a.name)
            if a.type == ATTR_FLOAT:
                self.attrs[a.name] = float(a.f)
            elif a.type == ATTR_INT:
                self.attrs[a.name] = int(a.i)
            else:
                raise CaseFail("attribute %r has type %d" % (a.name, a.type))
        # input_N.pb / output_N.pb follow the graph's inputs / outputs.
        data = os.path.join(path, "test_data_set_0")
        graph_in = [v.name for v in model.graph.input]
        graph_out = [v.name for v in model.graph.output]

        def load(prefix, names):
            values = {}
            files = sorted(glob.glob(os.path.join(data, prefix + "_*.pb")),
                           key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
            if len(files) != len(names):
                raise CaseFail("%d %s files for %d graph %ss" % (len(files), prefix,
                                                               len(names), prefix))
            for fname, name in zip(files, names):
                t = messages["TensorProto"]()
                with open(fname, "rb") as f:
                    t.ParseFromString(f.read())
                values[name] = tensor_to_numpy(t, np)
            return values

        by_name_in = load("input", graph_in)
        by_name_out = load("output", graph_out)
        # Node positions -> role names; "" (or a missing tail) = not given.
        self.inputs = {}
        for role, name in zip(INPUTS, node.input):
            if name:
                if name not in by_name_in:
                    raise CaseFail("node input %r (%s) is not a graph input" % (name, role))
                self.inputs[role] = by_name_in[name]
        self.outputs = {}
        for role, name in zip(OUTPUTS, node.output):
            if name:
                if name not in by_name_out:
                    raise CaseFail("node output %r (%s) is not a graph output" % (name, role))
                self.outputs[role] = by_name_out[name]
        if len(node.input) > len(INPUTS) or len(node.output) > len(OUTPUTS):
            raise CaseSkip("more inputs/outputs than the opset-24 Attention has")


def to_bhld(x, heads, role, np):
    """[B, H, L, D] (4-d as is; 3-d [B, L, H*D] as a strided view)."""
    if x.ndim == 4:
        return x
    if x.ndim != 3:
        raise CaseFail("%s has rank %d; Attention takes 3-d or 4-d" % (role, x.ndim))
    if heads is None or heads <= 0 or x.shape[2] % heads:
        raise CaseFail("%s is 3-d %s but the head count is %r" % (role, x.shape, heads))
    b, l, hd = x.shape
    return x.reshape(b, l, heads, hd // heads).transpose(0, 2, 1, 3)


def causal_offsets(case, batch, lq, np):
    """Per-batch causal offsets: query i sees keys j <= i + offset[b]."""
    if "past_key" in case.inputs:
        return np.full(batch, case.inputs["past_key"].shape[2], dtype=np.int64)
    if "nonpad_kv_seqlen" in case.inputs:
        return case.inputs["nonpad_kv_seqlen"].astype(np.int64).reshape(batch) - lq
    return np.zeros(batch, dtype=np.int64)


def compare(got, want, np):
    """(ok, text): got against want with the tolerance of want's dtype."""
    if got.shape != want.shape:
        return False, "shape %s, expected %s" % (got.shape, want.shape)
    rtol, atol = RTOL, ATOL
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if not np.array_equal(nan_g, nan_w):
        return False, "NaN at %d positions, expected %d" % (nan_g.sum(), nan_w.sum())
    g, w = np.where(nan_g, 0.0, g), np.where(nan_w, 0.0, w)
    err = np.abs(g - w)
    bad = err > atol + rtol * np.abs(w)
    text = "max|err| %.2e" % (err.max() if err.size else 0.0)
    if bad.any():
        where = np.unravel_index(np.argmax(np.where(bad, err, -1.0)), err.shape)
        return False, "%s (%d of %d beyond rtol %g atol %g; at %s got %r expected %r)" % (
            text, bad.sum(), bad.size, rtol, atol, tuple(int(i) for i in where),
            float(got[where]), float(want[where]))
    return True, text


def run_case(case, hwyattn, np, verbose=False):
    """(status, details, skipped_outputs): status PASS or FAIL; raises CaseSkip."""
    a = case.attrs
    if case.opset not in (23, 24):
        raise CaseSkip("opset %d (the runner knows the Attention of opsets 23 and 24)"
                       % case.opset)
    precision = a.get("softmax_precision")
    if precision is not None and precision not in (ONNX_FLOAT, ONNX_DOUBLE):
        raise CaseSkip("softmax_precision %s: hwyattn's softmax is always fp32"
                       % ONNX_DTYPE_NAMES.get(precision, precision))
    if "scale" in a and a["scale"] == 0.0:
        raise CaseSkip("scale = 0 (hwyattn reads a scale of 0 as 1/sqrt(head_dim))")
    softcap = a.get("softcap", 0.0)
    if softcap < 0:
        raise CaseSkip("softcap %r < 0 (ONNX ignores it; hwyattn rejects it)" % softcap)

    for role in ("Q", "K", "V", "past_key", "past_value"):
        x = case.inputs.get(role)
        if x is not None and x.dtype not in (np.float32, np.float16):
            raise CaseSkip("%s has dtype %s (hwyattn reads float32, float16, bfloat16)"
                           % (role, x.dtype))
    q_in, k_in, v_in = case.inputs["Q"], case.inputs["K"], case.inputs["V"]
    if not (q_in.ndim == k_in.ndim == v_in.ndim):
        raise CaseFail("Q, K, V ranks %d, %d, %d differ" % (q_in.ndim, k_in.ndim, v_in.ndim))
    q = to_bhld(q_in, a.get("q_num_heads"), "Q", np)
    k = to_bhld(k_in, a.get("kv_num_heads"), "K", np)
    v = to_bhld(v_in, a.get("kv_num_heads"), "V", np)
    notes = []

    # The KV cache: past first, then the new keys.
    if ("past_key" in case.inputs) != ("past_value" in case.inputs):
        raise CaseFail("past_key and past_value must come together")
    present = {}
    for role, new, past_role in (("present_key", k, "past_key"), ("present_value", v, "past_value")):
        past = case.inputs.get(past_role)
        if past is not None:
            if past.ndim != 4:
                raise CaseFail("%s has rank %d; must be 4-d" % (past_role, past.ndim))
            new = np.concatenate([past, new.astype(past.dtype)], axis=2)
        present[role] = new
    k, v = present["present_key"], present["present_value"]

    batch, lq = q.shape[0], q.shape[2]
    lk = k.shape[2]

    # The mask: padded to Lk on the right (False / -inf), as the spec says.
    mask = case.inputs.get("attn_mask")
    if mask is not None:
        if mask.dtype != np.bool_:
            if mask.dtype.kind != "f":
                raise CaseSkip("attn_mask has dtype %s (bool or float)" % mask.dtype)
            mask = mask.astype(np.float32)
        if mask.shape[-1] > lk:
            raise CaseFail("attn_mask's last dimension %d exceeds the key length %d"
                           % (mask.shape[-1], lk))
        if mask.shape[-1] < lk:
            pad = [(0, 0)] * (mask.ndim - 1) + [(0, lk - mask.shape[-1])]
            fill = False if mask.dtype == np.bool_ else -np.inf
            notes.append("mask padded %d->%d" % (mask.shape[-1], lk))
            mask = np.pad(mask, pad, mode="constant", constant_values=fill)

    kv_len = None
    if "nonpad_kv_seqlen" in case.inputs:
        kv_len = case.inputs["nonpad_kv_seqlen"].astype(np.int64).reshape(-1)
        if kv_len.shape != (batch,):
            raise CaseFail("nonpad_kv_seqlen has shape %s; must be [B] = [%d]"
                           % (case.inputs["nonpad_kv_seqlen"].shape, batch))

    causal = False
    if a.get("is_causal", 0):
        offsets = causal_offsets(case, batch, lq, np)
        if np.all(offsets == 0):
            causal = "top_left"
            notes.append("causal top_left")
        elif np.all(offsets == lk - lq):
            causal = "bottom_right"
            notes.append("causal bottom_right")
        else:
            # hwyattn's causal modes fix the offset at 0 or Lk - Lq for every
            # batch; other offsets become a [B, 1, Lq, Lk] mask.
            i = np.arange(lq).reshape(1, 1, lq, 1)
            j = np.arange(lk).reshape(1, 1, 1, lk)
            allowed = j <= i + offsets.reshape(batch, 1, 1, 1)
            if mask is None:
                mask = allowed
            elif mask.dtype == np.bool_:
                mask = np.logical_and(mask, allowed)
            else:
                mask = np.where(allowed, mask, np.float32(-np.inf)).astype(np.float32)
            notes.append("causal in the mask, offsets %s" % offsets.tolist())

    mode = a.get("qk_matmul_output_mode", 0)
    want_weights = "qk_matmul_output" in case.outputs and mode == 3
    skipped_outputs = []
    if "qk_matmul_output" in case.outputs and mode != 3:
        skipped_outputs.append("qk_matmul_output_mode %d (%s) is not an hwyattn output"
                               % (mode, QK_MODES.get(mode, "unknown mode")))

    try:
        result = hwyattn.sdpa(q, k, v, scale=a.get("scale"), causal=causal, mask=mask,
                              kv_len=kv_len, softcap=softcap, return_weights=want_weights)
    except hwyattn.Error as e:
        return "FAIL", ["hwyattn.sdpa raised %s: %s" % (type(e).__name__, e)], skipped_outputs
    out, weights = (result if want_weights else (result, None))

    got = {"Y": out}
    if q_in.ndim == 3:  # back to [B, Lq, Hq*Dv]
        got["Y"] = out.transpose(0, 2, 1, 3).reshape(batch, lq, -1)
    got.update(present)
    if want_weights:
        got["qk_matmul_output"] = weights

    ok, details = True, []
    for role in OUTPUTS:
        if role not in case.outputs or role not in got:
            continue
        want = case.outputs[role]
        if role.startswith("present_"):
            good = got[role].shape == want.shape and np.array_equal(got[role], want)
            text = "exact" if good else "differs from the concatenation of past and new"
        else:
            good, text = compare(got[role], want, np)
        ok = ok and good
        details.append("%s %s" % (role, text))
    if verbose and notes:
        details.append("[" + "; ".join(notes) + "]")
    return ("PASS" if ok else "FAIL"), details, skipped_outputs


# ---------------------------------------------------------------------------

def find_vectors(arg):
    if arg:
        return arg
    env = os.environ.get("HWYATTN_ONNX_VECTORS")
    if env:
        return env
    candidates = [os.path.join(REPO, "..", "shared", "onnx_attention")]
    # A git worktree: <repo>/.git is a file naming <main>/.git/worktrees/<name>.
    git = os.path.join(REPO, ".git")
    if os.path.isfile(git):
        try:
            with open(git) as f:
                line = f.read().strip()
            if line.startswith("gitdir:"):
                gitdir = line[len("gitdir:"):].strip()
                common = gitdir
                commondir = os.path.join(gitdir, "commondir")
                if os.path.isfile(commondir):
                    with open(commondir) as f:
                        common = os.path.join(gitdir, f.read().strip())
                main = os.path.dirname(os.path.normpath(common))
                candidates.append(os.path.join(main, "..", "shared", "onnx_attention"))
        except OSError:
            pass
    for c in candidates:
        if os.path.isdir(c):
            return os.path.normpath(c)
    return os.path.normpath(candidates[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vectors", nargs="?", help="the directory of test_attention_* cases")
    ap.add_argument("-k", dest="pattern", help="only cases whose name contains this")
    ap.add_argument("-v", "--verbose", action="store_true", help="say how each case was mapped")
    args = ap.parse_args()
    sys.dont_write_bytecode = True

    vectors = find_vectors(args.vectors)
    cases = sorted(glob.glob(os.path.join(vectors, "test_attention*")))
    cases = [c for c in cases if os.path.isdir(c)]
    if not cases:
        print("SKIPPED: no ONNX Attention test vectors at %s (set HWYATTN_ONNX_VECTORS to a "
              "directory of onnx/backend/test/data/node/test_attention_* cases)" % vectors)
        return SKIP
    try:
        import numpy as np
    except ImportError:
        print("SKIPPED: numpy is not importable by %s" % sys.executable)
        return SKIP
    try:
        messages = build_messages()
    except ImportError as e:
        print("SKIPPED: google.protobuf is not importable by %s (%s); on Debian: "
              "apt-get install python3-protobuf" % (sys.executable, e))
        return SKIP
    sys.path.insert(0, os.path.join(REPO, "python"))
    import hwyattn
    print("hwyattn %s (%s) from %s; %d cases in %s" % (
        hwyattn.version(), hwyattn.simd_target(), hwyattn.library_path(), len(cases), vectors))

    counts = collections.Counter()
    case_skips = collections.defaultdict(list)
    output_skips = collections.defaultdict(list)
    failures = []
    for path in cases:
        name = os.path.basename(path)
        if args.pattern and args.pattern not in name:
            continue
        try:
            case = Case(path, messages, np)
            status, details, skipped = run_case(case, hwyattn, np, args.verbose)
        except CaseSkip as e:
            status, details, skipped = "SKIP", [str(e)], []
            case_skips[str(e)].append(name)
        except CaseFail as e:
            status, details, skipped = "FAIL", ["malformed case: %s" % e], []
        for s in skipped:
            output_skips[s].append(name)
            details.append("qk_matmul_output SKIPPED: " + s)
        counts[status] += 1
        if status == "FAIL":
            failures.append(name)
        print("%-4s %s: %s" % (status, name, "; ".join(details)))

    print()
    print("%d passed, %d failed, %d skipped (of %d cases)" % (
        counts["PASS"], counts["FAIL"], counts["SKIP"], sum(counts.values())))
    for reason, names in sorted(case_skips.items()):
        print("  skipped, %s: %d case(s): %s" % (reason, len(names), ", ".join(names)))
    for reason, names in sorted(output_skips.items()):
        print("  output not compared, %s: %d case(s): %s" % (reason, len(names), ", ".join(names)))
    for name in failures:
        print("  FAILED: %s" % name)
    if counts["FAIL"] == 0 and counts["PASS"] == 0:
        return SKIP  # every case skipped: nothing was checked
    return 0 if counts["FAIL"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
