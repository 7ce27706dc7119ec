"""The generator's convolutions: int8 kernels (as shipped) against float kernels, on this CPU.

Issue 29's lever to measure, not assume: on a CPU without VNNI, onnxruntime's `ConvInteger`
has no 8-bit dot-product instruction, and a float graph might be faster there. This builds a
variant of the derived generator graph (engine/onnx/graphs.py) in memory in which every
`ConvInteger` is a float `Conv` over the same integers: the quantized activation cast to float,
its zero point subtracted, and the weights stored as float (int8 value minus zero point). The
result is the int8 graph's up to float32 rounding of the integer sums, so the two speak the same
samples (the SNR between them is reported); only the kernel differs. Every other op is untouched.

Both generators decode the same windows of a 15-word sentence's features (44, 100 and 176
generator frames), alternating per repeat so that the machine's load falls on both alike, on
`--threads` intra-op threads: milliseconds per generator frame, medians. The CPU record (flags:
avx2 / avx512 / vnni) says which class the numbers belong to.

    .venv/bin/python benchmarks/kernel_choice.py [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from tests.support.seams import snr_db

from common import RESULTS, command_line, machine, write_json
from first_audio_length import sentence
from voicestream.engine.models.assets import manifest, onnx_assets
from voicestream.engine.onnx.engine import OnnxEngine
from voicestream.engine.onnx.graphs import DerivedGraphs, split_graphs
from voicestream.engine.onnx.runtime import OnnxSplitRuntime
from voicestream.engine.streaming.windows import Window
from voicestream.engine.streaming.word_timings import tokenize

SPANS = (44, 100, 176)  # generator frames: a first window's span, a middle one, the largest
VOICE = "af_heart"


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return consumers


def _rebuilt(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> bytes:
    """`model` with `nodes`, less every node whose outputs nothing reads (what a rewrite orphaned)."""
    graph = model.graph
    outputs = {value.name for value in graph.output}
    while True:
        read = {name for node in nodes for name in node.input} | outputs
        kept = [node for node in nodes if any(name in read for name in node.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    del graph.node[:]
    graph.node.extend(nodes)
    return bytes(model.SerializeToString())


def integer_sums_in_float(generator: bytes) -> tuple[bytes, int]:
    """Each ConvInteger as a float Conv over the same integers (the quantized activation cast to
    float less its zero point; the weights int8 less theirs): the int8 graph's samples up to the
    float32 rounding of the sums, with only the convolution kernel changed."""
    model = onnx.load_from_string(generator)
    graph = model.graph
    constants = {tensor.name: tensor for tensor in graph.initializer}
    nodes, replaced = [], 0
    for node in graph.node:
        if node.op_type != "ConvInteger" or node.input[1] not in constants:
            nodes.append(node)
            continue
        x, x_zero = node.input[0], (node.input[2] if len(node.input) > 2 else "")
        name = f"{node.output[0]}_float"
        graph.initializer.append(numpy_helper.from_array(_centred_weight(constants, node), f"{name}_weight"))
        nodes.append(helper.make_node("Cast", [x], [f"{name}_x"], to=onnx.TensorProto.FLOAT))
        centred = f"{name}_x"
        if x_zero:
            nodes.append(helper.make_node("Cast", [x_zero], [f"{name}_zero"], to=onnx.TensorProto.FLOAT))
            nodes.append(helper.make_node("Sub", [f"{name}_x", f"{name}_zero"], [f"{name}_centred"]))
            centred = f"{name}_centred"
        conv = helper.make_node("Conv", [centred, f"{name}_weight"], [f"{name}_sum"], name=name)
        conv.attribute.extend(node.attribute)
        nodes.append(conv)
        # ConvInteger's int32 output, as the bias Add after it expects.
        nodes.append(helper.make_node("Cast", [f"{name}_sum"], [node.output[0]], to=onnx.TensorProto.INT32))
        replaced += 1
    return _rebuilt(model, nodes), replaced


def _centred_weight(constants: dict[str, onnx.TensorProto], conv: onnx.NodeProto) -> np.ndarray:
    weight = numpy_helper.to_array(constants[conv.input[1]]).astype(np.float32)
    if len(conv.input) > 3 and conv.input[3]:
        zero = numpy_helper.to_array(constants[conv.input[3]]).astype(np.float32)
        weight = weight - (zero.reshape(-1, *([1] * (weight.ndim - 1))) if zero.size > 1 else float(zero))
    return weight


def float_graph(generator: bytes) -> tuple[bytes, int]:
    """Each quantized convolution as the float one it was quantized from: no dynamic quantization
    of its input, the weights dequantized (int8 less zero point, times scale), the float bias.
    The quantizer's pattern in this graph, for every ConvInteger: DynamicQuantizeLinear(act) ->
    ConvInteger -> Add(int32 bias = floor(bias / (x_scale * w_scale))) -> Cast -> Mul(x_scale * w_scale)."""
    model = onnx.load_from_string(generator)
    graph = model.graph
    constants = {tensor.name: tensor for tensor in graph.initializer}
    producer = {name: node for node in graph.node for name in node.output}
    consumers = _consumers(graph)
    replaced_by: dict[str, onnx.NodeProto] = {}  # the Mul a float Conv takes the place of
    gone: set[int] = set()  # ids of the ConvInteger, Add and Cast each Conv replaces
    for node in graph.node:
        if node.op_type != "ConvInteger" or node.input[1] not in constants:
            continue
        (add,) = consumers[node.output[0]]
        (cast,) = consumers[add.output[0]]
        (rescale,) = consumers[cast.output[0]]
        scale = producer[next(name for name in rescale.input if name != cast.output[0])]
        w_scale = numpy_helper.to_array(constants[next(name for name in scale.input if name in constants)])
        bias_path = producer[next(name for name in add.input if name != node.output[0])]  # Reshape
        bias = producer[producer[producer[bias_path.input[0]].input[0]].input[0]].input[0]  # Cast <- Floor <- Div
        assert (add.op_type, cast.op_type, rescale.op_type, bias_path.op_type) == ("Add", "Cast", "Mul", "Reshape")
        assert bias in constants, bias
        weight = _centred_weight(constants, node)
        weight = weight * (w_scale.reshape(-1, *([1] * (weight.ndim - 1))) if w_scale.size > 1 else float(w_scale))
        name = f"{node.output[0]}_float"
        graph.initializer.append(numpy_helper.from_array(weight.astype(np.float32), f"{name}_weight"))
        activation = producer[node.input[0]].input[0]  # DynamicQuantizeLinear's input
        conv = helper.make_node("Conv", [activation, f"{name}_weight", bias], [rescale.output[0]], name=name)
        conv.attribute.extend(node.attribute)
        replaced_by[rescale.name or rescale.output[0]] = conv
        gone.update(id(n) for n in (node, add, cast))
    nodes = []
    for node in graph.node:
        if id(node) in gone:
            continue
        nodes.append(replaced_by.get(node.name or node.output[0], node))
    return _rebuilt(model, nodes), len(replaced_by)


def measure(repeats: int, threads: int) -> dict[str, Any]:
    engine = OnnxEngine(threads=threads)
    engine.load()
    assert engine.derived_dir is not None
    graphs = split_graphs(onnx_assets(voices=()).model, manifest()["onnx_model"]["sha256"], engine.derived_dir)
    sums, replaced = integer_sums_in_float(graphs.generator)
    floats, replaced_float = float_graph(graphs.generator)
    assert replaced == replaced_float
    runtimes = {
        "int8 (shipped)": OnnxSplitRuntime(graphs, threads),
        "integer sums in float": OnnxSplitRuntime(DerivedGraphs(graphs.encoder, graphs.frontend, sums), threads),
        "float graph": OnnxSplitRuntime(DerivedGraphs(graphs.encoder, graphs.frontend, floats), threads),
    }
    (piece,) = engine.phoneme_pieces(sentence(15), VOICE)
    ids, _ = tokenize(piece, engine._vocab)
    features = engine.split.encode(ids, engine._voice(VOICE)[len(ids) - 1 : len(ids)], 1.0)
    windows = {
        span: Window(min(16, span - 1), min(span, features.frames), 0, min(span, features.frames)) for span in SPANS
    }
    samples: dict[str, dict[int, list[float]]] = {name: {span: [] for span in SPANS} for name in runtimes}
    outputs: dict[str, dict[int, np.ndarray]] = {name: {} for name in runtimes}
    names = list(runtimes)
    for name in names:  # warm-up: first runs at a new shape allocate
        for span, window in windows.items():
            outputs[name][span] = runtimes[name].decode(features, window)[0]
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            for span, window in windows.items():
                started = time.perf_counter()
                runtimes[name].decode(features, window)
                samples[name][span].append((time.perf_counter() - started) * 1000 / window.frames)
    ms = {
        name: {str(span): round(statistics.median(runs), 2) for span, runs in by_span.items()}
        for name, by_span in samples.items()
    }
    int8, *variants = names
    engine.close()
    return {
        "convolutions_replaced": replaced,
        "ms_per_frame": ms,
        "over_int8": {
            name: {span: round(ms[name][span] / ms[int8][span], 3) for span in ms[int8]} for name in variants
        },
        "samples_snr_db_against_int8": {
            name: {str(span): round(snr_db(outputs[name][span], outputs[int8][span]), 1) for span in SPANS}
            for name in variants
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "kernel_choice.json")
    args = parser.parse_args()
    result = measure(args.repeats, args.threads)
    report = {
        "benchmark": "kernel_choice",
        "command": command_line(),
        "repeats": args.repeats,
        "threads": args.threads,
        "sentence": sentence(15),
        **result,
        "machine": machine(),
    }
    write_json(args.out, report)
    print(f"ms per frame {result['ms_per_frame']}")
    print(f"over int8 {result['over_int8']}; SNR against int8 {result['samples_snr_db_against_int8']}")


if __name__ == "__main__":
    main()
