"""``VideoRecorder``: keeps the pixel frames an env emits and hands them to a logger as a video."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rl_envs.transforms._utils import NestedKey
from rl_envs.transforms.transform import Transform

__all__ = ["VideoRecorder"]


def _as_chw(frame: torch.Tensor) -> torch.Tensor:
    """One frame ``[C, H, W]`` with three channels (channels-last and grayscale accepted)."""
    if frame.ndim == 2:
        frame = frame.unsqueeze(0)
    if frame.shape[-1] in (1, 3, 4) and frame.shape[0] not in (1, 3, 4):
        frame = frame.permute(2, 0, 1)  # [H, W, C] -> [C, H, W]
    if frame.shape[0] == 1:
        frame = frame.expand(3, *frame.shape[1:])  # grayscale: video codecs want RGB
    return frame[:3]


def _grid(frames: torch.Tensor) -> torch.Tensor:
    """``[B, C, H, W]`` frames tiled into one ``[C, rows * H, cols * W]`` frame (no padding)."""
    b, c, h, w = frames.shape
    cols = math.ceil(math.sqrt(b))
    rows = math.ceil(b / cols)
    canvas = frames.new_zeros(c, rows * h, cols * w)
    for i in range(b):
        r, col = divmod(i, cols)
        canvas[:, r * h : (r + 1) * h, col * w : (col + 1) * w] = frames[i]
    return canvas


class VideoRecorder(Transform):
    """Records the frames under ``in_keys`` (default ``"pixels"``) and logs them as a video.

    TorchRL's ``torchrl.record.VideoRecorder``. Each call (each reset and step output) adds
    a frame to :attr:`obs` every ``skip`` calls; :meth:`dump` sends the frames to
    ``logger.log_video(name=tag, video=..., step=...)`` as one ``[1, T, 3, H, W]`` uint8
    tensor and empties the buffer. Frames may be ``[C, H, W]`` or ``[H, W, C]``; grayscale is
    repeated to three channels. A batch of frames (a batched env below the recorder) becomes
    one grid frame per call, or ``B`` separate frames with ``make_grid=False``. The data
    passes through unchanged.

    Args:
        logger: any object with ``log_video(name=, video=, step=, **kwargs)`` (the
            ``rl_trainers`` loggers), or ``None`` to only keep the frames.
        tag: the video's name in the logger.
        in_keys: the pixel entries (default ``["pixels"]``).
        skip: keep one call out of ``skip`` (default 1: every frame).
        center_crop: crop each frame to a centred square of this side.
        make_grid: tile batched frames into one frame; default: when the recorder sits in
            an env with a batch, else keep the frames separate.
        out_keys: kept for TorchRL parity (the data is not modified).
        fps: frames per second, passed to the logger.
        max_frames: keep at most this many frames until the next :meth:`dump`.
        dump_on_done: call :meth:`dump` when a step's ``"done"`` is set.
        **kwargs: passed to ``logger.log_video``.

    Raises:
        ValueError: ``max_frames`` is not a positive integer, or ``skip`` < 1.

    Example:
        >>> recorder = VideoRecorder(None, None)
        >>> _ = recorder._apply_transform(torch.zeros(8, 8, 3, dtype=torch.uint8))
        >>> recorder.obs[0].shape
        torch.Size([3, 8, 8])
    """

    def __init__(
        self,
        logger: Any,
        tag: str | None,
        in_keys: Sequence[NestedKey] | None = None,
        skip: int | None = None,
        center_crop: int | None = None,
        make_grid: bool | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        fps: int | None = None,
        max_frames: int | None = None,
        dump_on_done: bool = False,
        **kwargs: Any,
    ) -> None:
        in_keys = ["pixels"] if in_keys is None else in_keys
        super().__init__(in_keys, out_keys)
        if max_frames is not None and (not isinstance(max_frames, int) or max_frames < 1):
            raise ValueError(
                f"VideoRecorder: max_frames must be a positive integer, got {max_frames!r}."
            )
        skip = 1 if skip is None else skip
        if skip < 1:
            raise ValueError(f"VideoRecorder: skip must be >= 1, got {skip}.")
        self.logger = logger
        self.tag = tag
        self.skip = skip
        self.center_crop = center_crop
        self.make_grid = make_grid
        self.fps = fps
        self.max_frames = max_frames
        self.dump_on_done = dump_on_done
        self.video_kwargs = kwargs
        self.obs: list[torch.Tensor] = []
        self.count = 0

    def _in_batched_env(self) -> bool:
        env, _ = self._env_and_index()
        return env is not None and env.batch_size.numel() > 1

    def _crop(self, frame: torch.Tensor) -> torch.Tensor:
        if self.center_crop is None:
            return frame
        h, w = frame.shape[-2:]
        top, left = max((h - self.center_crop) // 2, 0), max((w - self.center_crop) // 2, 0)
        return frame[..., top : top + self.center_crop, left : left + self.center_crop]

    def _add(self, frame: torch.Tensor) -> None:
        if self.max_frames is None or len(self.obs) < self.max_frames:
            self.obs.append(self._crop(frame).detach().cpu())

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        self.count += 1
        if (self.count - 1) % self.skip:
            return observation
        if observation.ndim <= 3:  # one frame
            self._add(_as_chw(observation))
            return observation
        frames = observation.reshape(-1, *observation.shape[-3:])  # every batch dim flattened
        chw = torch.stack([_as_chw(f) for f in frames])
        grid = self.make_grid if self.make_grid is not None else self._in_batched_env()
        if grid:
            self._add(_grid(chw))
        else:
            for frame in chw:
                self._add(frame)
        return observation

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict = self._call(next_tensordict)
        if self.dump_on_done:
            done = next_tensordict.get("done", None)
            if done is not None and bool(done.any()):
                self.dump()
        return next_tensordict

    def dump(self, suffix: str | None = None, step: int | None = None) -> None:
        """Send the recorded frames to the logger as one video, then empty :attr:`obs`.

        Args:
            suffix: appended to ``tag`` (``"<tag>_<suffix>"``).
            step: the logger's step.
        """
        if self.obs and self.logger is not None:
            video = torch.stack(self.obs).unsqueeze(0)
            name = self.tag if suffix is None else f"{self.tag}_{suffix}"
            kwargs = dict(self.video_kwargs)
            if self.fps is not None:
                kwargs["fps"] = self.fps
            self.logger.log_video(name=name, video=video, step=step, **kwargs)
        self.obs.clear()
        self.count = 0

    def to_animation(self, title: str | None = None, clear: bool = True) -> Any:
        """The recorded frames as a matplotlib ``ArtistAnimation`` (matplotlib needed).

        Args:
            title: the figure's title.
            clear: empty :attr:`obs` afterwards, as :meth:`dump` does.
        """
        import matplotlib.pyplot as plt
        from matplotlib.animation import ArtistAnimation

        fig, ax = plt.subplots()
        ax.axis("off")
        if title is not None:
            ax.set_title(title)
        interval = 1000 / self.fps if self.fps else 50
        artists = [[ax.imshow(frame.permute(1, 2, 0).numpy(), animated=True)] for frame in self.obs]
        animation = ArtistAnimation(fig, artists, interval=interval, blit=True)
        plt.close(fig)
        if clear:
            self.obs.clear()
            self.count = 0
        return animation
