"""``make chaos``: durq's promises checked under faults, on a PostgreSQL of its own.

Jobs of :mod:`tests.chaos.tasks` (each execution recorded in a side table) are enqueued
while three ``durq worker`` processes drain them; one job in ten has a webhook, delivered
to a real receiver on a free port. Every ``--fault-every`` seconds one fault, in turn:

* ``sigkill``: SIGKILL a random worker (another one is started at once);
* ``terminate``: ``pg_terminate_backend`` every durq connection;
* ``restart-fast`` / ``restart-immediate``: ``pg_ctl restart -m fast|immediate``;
* ``sigstop``: SIGSTOP a random worker for longer than its lease, then SIGCONT.

When everything is drained, the run compares durq's rows with the side table and prints
one table. It exits 1 on any lost, stuck or double-completed job, any execution beyond
the first that no killed or lost attempt explains, any missing attempt record, or any
webhook event not delivered.

    python -m tests.chaos.run --jobs 20000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg

import durq
from durq.settings import Settings

from ..outbox.receiver import SECRET, Receiver, serving
from ..worker.support import REPO, durq_env
from . import tasks
from .cluster import Cluster, cluster
from .tasks import SIDE_TABLE

FAULTS = ("sigkill", "terminate", "restart-fast", "restart-immediate", "sigstop")
MONITOR = "durq-chaos-monitor"  # the run's own connection: never a fault's target
DATABASE = "chaos"
WEBHOOKS: dict[str, Any] = {
    "webhook_secrets": {"*": [SECRET]},
    "webhook_backoff_base": 0.1,
    "webhook_backoff_cap": 1.0,
    "webhook_max_attempts": 100,
    "webhook_lease_seconds": 3.0,
    "webhook_poll_min": 0.1,
    "webhook_poll_max": 0.3,
}


@dataclass
class Config:
    jobs: int = 20_000
    #: Jobs enqueued per second while the workers drain (enqueue runs under the faults too).
    feed_rate: float = 1_000.0
    webhook_every: int = 10
    workers: int = 3
    concurrency: int = 8
    lease_seconds: float = 3.0
    heartbeat_seconds: float = 1.0
    fault_every: float = 2.0
    faults: tuple[str, ...] = FAULTS
    timeout: float = 900.0
    seed: int = 0
    log_dir: Path | None = None


@dataclass
class Fault:
    kind: str
    started: float
    ended: float = 0.0
    #: Seconds from its end until jobs succeeded again; None if the next fault came first.
    recovered: float | None = None


@dataclass
class Report:
    jobs: int
    exactly_once: int = 0
    lost: int = 0
    stuck: int = 0
    double: int = 0
    extra_executions: int = 0
    explained: int = 0
    attempts_missing: int = 0
    events: int = 0
    events_delivered: int = 0
    events_received: int = 0
    duplicate_deliveries: int = 0
    drain_seconds: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    worker_exits: list[int | None] = field(default_factory=list)
    exited_early: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def unexplained(self) -> int:
        return self.extra_executions - self.explained

    @property
    def ok(self) -> bool:
        return not self.problems

    def check(self) -> None:
        for name, value in (
            ("lost", self.lost),
            ("stuck in running", self.stuck),
            ("double-completed", self.double),
            ("unexplained extra executions", self.unexplained),
            ("attempt records missing", self.attempts_missing),
            ("webhook events not delivered", self.events - self.events_delivered),
            ("delivered events never received", self.events_delivered - self.events_received),
        ):
            if value:
                self.problems.append(f"{value} {name}")
        unclean = [code for code in self.worker_exits if code != 0]
        if unclean:
            self.problems.append(f"workers that did not stop cleanly at the end: {unclean}")
        missing = set(FAULTS) - {f.kind for f in self.faults}
        if missing:
            self.problems.append(f"fault kinds never injected: {', '.join(sorted(missing))}")

    def table(self) -> str:
        rows = [
            ("jobs", f"{self.jobs}"),
            ("succeeded exactly once", f"{self.exactly_once}"),
            ("lost", f"{self.lost}"),
            ("stuck in running", f"{self.stuck}"),
            ("double-completed", f"{self.double}"),
            ("executions beyond the first", f"{self.extra_executions}"),
            ("  of which a killed or lost attempt", f"{self.explained}"),
            ("  unexplained", f"{self.unexplained}"),
            ("attempt records missing", f"{self.attempts_missing}"),
            (
                "webhook events / delivered / received",
                f"{self.events} / {self.events_delivered} / {self.events_received}",
            ),
            ("duplicate deliveries (at-least-once)", f"{self.duplicate_deliveries}"),
            ("time to drain", f"{self.drain_seconds:.1f} s"),
            ("workers that exited by themselves", f"{len(self.exited_early)}"),
            (
                "workers stopped cleanly at the end",
                f"{self.worker_exits.count(0)}/{len(self.worker_exits)}",
            ),
        ]
        by_kind: dict[str, list[Fault]] = defaultdict(list)
        for fault in self.faults:
            by_kind[fault.kind].append(fault)
        for kind in FAULTS:
            faults = by_kind.get(kind, [])
            times = [f.recovered for f in faults if f.recovered is not None]
            lasted = statistics.median([f.ended - f.started for f in faults] or [0.0])
            overlapped = len(faults) - len(times)
            text = f"{len(faults)}x, lasting {lasted:.2f} s; jobs succeed again after "
            if times:
                text += f"median {statistics.median(times):.2f} s, max {max(times):.2f} s"
            else:
                text += "n/a"
            if overlapped:
                text += f" ({overlapped} before the next fault: no)"
            rows.append((f"fault {kind}", text))
        width = max(len(name) for name, _ in rows)
        lines = [f"| {'':<{width}} | result |", f"|{'-' * (width + 2)}|--------|"]
        lines += [f"| {name:<{width}} | {value} |" for name, value in rows]
        lines.append("")
        lines.append("PASS" if self.ok else "FAIL: " + "; ".join(self.problems))
        return "\n".join(lines)


class Sampler:
    """Counts succeeded and unfinished jobs every 0.1 s on a connection of its own
    (reconnected after each fault); the history gives each fault's recovery time."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[tuple[float, int]] = []
        self.unfinished = -1
        self.undelivered = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chaos-sampler")
        self._conn: psycopg.Connection[Any] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self.url, autocommit=True, connect_timeout=2, application_name=MONITOR
                    )
                row = self._conn.execute(
                    "SELECT count(*) FILTER (WHERE state = 'succeeded'), "
                    "count(*) FILTER (WHERE state IN ('queued', 'running', 'retry_wait')), "
                    "(SELECT count(*) FROM durq_outbox WHERE state IN ('pending', 'delivering')) "
                    "FROM durq_jobs"
                ).fetchone()
            except psycopg.Error:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                continue
            assert row is not None
            self.samples.append((time.monotonic(), int(row[0])))
            self.unfinished, self.undelivered = int(row[1]), int(row[2])

    def succeeded_at(self, at: float) -> int:
        before = [n for t, n in self.samples if t <= at]
        return before[-1] if before else 0

    def resumed_after(self, at: float) -> float | None:
        base = self.succeeded_at(at)
        for t, n in self.samples:
            if t > at and n > base:
                return t - at
        return None


