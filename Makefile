# The two commands a newcomer needs: `make demo` and `make test`. Both create or reuse .venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.durq-installed

.PHONY: demo test lint audit bench install clean chaos

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@# PgBouncer for tests/pgbouncer (Debian's package); without apt those tests skip.
	@command -v pgbouncer >/dev/null || command -v /usr/sbin/pgbouncer >/dev/null || \
		((apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer) >/dev/null 2>&1) || \
		echo "pgbouncer not installed (no apt?): the PgBouncer tests will skip" >&2
	@# ffmpeg for the Euterpe recipe's transcodes (Debian's package); without apt they skip.
	@command -v ffmpeg >/dev/null || \
		((apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ffmpeg) >/dev/null 2>&1) || \
		echo "ffmpeg not installed (no apt?): the Euterpe transcode tests will skip" >&2
	@# Chromium for the dashboard's browser tests (Debian's package, driven by Playwright).
	@command -v chromium >/dev/null || \
		((apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1) || \
		echo "chromium not installed (no apt?): the dashboard's browser tests will skip" >&2
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/durq demo

# pytest exits 5 when it collects nothing; that must fail loudly, never pass. Two test
# processes: the suite mostly waits (on workers, servers and the browser), not computes.
test: $(STAMP)
	@$(PY) -m pytest -n 2; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests recipes
	$(VENV)/bin/ruff format --check src tests recipes
	$(VENV)/bin/mypy
	$(VENV)/bin/bandit -c pyproject.toml -r src -q
	@$(MAKE) --no-print-directory audit

# Known vulnerabilities in the pinned dependencies: pip-audit reads constraints.txt as it is
# (every pin, no resolving, nothing installed). A finding fails the build unless
# pip-audit-ignore.txt lists its id with the reason it does not apply. Without a route to
# the advisory service (or with DURQ_AUDIT=offline) the audit says so and is skipped.
AUDIT_IGNORES = $(shell sed -e 's/\#.*//' -e '/^[[:space:]]*$$/d' -e 's/^[[:space:]]*/--ignore-vuln /' pip-audit-ignore.txt)

audit: $(STAMP)
	@# The advisory data is PyPI's JSON API per release: probe it with one of our own pins (a
	@# registry mirror may serve packages but not that API).
	@if [ "$${DURQ_AUDIT:-auto}" = offline ] || ! $(PY) -c "import urllib.request as r; r.urlopen('https://pypi.org/pypi/fastapi/' + [l.split('==')[1].strip() for l in open('constraints.txt') if l.lower().startswith('fastapi==')][0] + '/json', timeout=5)" >/dev/null 2>&1; then \
		echo "pip-audit skipped: offline (DURQ_AUDIT=offline, or PyPI's advisory data for these pins is out of reach); run 'make audit' where it is reachable"; \
	else \
		$(VENV)/bin/pip-audit --strict --progress-spinner off --disable-pip --no-deps -r constraints.txt $(AUDIT_IGNORES); \
	fi

# The peers live in their own venv so `make test` never installs them.
BENCH_VENV  := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.durq-bench-installed

$(BENCH_STAMP): pyproject.toml bench/constraints.txt
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -c bench/constraints.txt -e '.[bench]'
	@touch $(BENCH_STAMP)

# Benchmarks, durq beside its peers: `make bench BENCH_ARGS="--full --output bench/results/x.json"`.
bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/durq bench --compare $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) durq-demo.db durq-demo.db-wal durq-demo.db-shm durq-demo.db-wake .pytest_cache .mypy_cache

# Faults while workers drain jobs, on a throwaway PostgreSQL (docs/reliability.md):
# `make chaos CHAOS_ARGS="--jobs 2000"`. Not part of `make test`, which runs a short one.
chaos: $(STAMP)
	$(PY) -m tests.chaos.run $(CHAOS_ARGS)
