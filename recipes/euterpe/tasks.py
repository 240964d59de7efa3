"""The transcode job: fetch the source, run ffmpeg, upload the outputs, each a durq stage.

Stages advance only in order (durq refuses anything else) and each is announced to the
requester's webhook. The job's storage credentials are durq job secrets, opened here only;
a 401/403 from the storage asks the requester for new ones (``durq.http_classifier``).
Temp files live in one folder per attempt, removed in ``finally`` whatever happens.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import durq

from .config import QUEUE, Settings
from .media import FORMATS, check_output_size, transcode
from .states import STAGES
from .storage import Storage

__all__ = ["RETRY", "TASK", "register_tasks"]

TASK = "euterpe.transcode"
#: Exponential backoff with jitter for the retryable classes (seed 003 §5).
RETRY = durq.Exponential(base=2.0, factor=2.0, jitter=0.5, cap=300.0)


def register_tasks(app: durq.App, settings: Settings) -> durq.Task[Any, Any]:
    @app.task(
        name=TASK,
        queue=QUEUE,
        pass_context=True,
        stages=STAGES,
        retry=RETRY,
        max_attempts=settings.max_attempts,
        classifier=durq.http_classifier,
    )
    def transcode_job(
        ctx: durq.JobContext,
        source: dict[str, str],
        output: dict[str, str],
        renditions: list[dict[str, Any]],
    ) -> dict[str, Any]:
        storage = Storage(settings, ctx.secrets)
        if settings.work_dir is not None:
            settings.work_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"euterpe-{ctx.job.id}-", dir=settings.work_dir))
        try:
            ctx.set_stage("fetching")
            size = storage.size(source["bucket"], source["key"])
            if size > settings.max_input_bytes:
                raise durq.Fail(
                    "input_too_large",
                    f"the source is {size} bytes, over EUTERPE_MAX_INPUT_BYTES="
                    f"{settings.max_input_bytes}",
                )
            local_source = work / ("source" + Path(source["key"]).suffix)
            storage.download(source["bucket"], source["key"], local_source)

            ctx.set_stage("processing")
            produced = []
            for rendition in renditions:
                suffix = FORMATS[rendition["format"]][0]
                local = work / f"{rendition['name']}{suffix}"
                transcode(
                    settings, local_source, local, rendition["format"], rendition.get("bitrate")
                )
                check_output_size(settings, rendition["name"], size, local.stat().st_size)
                produced.append((rendition, local))
                ctx.heartbeat()

            ctx.set_stage("uploading")
            outputs = []
            for rendition, local in produced:
                suffix, _, content_type = FORMATS[rendition["format"]]
                key = f"{output['prefix']}{rendition['name']}{suffix}"
                storage.upload(local, output["bucket"], key, content_type)
                outputs.append(
                    {
                        "name": rendition["name"],
                        "format": rendition["format"],
                        "bucket": output["bucket"],
                        "key": key,
                        "bytes": local.stat().st_size,
                    }
                )
            ctx.report(processed=len(outputs), summary=f"{len(outputs)} output(s) uploaded")
            return {"source_bytes": size, "outputs": outputs}
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return transcode_job