class Workers:
    """``durq worker`` processes; a killed one is replaced at once."""

    def __init__(self, url: str, config: Config, log_dir: Path) -> None:
        self.url = url
        self.config = config
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []  # the ones working now
        self.stopped: set[int] = set()
        #: Exit codes of workers that exited by themselves (e.g. started while the server
        #: was down: a worker refuses to start without its database); each was replaced.
        self.exited: list[int] = []
        self._started = 0
        self._env = durq_env(url, **_env(WEBHOOKS))

    def start(self) -> subprocess.Popen[bytes]:
        self._started += 1
        c = self.config
        log = (self.log_dir / f"worker-{self._started}.log").open("wb")
        command = [sys.executable, "-m", "durq.cli.main", "worker"]
        command += ["--app", "tests.chaos.tasks:app", "--concurrency", str(c.concurrency)]
        command += ["--lease-seconds", str(c.lease_seconds), "--poll-interval", "0.2"]
        command += ["--heartbeat-seconds", str(c.heartbeat_seconds)]
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            env={**self._env, "POD_NAME": f"chaos-{self._started}"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def replace_exited(self) -> None:
        for proc in list(self.procs):
            code = proc.poll()
            if code is not None:
                self.procs.remove(proc)
                self.exited.append(code)
                self.start()

    def kill_one(self, rng: random.Random) -> None:
        victim = rng.choice(self.alive())
        victim.kill()
        victim.wait(10)
        self.procs.remove(victim)
        self.stopped.discard(victim.pid)
        self.start()

    def stop_one(self, rng: random.Random, seconds: float) -> None:
        running = [p for p in self.alive() if p.pid not in self.stopped]
        if not running:
            return
        victim = rng.choice(running)
        os.kill(victim.pid, signal.SIGSTOP)
        self.stopped.add(victim.pid)
        timer = threading.Timer(seconds, self._resume, (victim,))
        timer.daemon = True
        timer.start()

    def _resume(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.pid in self.stopped and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        self.stopped.discard(proc.pid)

    def stop_all(self) -> list[int | None]:
        for proc in self.alive():
            if proc.pid in self.stopped:
                self._resume(proc)
            proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(60))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(None)
        return codes


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {
        f"DURQ_{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in values.items()
    }


def _feed(app: durq.App, config: Config, hook: str, done: threading.Event) -> None:
    """Enqueue every job at ``feed_rate``; a batch that fails is sent again with the same
    idempotency keys, so an enqueue whose commit went unanswered never doubles a job."""
    batch = max(1, int(config.feed_rate / 10))
    started = time.monotonic()
    for first in range(0, config.jobs, batch):
        items = [
            durq.EnqueueRequest(
                "record",
                {"n": n},
                idempotency_key=f"chaos-{n}",
                webhook_url=hook if n % config.webhook_every == 0 else None,
            )
            for n in range(first, min(first + batch, config.jobs))
        ]
        while True:
            try:
                app.enqueue_many(items)
                break
            except Exception:
                time.sleep(0.1)
        pause = started + (first + batch) / config.feed_rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    done.set()


def _inject(kind: str, pg: Cluster, workers: Workers, config: Config, rng: random.Random) -> None:
    if kind == "sigkill":
        workers.kill_one(rng)
    elif kind == "terminate":
        pg.terminate_backends(DATABASE, keep=MONITOR)
    elif kind == "restart-fast":
        pg.restart("fast")
    elif kind == "restart-immediate":
        pg.restart("immediate")
    elif kind == "sigstop":
        workers.stop_one(rng, config.lease_seconds + 1.5)
    else:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")


def run(config: Config, say: Callable[[str], None] = print) -> Report:
    rng = random.Random(config.seed)
    receiver = Receiver()
    with _log_dir(config) as log_dir, cluster() as pg, serving(receiver) as hook:
        # A killed worker drops its request mid-body; the receiver's server (whose start
        # set up its logging) would log a traceback for each.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        with psycopg.connect(pg.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        url = pg.admin_url.rsplit("/", 1)[0] + f"/{DATABASE}"
        app = durq.App(settings=Settings(database_url=url, **WEBHOOKS))
        # The workers' own task, so jobs carry its retry policy and attempts.
        app.tasks["record"] = replace(tasks.app.tasks["record"], app=app)
        app.migrate()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SIDE_TABLE)
        say(f"chaos: {config.jobs} jobs, {config.workers} workers, a fault every "
            f"{config.fault_every:g}s ({', '.join(config.faults)}); logs in {log_dir}")  # fmt: skip
        sampler = Sampler(url)
        sampler.start()
        workers = Workers(url, config, log_dir)
        for _ in range(config.workers):
            workers.start()
        fed = threading.Event()
        feeder = threading.Thread(target=_feed, args=(app, config, hook, fed), daemon=True)
        started = time.monotonic()
        feeder.start()
        faults: list[Fault] = []
        # Faults start once jobs flow: a recovery time means something only from there.
        while not sampler.succeeded_at(time.monotonic()) and time.monotonic() - started < 60:
            time.sleep(0.05)
        next_fault = time.monotonic() + config.fault_every
        try:
            while time.monotonic() - started < config.timeout:
                workers.replace_exited()
                kinds_done = {f.kind for f in faults}
                drained = fed.is_set() and sampler.unfinished == 0 and sampler.undelivered == 0
                if drained and kinds_done >= set(config.faults):
                    break
                if time.monotonic() < next_fault:
                    time.sleep(0.05)
                    continue
                kind = config.faults[len(faults) % len(config.faults)]
                fault = Fault(kind, time.monotonic())
                try:
                    _inject(kind, pg, workers, config, rng)
                except Exception as exc:  # a fault that failed to happen is reported
                    say(f"chaos: fault {kind} could not be injected: {exc}")
                fault.ended = time.monotonic()
                faults.append(fault)
                say(f"chaos: {fault.ended - started:6.1f}s {kind:<18} "
                    f"succeeded={sampler.succeeded_at(fault.ended)}")  # fmt: skip
                next_fault = max(next_fault + config.fault_every, time.monotonic() + 0.5)
            drain = time.monotonic() - started
            time.sleep(1.0)  # let the last samples land
        finally:
            exits = workers.stop_all()
            sampler.stop()
        for fault, after in zip(faults, [*faults[1:], None], strict=True):
            resumed = sampler.resumed_after(fault.ended)
            if resumed is not None and (after is None or fault.ended + resumed < after.started):
                fault.recovered = resumed
        report = analyse(url, config.jobs, receiver)
        report.drain_seconds = drain
        report.faults = faults
        report.worker_exits = exits
        report.exited_early = workers.exited
        if drain >= config.timeout:
            report.problems.append(f"not drained within {config.timeout:g}s")
        report.check()
        app.close()
        return report


