# Recipes for working on resident. CI runs .ci/run, which needs none of these.

# Everything CI checks.
default: lint test

# The test suite (modest shuttle iterations and loom bounds).
test:
    cargo test --workspace

# Deep shuttle exploration of the whole catalogue.
sim iterations="20000" seed="24301":
    cargo run --release -p resident-sim -- explore --scheduler random --iterations {{iterations}} --seed {{seed}}
    cargo run --release -p resident-sim -- explore --scheduler pct --iterations {{iterations}} --seed {{seed}}

# Exhaustive loom exploration (each scenario at its own preemption bound).
loom:
    cargo run --release -p resident-sim -- explore --scheduler loom
    # The lease word's kernel one preemption deeper than `cargo test` runs it.
    cargo run --release -p resident-sim -- explore --scheduler loom --scenario M-L3 --loom-bound 3
    # `cargo test` runs these at bound 1 (its time budget; each one's mutants die at 1 too, and
    # the lease word's own kernel, M-L3, covers the lease at 2): here at 2.
    cargo run --release -p resident-sim -- explore --scheduler loom --loom-bound 2 --scenario M-L1 --scenario M-S2 --scenario M-E5 --scenario W-7 --scenario X-1 --scenario X-3

# A deep campaign of generated concurrent programs (linearizability and every invariant).
programs programs="2000" schedules="200":
    RESIDENT_PROGRAMS={{programs}} RESIDENT_SCHEDULES={{schedules}} cargo test --release -p resident-proptests --test concurrent generated -- --nocapture

# Which mutants the generated programs find without being told where.
teeth:
    cargo test --release -p resident-proptests --test concurrent teeth -- --ignored --nocapture

# Shuttle iterations lowered, loom off, short campaigns: what each mutant is judged by.
mutation_env := "RESIDENT_SIM_ITERATIONS=60 RESIDENT_SIM_LOOM=off RESIDENT_PROGRAMS=40 RESIDENT_SCHEDULES=20"

# Mutation testing of `resident` with cargo-mutants (never in CI; hours). Sharded round-robin
# over the mutants of `manager/`, `layer/`, `cache/` and `runtime/` (one shard of 5 is a sample
# of about 150): run each of `shards` with `shard=K` (0-based). Without the burn feature (no
# burn file is mutated; its test binaries would double each mutant's build), shuttle
# iterations lowered, loom off. Results in `mutants.out/`.
mutation shard="0" shards="5":
    cargo install --locked cargo-mutants@27.1.0
    # cargo-mutants' own baseline tests only the mutated package; each mutant is judged by the
    # whole workspace, so the unmutated workspace must pass under the same settings first.
    {{mutation_env}} cargo test --profile mutants --workspace --no-default-features --tests -- --skip campaign_finds
    {{mutation_env}} cargo mutants --package resident --test-workspace=true --baseline skip --profile mutants --no-default-features --no-shuffle --sharding round-robin --shard {{shard}}/{{shards}} --timeout 60 -f 'core/src/manager/**' -f 'core/src/layer/**' -f 'core/src/cache/**' -f 'core/src/runtime/**' -- --tests -- --skip campaign_finds

# The kill matrix.
mutants:
    cargo run --release -p resident-sim -- mutants

# Reproduce a failing schedule.
replay FILE:
    cargo run --release -p resident-sim -- replay {{FILE}}

# The example timeline: a stored failure drawn as SVG (docs/timeline.svg, checked by
# sim/tests/docs.rs), then rendered to PNG in headless Chromium (Debian's `chromium`) to look at.
timeline replay="fixtures/replays/M-S1-random-24301-retire-while-held.json":
    # replay exits 1 when the failure reproduces, as it must here
    cargo run --release -p resident-sim -- replay {{replay}} --svg docs/timeline.svg || [ $? -eq 1 ]
    mkdir -p target
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,640 --screenshot={{justfile_directory()}}/target/timeline.png docs/timeline.svg
    @echo "target/timeline.png"

# Regenerate the stored mutant replays (after moving scheduling points or upgrading shuttle).
fixtures:
    rm -f fixtures/replays/*.json
    cargo run --release -p resident-sim -- mutants --write fixtures/replays
    # The stored programs come from several campaigns (the `finds` tests, `teeth`): a program
    # whose mutant still breaks the same invariant gets its text rewritten; one that no longer
    # replays is deleted and found again by its `finds` test with RESIDENT_FAILURES set.
    RESIDENT_WRITE_FIXTURES=1 cargo test --release -p resident-proptests --test concurrent stored_failing_programs_replay

# Benchmarks (results in BENCHMARKS.md): resident's read paths as ratios to quick_cache, moka,
# a Mutex<HashMap> and a strict LRU (5 rounds, each at a low load average), then the hot paths.
bench:
    cargo bench -p resident-bench --bench read_path
    cargo bench -p resident-bench --bench hot_paths

# The serving example on ndarray: throughput, latency, loads, evictions, budget.
serve:
    cargo run --release -p resident --example serve

# Regenerate the fixture burn models and their stored outputs.
models:
    RESIDENT_WRITE_FIXTURES={{justfile_directory()}}/fixtures/models cargo test -p resident --test burn_models regenerate

# Build the CUDA smoke binary (compiles without a GPU) and run it where a CUDA driver exists.
cuda-smoke:
    scripts/cuda-smoke.sh

# Formatting and lints.
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings

# The public API's changes against a baseline commit, judged as a minor release so that every
# break is listed (needs `cargo install cargo-semver-checks`; never in CI).
semver base="bc90572":
    cargo semver-checks -p resident --baseline-rev {{base}} --release-type minor
