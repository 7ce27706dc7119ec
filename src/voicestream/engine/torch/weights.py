"""KModel weights derived from the shipped int8 ONNX export: real speech from the torch engine offline.

The hexgrad checkpoint (kokoro-v1_0.pth) is not reachable without internet; the int8 export
that the ONNX engine runs is (assets.py). It was exported from the same KModel and quantized
dynamically, so every weight is in it: int8/uint8 initializers with a scale and zero point
(ConvInteger, MatMulInteger, DynamicQuantizeLSTM, Gather) or float ones. Each is dequantized,
`(q - zero_point) * scale`, and put where KModel keeps it:

- named initializers (`encoder.<path>` / `decoder.decoder.<path>`) mirror KModel's own names;
- anonymous ones (weight-normed convs' computed weights `/…/Mul_output_0`, ALBERT's and the
  LSTMs' `onnx::…` weights) are found through the node that consumes them, whose name is the
  module's scope (`/decoder/decoder/decode.0/conv1/Conv_quant`): the KModel module whose path
  ends with that scope's longest matching tail;
- a weight-normed conv gets `weight_v = W` and `weight_g = ||W||` (per output channel), so the
  weight it computes is W; an LSTM's gates are reordered (ONNX i, o, f, c -> torch i, f, g, o)
  and its summed bias goes to `bias_ih` (`bias_hh` = the recurrent half).

- a quantized weight is dequantized with the zero point its consuming node uses: the exporter
  shares equal initializers, so a weight's own `_zero_point` may be absent (uint8 weights sit
  around 128: reading a missing one as 0 left the generator's `noise_convs.1` wrong and the
  audio unintelligible while every other activation matched).

Every KModel parameter must be set exactly once, with its shape; ALBERT's unused pooler (absent
from the graph) is zeroed and AdaIN's affine instance norms, the identity in training and absent
from the graph, are set to it. Anything else is an error that names the keys. The result is
verified against the int8 graph's own outputs (tests/torch/test_torch_int8_weights.py,
test_torch_real_speech.py). `derived_checkpoint` writes it once as kokoro-v1_0.pth with a sha256
manifest (derived.py); the torch engine loads it when the model directory has no hexgrad
checkpoint (the production container's path keeps the pinned upstream revision).
"""

from __future__ import annotations

import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from voicestream import env
from voicestream.engine.models.assets import AssetError, manifest, verify_file
from voicestream.engine.models.derived import ensure_derived

Array = npt.NDArray[np.float32]
# Parameters the graph cannot hold: ALBERT's pooler (KModel reads the last hidden state only).
UNUSED_PREFIXES = ("bert.pooler.",)
# Constants of the export's own STFT module (its inverse basis, window sum): KModel computes its STFT.
EXPORT_ONLY_PREFIXES = ("decoder.generator.stft.",)
_IDENTITY_NORM = re.compile(r"\.norm\.(weight|bias)$")
_WEIGHT_OPS = {"ConvInteger", "Conv", "ConvTranspose", "MatMulInteger", "MatMul", "DynamicQuantizeLSTM"}