def analyse(url: str, expected: int, receiver: Receiver) -> Report:
    """Compare durq's jobs, attempt records and outbox with what really ran."""
    report = Report(jobs=expected)
    with psycopg.connect(url, application_name=MONITOR) as conn:
        jobs = conn.execute(
            "SELECT id, state, idempotency_key FROM durq_jobs WHERE task = 'record'"
        ).fetchall()
        # A success is stored on its job row (no durq_attempts row unless one was kept).
        attempts = conn.execute(
            "SELECT job_id, claim_version, outcome FROM durq_attempts UNION ALL "
            "SELECT j.id, j.claim_version, 'succeeded' FROM durq_jobs j "
            "WHERE j.state = 'succeeded' AND NOT EXISTS (SELECT 1 FROM durq_attempts a "
            "WHERE a.job_id = j.id AND a.claim_version = j.claim_version)"
        ).fetchall()
        runs = conn.execute("SELECT job_id, claim_version FROM chaos_runs").fetchall()
        events = conn.execute("SELECT event_id, state FROM durq_outbox").fetchall()
    keys = {key for _, _, key in jobs}
    report.lost = expected - len(keys & {f"chaos-{n}" for n in range(expected)})
    recorded: dict[tuple[int, int], str] = {(j, v): o for j, v, o in attempts}
    wins = Counter(j for (j, _), o in recorded.items() if o == "succeeded")
    for job_id, state, _ in jobs:
        if state == "running":
            report.stuck += 1
        elif state != "succeeded":
            report.lost += 1  # dead-lettered, cancelled or never finished
        if wins[job_id] > 1:
            report.double += 1
        elif state == "succeeded" and wins[job_id] == 1:
            report.exactly_once += 1
    per_job: dict[int, list[int]] = defaultdict(list)
    for job_id, version in runs:
        per_job[job_id].append(version)
    for job_id, versions in per_job.items():
        report.extra_executions += len(versions) - 1
        outcomes = [recorded.get((job_id, version)) for version in versions]
        report.attempts_missing += outcomes.count(None)
        # An execution is explained when its attempt was killed or lost its lease (lost),
        # met the database away after it ran (failed), or was released at a shutdown.
        explained = sum(1 for o in outcomes if o in ("lost", "failed", "released"))
        # The execution that counts is the one that succeeded; with none, one of the rest.
        counted = 1 if "succeeded" in outcomes or not explained else 0
        report.explained += explained - (1 - counted)
    report.events = len(events)
    report.events_delivered = sum(1 for _, state in events if state == "delivered")
    delivered = {str(event_id) for event_id, state in events if state == "delivered"}
    report.events_received = len(delivered & receiver.seen)
    report.duplicate_deliveries = receiver.duplicates
    return report


@contextmanager
def _log_dir(config: Config) -> Iterator[Path]:
    if config.log_dir is not None:
        config.log_dir.mkdir(parents=True, exist_ok=True)
        yield config.log_dir
        return
    with tempfile.TemporaryDirectory(prefix="durq-chaos-logs-") as name:
        yield Path(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=Config.jobs)
    parser.add_argument("--feed-rate", type=float, default=Config.feed_rate)
    parser.add_argument("--workers", type=int, default=Config.workers)
    parser.add_argument("--fault-every", type=float, default=Config.fault_every)
    parser.add_argument("--faults", default=",".join(FAULTS), help="kinds, in turn")
    parser.add_argument("--timeout", type=float, default=Config.timeout)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-dir", type=Path, default=None, help="keep the worker logs here")
    args = parser.parse_args(argv)
    config = Config(
        jobs=args.jobs,
        feed_rate=args.feed_rate,
        workers=args.workers,
        fault_every=args.fault_every,
        faults=tuple(k.strip() for k in args.faults.split(",") if k.strip()),
        timeout=args.timeout,
        seed=args.seed,
        log_dir=args.log_dir,
    )
    report = run(config)
    print(report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
