"""Transcoding with the real ``ffmpeg`` binary, and the output-size rule of seed 003 §11."""

from __future__ import annotations

import subprocess
from pathlib import Path

import durq

from .config import Settings

__all__ = ["FORMATS", "check_output_size", "transcode"]

#: Output formats: the file suffix, ffmpeg's audio codec and the object's content type.
FORMATS: dict[str, tuple[str, str, str]] = {
    "mp3": (".mp3", "libmp3lame", "audio/mpeg"),
    "ogg": (".ogg", "libvorbis", "audio/ogg"),
    "aac": (".m4a", "aac", "audio/mp4"),
    "flac": (".flac", "flac", "audio/flac"),
    "wav": (".wav", "pcm_s16le", "audio/wav"),
}


def transcode(
    settings: Settings, source: Path, target: Path, fmt: str, audio_bitrate: str | None
) -> None:
    """``ffmpeg -i source target``; a source ffmpeg cannot read fails the job at once
    (another attempt would read the same bytes)."""
    _, codec, _ = FORMATS[fmt]
    command = [settings.ffmpeg_binary, "-nostdin", "-hide_banner", "-loglevel", "error", "-y"]
    command += ["-i", str(source), "-vn", "-c:a", codec]
    if audio_bitrate:
        command += ["-b:a", audio_bitrate]
    command.append(str(target))
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=settings.ffmpeg_timeout_seconds, check=False
        )
    except FileNotFoundError:
        raise durq.Fail(
            "ffmpeg_missing",
            f"{settings.ffmpeg_binary!r} is not installed here: install ffmpeg "
            "(apt-get install ffmpeg) or set EUTERPE_FFMPEG_BINARY",
        ) from None
    except subprocess.TimeoutExpired:
        raise durq.Retry(
            code="ffmpeg_timeout",
            message=f"ffmpeg ran past EUTERPE_FFMPEG_TIMEOUT_SECONDS="
            f"{settings.ffmpeg_timeout_seconds:g}",
        ) from None
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise durq.Fail(
            "transcode_failed",
            f"ffmpeg exited with {done.returncode}: {(reason or ['no message'])[-1][:300]}",
        )


def check_output_size(settings: Settings, name: str, source_bytes: int, output_bytes: int) -> None:
    """Each output stays within ``output_max_ratio`` times the source when the source is larger
    than ``output_ratio_threshold_bytes`` (200 % and 1 GB by default)."""
    if source_bytes <= settings.output_ratio_threshold_bytes:
        return
    limit = settings.output_max_ratio * source_bytes
    if output_bytes > limit:
        raise durq.Fail(
            "output_too_large",
            f"output {name!r} is {output_bytes} bytes, over {settings.output_max_ratio:.0%} of "
            f"the {source_bytes}-byte source; choose a lower bitrate or another format",
        )
