"""kokoro's KModel run in two parts: encode a sentence once, decode it window by window.

The same cut as the ONNX engine's (kokoro_split.py, docs/engine.md), made in PyTorch by calling
KModel's own submodules in the order `KModel.forward_with_tokens`, `Decoder.forward` and
`Generator.forward` call them; kokoro itself is not changed.

- `encode` (once per sentence): ALBERT, prosody predictor and text encoder -> the frame-aligned
  text features `asr`, the pitch and energy curves `f0`/`energy` (two points per frame), the
  decoder's half of the style, the frames per token, and the harmonic source's excitation for
  the whole sentence (one value per sample, with each harmonic's running phase: source.py, which
  computes what kokoro's source module does). That source is where the sentence-wide state of
  the decoder lives: `SineGen` integrates each harmonic's frequency with a cumulative sum from
  the sentence's start (a window that summed from its own start would restart every harmonic's
  phase), and it draws Gaussian noise for every sample. Drawn here, once, the noise comes from
  the same random stream in the same order as in `KModel.forward`, so seeded alike,
  whole-sentence decoding equals forward bit for bit.
- `join` (a long piece, its head encoded first: streaming/lookahead.py): the head's features
  before the join, the whole piece's from it, the source's phase continuing from the head's.
- `decode_window` (per window of frames): the source's STFT over the window's span, the decoder
  and the iSTFTNet generator. Everything there is local except the instance norms (AdaIN), which
  normalise over the span they are given (the generator's may carry their statistics from the
  piece's earlier windows, as the ONNX generator's do: norms.py, `carried_norms`): see
  docs/engine.md on what that means for seams.

Why the excitation and not just the phase (the ONNX cut's choice): the generator feeds the
*angle* of the source's STFT to convolutions, and an angle jumps by 2*pi where a bin crosses
the negative real axis. Upsampling a window's phase x300 itself rounds the interpolation
weights differently than the sentence's (its sample indices are local), the sines then differ
in the last bits, some bins' angles flip by 2*pi, and a window's audio differs from the
sentence's everywhere (~12 dB SNR, whatever the context). Sliced from the sentence's
excitation, a window's source samples are the sentence's exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from voicestream.engine.base import EngineError, FloatAudio
from voicestream.engine.streaming.lookahead import frames_before
from voicestream.engine.streaming.pipeline import decode_windows
from voicestream.engine.streaming.windows import Window, WindowPlan
from voicestream.engine.torch.fused import check_fusable, fused_resblock
from voicestream.engine.torch.norms import CarriedNorms, NormCarry, adain_resblock
from voicestream.engine.torch.source import HarmonicSource


@dataclass(frozen=True, slots=True)
class TorchSentenceFeatures:
    """Everything the decoder needs for one sentence (on the model's device), plus durations."""

    asr: torch.Tensor  # [1, 512, frames]
    f0: torch.Tensor  # [1, 2 * frames]
    energy: torch.Tensor  # [1, 2 * frames]
    decoder_style: torch.Tensor  # [1, 128]
    source: torch.Tensor  # [1, samples]: the harmonic source's excitation (phase summed over the sentence)
    cycles: torch.Tensor  # [1, 9, 2 * frames] float64: each harmonic's running phase (source.py)
    durations: torch.Tensor  # [tokens + 2] int64, on the CPU: frames per token, pad tokens included

    @property
    def frames(self) -> int:
        return int(self.asr.shape[2])


class TorchSplitRuntime:
    """Encoder and window decoder over one loaded KModel; holds no per-request state (thread-safe)."""

    def __init__(self, model: Any, *, carried_norms: bool = False, fused: bool = True) -> None:
        """`carried_norms`: a piece's windows carry the generator's norm statistics from one to
        the next (norms.py), as the ONNX engine's do. Off by default: on this model it moved
        every window nearer the whole piece but made its seams no better (docs/engine.md, "No
        carried statistics on torch"). `fused`: the generator's blocks in fewer passes over
        memory (fused.py: the same function, rounded differently); False runs kokoro's own
        modules, whose samples are KModel.forward's bit for bit."""
        self.model = model
        self.carried_norms = carried_norms
        self.fused = fused
        if fused:
            generator = model.decoder.generator
            for block in [*generator.resblocks, *generator.noise_res]:
                check_fusable(block)
        # One frame: two pitch points, each upsampled x(upsample rates x iSTFT hop) = 600 samples.
        self.samples_per_frame = 2 * int(model.decoder.generator.m_source.l_sin_gen.upsample_scale)
        self.harmonic_source = HarmonicSource(model.decoder.generator.m_source)

    @property
    def device(self) -> torch.device:
        device: torch.device = self.model.device
        return device

    # --- part 1 ------------------------------------------------------------------------------

    def input_ids(self, phonemes: str | Sequence[int]) -> torch.Tensor:
        """[1, N+2] token ids of `phonemes` wrapped in pads, as KModel.forward makes them (ids
        given as such are taken as they are: the pipeline tokenizes with the same vocabulary)."""
        vocab = self.model.vocab
        ids = [vocab[p] for p in phonemes if p in vocab] if isinstance(phonemes, str) else list(phonemes)
        if len(ids) + 2 > self.model.context_length:
            raise EngineError(f"{len(ids)} phonemes exceed the model's {self.model.context_length - 2}")
        return torch.tensor([[0, *ids, 0]], dtype=torch.long, device=self.device)

    def encode(self, phonemes: str | Sequence[int], ref_s: torch.Tensor, speed: float) -> TorchSentenceFeatures:
        """Part 1 for one sentence (its phonemes, or their vocabulary ids). `ref_s`: the voice's
        [1, 256] row. Runs under torch.inference_mode() (grad mode is thread-local: entered
        around model calls only, never across a yield into the consumer's code)."""
        with torch.inference_mode():
            return self._encode(self.input_ids(phonemes), ref_s, speed)

    def _encode(self, input_ids: torch.Tensor, ref_s: torch.Tensor, speed: float) -> TorchSentenceFeatures:
        model = self.model
        ref_s = ref_s.to(self.device)
        tokens = input_ids.shape[-1]
        lengths = torch.full((1,), tokens, dtype=torch.long, device=self.device)
        text_mask = torch.zeros((1, tokens), dtype=torch.bool, device=self.device)  # one unpadded sentence
        bert = model.bert(input_ids, attention_mask=(~text_mask).int())
        d_en = model.bert_encoder(bert).transpose(-1, -2)
        prosody_style = ref_s[:, 128:]
        d = model.predictor.text_encoder(d_en, prosody_style, lengths, text_mask)
        x, _ = model.predictor.lstm(d)
        duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(axis=-1) / speed
        durations = torch.round(duration).clamp(min=1).long().squeeze(0)
        frames = int(durations.sum())
        # Token -> frame alignment, one 1 per frame column.
        alignment = torch.zeros((tokens, frames), device=self.device)
        token_of_frame = torch.repeat_interleave(torch.arange(tokens, device=self.device), durations)
        alignment[token_of_frame, torch.arange(frames, device=self.device)] = 1
        alignment = alignment.unsqueeze(0)
        f0, energy = model.predictor.F0Ntrain(d.transpose(-1, -2) @ alignment, prosody_style)
        asr = model.text_encoder(input_ids, lengths, text_mask) @ alignment
        # Generator.forward's first step, over the whole sentence: the source module's excitation.
        source = self.harmonic_source.whole(f0)
        return TorchSentenceFeatures(
            asr=asr,
            f0=f0,
            energy=energy,
            decoder_style=ref_s[:, :128],
            source=source.samples,
            cycles=source.cycles,
            durations=durations.cpu(),
        )

    def join(self, head: TorchSentenceFeatures, whole: TorchSentenceFeatures, token: int) -> TorchSentenceFeatures:
        """The head's frames before `token`, then the whole piece's from `token` on (the
        pipeline's `Join`, streaming/lookahead.py).

        The source: the head's samples before the join, which the windows decoded from the head
        have played, then the excitation of the joined pitch curve from the join on, each
        harmonic's phase continuing from the head's running phase at the join (source.py), with
        fresh noise. So no harmonic jumps at the join: only its frequency changes, from the
        head's pitch to the whole piece's."""
        head_frames = frames_before(self.durations(head), token)
        whole_frames = frames_before(self.durations(whole), token)
        if not 0 < head_frames < head.frames or not 0 < whole_frames < whole.frames:
            raise ValueError(f"token {token} does not join inside both encodings")
        h, w = 2 * head_frames, 2 * whole_frames  # f0, energy and cycles have two points per frame
        with torch.inference_mode():
            f0 = torch.cat([head.f0[:, :h], whole.f0[:, w:]], dim=1)
            rest = self.harmonic_source.continued(f0, head.cycles[:, :, :h])
            return TorchSentenceFeatures(
                asr=torch.cat([head.asr[:, :, :head_frames], whole.asr[:, :, whole_frames:]], dim=2),
                f0=f0,
                energy=torch.cat([head.energy[:, :h], whole.energy[:, w:]], dim=1),
                decoder_style=whole.decoder_style,
                source=torch.cat([head.source[:, : head_frames * self.samples_per_frame], rest.samples], dim=1),
                cycles=rest.cycles,
                durations=torch.cat([head.durations[: token + 1], whole.durations[token + 1 :]]),
            )

    # --- part 2 ------------------------------------------------------------------------------

    def decode_window(
        self, features: TorchSentenceFeatures, window: Window, carry: NormCarry | None = None
    ) -> torch.Tensor:
        """Audio of the window's whole span [span_start, span_end) (1-D, samples_per_frame a frame).
        `carry`: the generator's norms blended with (and recorded for) the piece's other windows
        (norms.py); None: kokoro's own modules, each norm over this span alone.

        Call under torch.inference_mode()."""
        decoder = self.model.decoder
        a, b = window.span_start, window.span_end
        if not 0 <= a < b <= features.frames:
            raise ValueError(f"window span [{a}, {b}) is outside the sentence's {features.frames} frames")
        style = features.decoder_style
        f0 = decoder.F0_conv(features.f0[:, 2 * a : 2 * b].unsqueeze(1))
        energy = decoder.N_conv(features.energy[:, 2 * a : 2 * b].unsqueeze(1))
        asr = features.asr[:, :, a:b]
        x = decoder.encode(torch.cat([asr, f0, energy], dim=1), style)
        asr_res = decoder.asr_res(asr)
        residual = True
        for block in decoder.decode:
            if residual:
                x = torch.cat([x, asr_res, f0, energy], dim=1)
            x = block(x, style)
            if block.upsample_type != "none":
                residual = False
        return self._generate(x, style, self._source_spectrum(features, a, b), carry)

    def _source_spectrum(self, features: TorchSentenceFeatures, a: int, b: int) -> torch.Tensor:
        """The STFT (magnitudes ++ angles) of the sentence's source over frames [a, b), as Generator makes it."""
        spf = self.samples_per_frame
        magnitude, angle = self.model.decoder.generator.stft.transform(features.source[:, a * spf : b * spf])
        return torch.cat([magnitude, angle], dim=1)

    def _generate(
        self, x: torch.Tensor, style: torch.Tensor, source: torch.Tensor, carry: NormCarry | None
    ) -> torch.Tensor:
        """Generator.forward after its source module: upsampling blocks, then the inverse STFT."""
        generator = self.model.decoder.generator

        def resblock(block: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
            if carry is not None:
                return adain_resblock(block, x, style, carry)
            out: torch.Tensor = fused_resblock(block, x, style) if self.fused else block(x, style)
            return out

        for i in range(generator.num_upsamples):
            x = F.leaky_relu(x, negative_slope=0.1)
            x_source = resblock(generator.noise_res[i], generator.noise_convs[i](source))
            x = generator.ups[i](x)
            if i == generator.num_upsamples - 1:
                x = generator.reflection_pad(x)
            x = x + x_source
            blocks = generator.resblocks[i * generator.num_kernels : (i + 1) * generator.num_kernels]
            xs = resblock(blocks[0], x)
            for block in blocks[1:]:
                xs += resblock(block, x)
            x = xs / generator.num_kernels
        x = generator.conv_post(F.leaky_relu(x))
        bins = generator.post_n_fft // 2 + 1
        audio: torch.Tensor = generator.stft.inverse(torch.exp(x[:, :bins, :]), torch.sin(x[:, bins:, :]))
        return audio.reshape(-1)

    # --- the pipeline's runtime (streaming/pipeline.py) -------------------------------------

    def durations(self, features: TorchSentenceFeatures) -> npt.NDArray[np.int64]:
        """Frames per token [1, tokens + 2], the pads included."""
        return np.asarray(features.durations.numpy(), dtype=np.int64)[None]

    def window_decoder(self) -> Callable[[TorchSentenceFeatures, Window], FloatAudio]:
        """One piece's windows in order: the audio of each window's span, its norms over that
        span alone; or, with `carried_norms`, the generator's norms of each blended with the
        statistics carried from the windows before it (norms.py). Either way the first window
        carries nothing: decoded alone, a piece is KModel.forward's samples."""
        if not self.carried_norms:
            return self.decode_audio
        carried: CarriedNorms | None = None

        def decode(features: TorchSentenceFeatures, window: Window) -> FloatAudio:
            nonlocal carried
            carry = NormCarry(carried, window.frames)
            audio = self.decode_audio(features, window, carry)
            carried = carry.after()
            return audio

        return decode

    def decode_audio(
        self, features: TorchSentenceFeatures, window: Window, carry: NormCarry | None = None
    ) -> FloatAudio:
        """`decode_window` under inference mode, as float32 samples on the CPU."""
        with torch.inference_mode():
            audio = self.decode_window(features, window, carry).float().cpu().numpy()
        return np.asarray(audio, dtype=np.float32)

    def stream(
        self, features: TorchSentenceFeatures, plan: WindowPlan | None, *, ahead: int = 0, behind: bool = False
    ) -> Generator[FloatAudio, None, None]:
        """Each window's audio as soon as it is decoded (one window when `plan` is None): the
        shared pipeline's windows over this runtime, unpaced.

        A generator: nothing runs until the consumer asks for the next window, so a consumer
        that stops iterating (a cancelled request) stops the work between windows."""
        for decoded in decode_windows(self, features, plan, ahead=ahead, behind=behind):
            yield decoded.samples