def derive_state_dicts(onnx_path: Path, model: torch.nn.Module) -> dict[str, dict[str, torch.Tensor]]:
    """{component: state dict} for `model` (a KModel) from the int8 export at `onnx_path`."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    inits = {init.name: init for init in graph.initializer}
    arrays: dict[str, np.ndarray] = {}

    def array(name: str) -> np.ndarray:
        if name not in arrays:
            arrays[name] = numpy_helper.to_array(inits[name])
        return arrays[name]

    expected = {
        f"{component}.{key}": value
        for component, child in model.named_children()
        for key, value in child.state_dict().items()
    }
    modules = {name for name, _ in model.named_modules() if name}
    out: dict[str, Array] = {}

    def put(key: str, value: np.ndarray) -> None:
        if key not in expected:
            raise AssetError(f"int8 export weight maps to {key!r}, which KModel does not have")
        if key in out:
            raise AssetError(f"int8 export sets {key!r} twice")
        shape = tuple(expected[key].shape)
        value = np.asarray(value, dtype=np.float32)
        if value.shape != shape:
            # Only unit axes may differ (a bias [1] kept as [], an alpha [1, C, 1] as [C]).
            if value.squeeze().shape != np.empty(shape).squeeze().shape:
                raise AssetError(f"int8 export weight for {key!r} has shape {value.shape}, KModel's is {shape}")
            value = value.reshape(shape)
        out[key] = value

    def put_weight(module: str, weight: np.ndarray, transpose: bool = False) -> None:
        weight = weight.T if transpose else weight
        if f"{module}.weight_v" in expected:  # weight-normed: g * v / ||v|| == weight
            norm = np.sqrt((weight.astype(np.float64) ** 2).sum(axis=tuple(range(1, weight.ndim)), keepdims=True))
            # A channel quantized to all zeros: g = 0 with any nonzero v (0 / 0 would be NaN).
            put(f"{module}.weight_v", np.where(norm > 0, weight, 1.0))
            put(f"{module}.weight_g", norm)
        else:
            put(f"{module}.weight", weight)

    consumer = {name: node for node in graph.node for name in node.input}
    # 1. Anonymous weights, through the nodes that use them.
    done: set[str] = set()
    for node in graph.node:
        if node.op_type not in _WEIGHT_OPS or len(node.input) < 2:
            continue
        weight_name = node.input[1]
        if weight_name not in inits or weight_name in done or not _anonymous(weight_name):
            continue
        done.add(weight_name)
        module = _module_of(node.name, modules)
        if node.op_type == "DynamicQuantizeLSTM":
            _put_lstm(module, node, array, put)
        elif node.op_type in ("ConvInteger", "MatMulInteger"):
            weight = _dequantize(array(weight_name), _scale(weight_name, array), array(node.input[3]))
            put_weight(module, weight, transpose=node.op_type == "MatMulInteger")
        else:  # float Conv / ConvTranspose / MatMul weights
            put_weight(module, array(weight_name), transpose=node.op_type == "MatMul")
    # 2. Named initializers: KModel's names behind the export's component prefix.
    for name in inits:
        key = _named_key(name)
        if key is None:
            continue
        if name.endswith("weight_quantized"):
            base = name.removesuffix("_quantized")
            user = consumer[name]
            # The zero point the graph itself uses: the exporter shares equal initializers, so a
            # weight's own `_zero_point` may be absent (uint8 weights sit around 128, not 0).
            if user.op_type in ("ConvInteger", "MatMulInteger"):
                zero = array(user.input[3]) if len(user.input) > 3 and user.input[3] else np.zeros((), np.int32)
            else:
                zero = array(f"{base}_zero_point") if f"{base}_zero_point" in inits else np.zeros((), np.int32)
            module = key.removesuffix(".weight_quantized")
            weight = _dequantize(array(name), array(f"{base}_scale"), zero)
            put_weight(module, weight, transpose=user.op_type == "MatMulInteger")
        elif not re.search(r"_(scale|zero_point)$|_quantized", name) and not key.startswith(EXPORT_ONLY_PREFIXES):
            put(key, array(name))
    # 3. What the graph cannot hold, and the check that nothing else is missing.
    for key, value in expected.items():
        if key not in out and key.startswith(UNUSED_PREFIXES):
            out[key] = np.zeros(tuple(value.shape), np.float32)
        elif key not in out and _IDENTITY_NORM.search(key):
            # AdaIN's instance norm is affine only so that old exporters keep its channels
            # (kokoro's istftnet.py): trained without it, it is the identity, and the graph has none.
            out[key] = (np.ones if key.endswith("weight") else np.zeros)(tuple(value.shape), np.float32)
    missing = sorted(key for key in expected if key not in out and expected[key].is_floating_point())
    if missing:
        raise AssetError(f"the int8 export lacks {len(missing)} KModel weights: {', '.join(missing)}")
    result: dict[str, dict[str, torch.Tensor]] = {}
    for key, original in expected.items():
        component, _, local = key.partition(".")
        value = (
            torch.from_numpy(np.array(out[key])) if key in out else original
        )  # integer buffers (position_ids) as built
        result.setdefault(component, {})[local] = value.to(original.dtype).contiguous()
    return result


def _anonymous(name: str) -> bool:
    return name.startswith(("onnx::", "/"))


def _named_key(name: str) -> str | None:
    """KModel's key of a named initializer, or None for graph constants."""
    if name.startswith("decoder.decoder."):
        return "decoder." + name.removeprefix("decoder.decoder.")
    if (name.startswith("encoder.") and not name.startswith("encoder.predictor.text_encoder.lstms.")) or (
        name.startswith("encoder.predictor.text_encoder.lstms.") and ".fc." in name
    ):
        return name.removeprefix("encoder.")
    return None


def _module_of(node_name: str, modules: set[str]) -> str:
    """The KModel module a node belongs to: the longest tail of its scope that names one module."""
    scope = [part for part in node_name.strip("/").split("/")[:-1] if part]
    for start in range(len(scope)):
        tail = ".".join(scope[start:])
        matches = [name for name in modules if name == tail or name.endswith("." + tail)]
        if len(matches) == 1:
            return matches[0]
    # Scopes repeat a parent's name ("cnn.0/cnn.0.0"): try the last part alone.
    last = scope[-1] if scope else ""
    matches = [name for name in modules if name == last or name.endswith("." + last)]
    if len(matches) == 1:
        return matches[0]
    raise AssetError(f"node {node_name!r} of the int8 export matches no single KModel module ({matches[:4]})")


