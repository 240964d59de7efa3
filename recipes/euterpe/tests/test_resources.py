"""Seed 003 §11: a maximum input size, outputs at most 200 % of a large source, and temp
files removed in ``finally`` even when a task fails midway."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .conftest import Stand
from .world import make_tone


def _outputs_under(stand: Stand, prefix: str) -> list[str]:
    listed = stand.s3.s3.list_objects_v2(Bucket=stand.bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_temp_files_removed_when_a_task_fails_midway(
    make_stand: Callable[..., Stand], work_dir: Path
) -> None:
    stand = make_stand()
    stand.put("in/noise.wav", data=b"not audio at all " * 512)
    accepted = stand.submit(source="in/noise.wav")
    job = stand.euterpe.app.run_job(accepted.json()["job_id"])
    # fetched (the download happened), then ffmpeg refused the bytes: failed, not retried
    assert job.state == "dead_letter" and job.last_error_code == "transcode_failed"
    status = stand.status(job.id).json()
    assert status["status"] == "dead_letter"
    assert status["error"]["code"] == "transcode_failed" and status["error"]["attempt"] == 1
    assert work_dir.is_dir() and list(work_dir.iterdir()) == []


def test_output_size_rule_applies_to_sources_over_the_threshold(
    make_stand: Callable[..., Stand], tmp_path: Path, work_dir: Path
) -> None:
    small_mp3 = make_tone(tmp_path / "tone.mp3", 2.0, "-b:a", "32k")
    size = small_mp3.stat().st_size
    flac = [{"name": "lossless", "format": "flac"}]  # several times the mp3's size

    strict = make_stand(output_ratio_threshold_bytes=size - 1)  # the source counts as large
    strict.put("in/tone.mp3", small_mp3)
    accepted = strict.submit(source="in/tone.mp3", renditions=flac)
    job = strict.euterpe.app.run_job(accepted.json()["job_id"])
    assert job.state == "dead_letter" and job.last_error_code == "output_too_large"
    assert "200%" in (job.last_error or "")
    assert _outputs_under(strict, job.args["output"]["prefix"]) == []
    assert list(work_dir.iterdir()) == []

    lenient = make_stand(output_ratio_threshold_bytes=size)  # not over the threshold
    lenient.put("in/tone.mp3", small_mp3)
    accepted = lenient.submit(key="lenient", source="in/tone.mp3", renditions=flac)
    job = lenient.euterpe.app.run_job(accepted.json()["job_id"])
    assert job.state == "succeeded", job.last_error
    (output,) = job.result["outputs"]
    assert output["bytes"] > 2 * size
    assert _outputs_under(lenient, output["key"]) == [output["key"]]


def test_inputs_over_the_maximum_size_are_refused_before_download(
    make_stand: Callable[..., Stand], work_dir: Path, tone: Path
) -> None:
    stand = make_stand(max_input_bytes=tone.stat().st_size - 1)
    job = stand.euterpe.app.run_job(stand.submit().json()["job_id"])
    assert job.state == "dead_letter" and job.last_error_code == "input_too_large"
    assert list(work_dir.iterdir()) == []
