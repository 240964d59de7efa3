-- The formatted traceback of a failed attempt (bounded by the worker), for operators.
ALTER TABLE durq_attempts ADD COLUMN traceback TEXT;