def _scale(weight_name: str, array: Callable[[str], np.ndarray]) -> np.ndarray:
    return array(weight_name.removesuffix("_quantized") + "_scale")


def _dequantize(quantized: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> Array:
    return ((quantized.astype(np.float32) - zero_point.astype(np.float32)) * scale.astype(np.float32)).astype(
        np.float32
    )


def _gates_to_torch(weight: np.ndarray) -> np.ndarray:
    """ONNX's gate blocks (i, o, f, c) along axis 0 -> torch's (i, f, g, o)."""
    i, o, f, c = np.split(weight, 4, axis=0)
    return np.concatenate([i, f, c, o], axis=0)


def _put_lstm(
    module: str, node: Any, array: Callable[[str], np.ndarray], put: Callable[[str, np.ndarray], None]
) -> None:
    # DynamicQuantizeLSTM: X, W, R, B, seq_lens, initial_h, initial_c, P, W_scale, W_zp, R_scale, R_zp.
    w, r, b = array(node.input[1]), array(node.input[2]), array(node.input[3])
    w_scale, w_zero, r_scale, r_zero = (array(node.input[index]) for index in (8, 9, 10, 11))
    for direction, suffix in enumerate(("", "_reverse")[: w.shape[0]]):
        w_d = _dequantize(w[direction], _per(w_scale, direction), _per(w_zero, direction)).T  # [4H, input]
        r_d = _dequantize(r[direction], _per(r_scale, direction), _per(r_zero, direction)).T
        bias_w, bias_r = np.split(b[direction], 2)
        put(f"{module}.weight_ih_l0{suffix}", _gates_to_torch(w_d))
        put(f"{module}.weight_hh_l0{suffix}", _gates_to_torch(r_d))
        put(f"{module}.bias_ih_l0{suffix}", _gates_to_torch(bias_w))
        put(f"{module}.bias_hh_l0{suffix}", _gates_to_torch(bias_r))


def _per(values: np.ndarray, direction: int) -> np.ndarray:
    """One direction's scale or zero point (the graph may share one for both)."""
    return np.asarray(values[direction] if values.ndim and values.shape[0] > 1 else values.reshape(-1)[0])


# --- the derived checkpoint on disk ---------------------------------------------------------------

DERIVATION_VERSION = 1
DERIVED_DIR = "derived-torch"


def int8_source(model_dir: Path) -> Path | None:
    """The shipped int8 export in `model_dir` (what `voicestream models fetch` places), if there."""
    path = model_dir / manifest()["onnx_model"]["file"]
    return path if path.is_file() else None


def derived_checkpoint(source: Path, config: Path, directory: Path | None = None) -> Path:
    """kokoro-v1_0.pth derived from the verified int8 export `source`, in `directory` (default:
    `derived-torch/` beside the model when writable, else voicestream's cache), with a sha256
    manifest (derived.py); derived once, reused while the source and this derivation match."""
    from voicestream.engine.models.torch_assets import CHECKPOINT_FILE

    spec = manifest()["onnx_model"]
    verify_file(source, spec["size"], spec["sha256"])
    if directory is None:
        beside = source.parent / DERIVED_DIR
        directory = beside if _writable(beside) else env.cache_dir() / DERIVED_DIR / spec["sha256"][:16]

    def derive(out: Path) -> list[str]:
        model = kmodel_architecture(config)  # every weight is replaced below
        state = derive_state_dicts(source, model)
        for name, child in model.named_children():
            child.load_state_dict(state[name], strict=True)
        save_checkpoint(model, out / CHECKPOINT_FILE)
        return [CHECKPOINT_FILE]

    ensure_derived(directory, spec["sha256"], DERIVATION_VERSION, (CHECKPOINT_FILE,), derive)
    return directory / CHECKPOINT_FILE


def _writable(directory: Path) -> bool:
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            return False
        existing = existing.parent
    try:
        with tempfile.TemporaryFile(dir=existing):
            return True
    except OSError:
        return False


def kmodel_architecture(config: Path) -> Any:
    """kokoro's KModel built from `config` with its fresh initialisation (no checkpoint read)."""
    from voicestream.engine.models.torch_assets import read_config
    from voicestream.engine.torch.kmodel import REPO_ID, import_kmodel

    kmodel_class = import_kmodel()
    with tempfile.TemporaryDirectory(prefix="voicestream-ckpt-") as scratch:
        # KModel loads whatever checkpoint it is given; an empty one leaves the fresh init in place.
        empty = Path(scratch) / "empty.pth"
        torch.save({}, empty)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (UserWarning, FutureWarning))
            return kmodel_class(repo_id=REPO_ID, config=read_config(config), model=str(empty)).eval()


def save_checkpoint(model: Any, path: Path) -> Path:
    """Save `model` in kokoro-v1_0.pth's format: {component name: its state dict}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({name: child.state_dict() for name, child in model.named_children()}, path)
    return path
