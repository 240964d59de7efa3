-- The W3C traceparent of the span that enqueued the job (set only when tracing is on),
-- so the span that runs it joins the same trace.
ALTER TABLE durq_jobs ADD COLUMN trace_context TEXT;
